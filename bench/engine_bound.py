"""Issue 2.2: the boto3-bound client vs botocore answering canned responses vs moto in-process."""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import _workload as w
from ._common import (
    Contender,
    Section,
    Settings,
    Table,
    Target,
    guard_client_config,
    package_version,
    profile_contender,
    run_interleaved,
    scratch_dir,
    try_import,
)
from .engine_direct import MotoInProcess, _ClientContender

TARGET = 0.85  # bound >= 85% of the botocore floor
LOCAL_TARGET = 1.2  # local_client >= 1.2x the botocore floor (issue 16)
QUICK_FLOOR = "botocore floor, before-call"
# The floor's client with the engine answering each request at before-send (the body decoded, the
# operation run, the answer encoded: wire_call), then the floor's canned answer: no binding code.
ENGINE_FLOOR = "botocore floor + engine"
# The target compares like with like: the full botocore stack, answered by the engine
# (full_stack=True) or by a canned response. The default quick path skips botocore's HTTP half,
# so its ratio to that floor is information (it is above 1).
FULL = "bound, full stack"
NAMES = {"full_stack": FULL, "bind": "bound (quick path)", "local_client": "local_client"}

CCF_BODY = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",'
    b'"message":"The conditional request failed"}'
)


def boto3_client() -> Any:
    """A plain boto3 DynamoDB client with static fake credentials and no config files.

    Both the floor and our bound client are built by this function, so the only difference
    between them is who answers ``before-send``.
    """
    import boto3
    import botocore.session

    session = botocore.session.Session(profile=None)
    for name, value in (
        ("config_file", os.devnull),
        ("credentials_file", os.devnull),
        ("region", "us-east-1"),
        ("metadata_service_num_attempts", 0),
    ):
        session.set_config_variable(name, value)
    session.set_credentials("AKIDBENCH", "bench-secret")
    return boto3.session.Session(botocore_session=session).client(
        "dynamodb", region_name="us-east-1", config=guard_client_config()
    )


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self.body


class CannedResponder:
    """A ``before-send`` handler answering every request with one fixed response."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        self.headers = {
            "x-amzn-RequestId": "BENCH0000000000000000000000000000000000000000000000000",
            "Content-Type": "application/x-amz-json-1.0",
            "Content-Length": str(len(body)),
            "x-amz-crc32": str(zlib.crc32(body)),
        }

    def __call__(self, request: Any, **_kwargs: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        return AWSResponse(request.url, self.status, dict(self.headers), _Raw(self.body))


class BotocoreFloor(_ClientContender):
    """The whole botocore stack (validate, serialise, sign, parse) with no backend at all."""

    def __init__(self, workload: str) -> None:
        super().__init__("botocore floor", workload)

    def setup(self) -> None:
        self.client = boto3_client()
        ok = self.workload == "success"
        responder = CannedResponder(200 if ok else 400, b"{}" if ok else CCF_BODY)
        self.client.meta.events.register_first("before-send", responder, unique_id="bench-canned")
        self.ccf = self.client.exceptions.ConditionalCheckFailedException


class EngineFloor(_ClientContender):
    """The floor plus the engine's own work for each request, and no binding code at all: a
    ``before-send`` handler that runs the request through the engine as the HTTP server does
    (``wire_call``: decode the body, execute, encode the answer), checks the engine's status,
    then returns the floor's canned answer (so botocore parses exactly what it parses for the
    floor). It bounds the full-stack target: if even this misses 0.85x, the miss is the
    engine's own cost and no binding of this engine can meet it."""

    def __init__(self, workload: str, directory: Path) -> None:
        super().__init__(ENGINE_FLOOR, workload)
        self.path = directory / f"engine-floor-{workload}.db"
        self.engine: Any = None

    def setup(self) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.engine.binding.steps import body_of, target_of
        from firstwrite.engine.direct.client import DirectClient
        from firstwrite.engine.wire import wire_call

        self.engine = engine = Engine(self.path, durability="normal")
        direct = DirectClient(engine)
        direct.create_table(**w.CREATE_TABLE)
        direct.put_item(TableName=w.TABLE, Item=w.item(w.EXISTING_KEY))
        self.client = boto3_client()
        ok = self.workload == "success"
        canned = CannedResponder(200 if ok else 400, b"{}" if ok else CCF_BODY)
        region = self.client.meta.region_name

        def answer(request: Any, **_kwargs: Any) -> Any:
            status, _body = wire_call(engine, target_of(request), body_of(request), region)
            if status != canned.status:
                raise AssertionError(f"the engine answered {status}, not {canned.status}")
            return canned(request)

        self.client.meta.events.register_first("before-send", answer, unique_id="bench-engine")
        self.ccf = self.client.exceptions.ConditionalCheckFailedException

    def teardown(self) -> None:
        if self.engine is not None:
            self.engine.close()


class CannedCall:
    """A ``before-call`` handler answering every call with one fixed parsed response, as the
    quick path answers (registered last, like it)."""

    def __init__(self, status: int) -> None:
        from botocore.awsrequest import AWSResponse

        self.http = AWSResponse("https://bench", status, {}, _Raw(b""))
        self.status = status

    def __call__(self, **_kwargs: Any) -> Any:
        metadata = {"RequestId": "BENCH", "HTTPStatusCode": self.status, "RetryAttempts": 0}
        parsed: dict[str, Any] = {"ResponseMetadata": metadata}
        if self.status != 200:
            message = "The conditional request failed"
            parsed["Error"] = {"Message": message, "Code": "ConditionalCheckFailedException"}
            parsed["message"] = message
        return self.http, parsed


class BotocoreQuickFloor(_ClientContender):
    """botocore's client half up to ``before-call`` (validate, serialise, resolve the endpoint),
    then a canned parsed answer, ``after-call`` and the raise: what any binding answering at
    ``before-call`` (the quick path, ``local_client``) must pay, and nothing else."""

    def __init__(self, workload: str) -> None:
        super().__init__(QUICK_FLOOR, workload)

    def setup(self) -> None:
        self.client = boto3_client()
        handler = CannedCall(200 if self.workload == "success" else 400)
        self.client.meta.events.register_last("before-call", handler, unique_id="bench-canned")
        self.ccf = self.client.exceptions.ConditionalCheckFailedException


class Bound(_ClientContender):
    """Our engine behind a real boto3 client: ``bind(client, engine[, full_stack=True])`` or
    ``local_client``."""

    def __init__(self, workload: str, directory: Path, *, how: str = "bind", tag: str = "") -> None:
        super().__init__(NAMES[how], workload)
        self.path = directory / f"bound-{how}{tag}-{workload}.db"
        self.how = how
        self.engine: Any = None

    def setup(self) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.engine.binding.sync import bind, local_client

        self.engine = Engine(self.path, durability="normal")
        if self.how == "local_client":
            self.client = local_client(self.engine)
        else:
            self.client = bind(boto3_client(), self.engine, full_stack=self.how == "full_stack")
        self.prepare_table()

    def teardown(self) -> None:
        if self.engine is not None:
            self.engine.close()


def available() -> str | None:
    for module, names in (
        ("firstwrite.engine.api", ("Engine",)),
        ("firstwrite.engine.binding.sync", ("bind", "local_client")),
    ):
        _mod, why = try_import(module, *names)
        if why:
            return why
    return None


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="bound",
        title="boto3-bound client vs botocore with canned responses vs moto (issue 2.2)",
        method=[
            "The same conditional `PutItem` workloads as above, through real boto3 "
            f"{package_version('boto3')} / botocore {package_version('botocore')} clients "
            "(parameter validation, serialisation, SigV4 signing, parsing, retry handler).",
            f"**{FULL}**: `bind(client, Engine(<file>, durability='normal'), full_stack=True)` "
            "on a client built exactly like the floor's: botocore's whole stack, HTTP half "
            "included, answered by the engine at `before-send`. The target is read on it.",
            "**bound (quick path)**: `bind(client, engine)` as it comes: answered at "
            "`before-call`, after validation and serialisation, the answer built as the "
            "client's own parser would build it (from the engine's answer where provably the "
            "same, by the parser otherwise); signing, `before-send` and the retry handler run "
            "only for answers botocore might retry; parameters are validated with botocore's rules "
            "compiled (accepting exactly what botocore's validator accepts, the rest left to it). "
            "**local_client**: `local_client(engine)` as "
            f"users call it (the same quick path), with its own target (>= {LOCAL_TARGET:g}x the "
            "botocore floor, issue 16): both skip botocore's HTTP half, which the floor runs.",
            "**botocore floor**: the same client with a `before-send` handler returning a fixed "
            "`AWSResponse` (200 `{}`, or for *failing* the 400 "
            "`ConditionalCheckFailedException` body, with the same headers incl. CRC32): "
            "everything boto3 does, nothing behind it.",
            f"**{QUICK_FLOOR}**: the same client with a `before-call` handler returning a fixed "
            "parsed answer (no engine behind it): botocore's client half as botocore runs it "
            "(its own validator included), what a binding answering at `before-call` pays when "
            "it leaves that half to botocore. It bounds the `local_client` target for such a "
            f"binding: if it misses {LOCAL_TARGET:g}x too, none can meet it. (The quick path "
            "itself validates with botocore's rules compiled, `binding_validate`, so it can be "
            "faster than this floor's validation.)",
            f"**{ENGINE_FLOOR}**: the floor's client whose `before-send` handler first runs "
            "the request through the engine as the HTTP server does (`wire_call`: decode the "
            "body, execute, encode the answer; its status is checked), then returns the floor's "
            "canned answer: botocore's work plus the engine's, with no binding code. It bounds "
            f"the {FULL} target: if it misses {TARGET:g}x too, the miss is the engine's own "
            "cost, and no binding of this engine can meet it.",
            "**moto in-process**: `moto.mock_aws()` + boto3.",
            f"{settings.reps} repetitions of {settings.duration:g} s each, interleaved; the ratio "
            "is the median of per-repetition ratios.",
        ],
    )
    why = available()
    with scratch_dir("bound-") as directory:
        for workload in w.WORKLOADS:
            log(f"  bound / {workload}")
            contenders: list[Contender] = [BotocoreFloor(workload), BotocoreQuickFloor(workload)]
            skipped: dict[str, str] = {}
            if why is None:
                contenders.append(EngineFloor(workload, directory))
                contenders.append(Bound(workload, directory, how="full_stack"))
                contenders.append(Bound(workload, directory))
                contenders.append(Bound(workload, directory, how="local_client"))
            else:
                skipped[FULL] = why
            contenders.append(MotoInProcess(workload))
            series, more = run_interleaved(contenders, settings, log=log)
            skipped.update(more)
            table = Table(
                title=f"{workload} workload",
                series=series,
                ours=[FULL, NAMES["bind"], "local_client"],
                targets=[
                    Target(FULL, "botocore floor", minimum=TARGET, bound=ENGINE_FLOOR),
                    Target(
                        "local_client", "botocore floor", minimum=LOCAL_TARGET, bound=QUICK_FLOOR
                    ),
                ],
                skipped=skipped,
            )
            table.budget_note(FULL, "botocore floor", TARGET)
            table.budget_note("local_client", "botocore floor", LOCAL_TARGET)
            section.tables.append(table)
            if why is None and FULL not in skipped:
                ratio = table.ratio(FULL, "botocore floor")
                if not ratio >= TARGET:
                    log("  profiling bound, full stack (target missed)")
                    section.profiles[f"{FULL}, {workload} workload"] = profile_contender(
                        Bound(workload, directory, how="full_stack", tag="-profile"),
                        300 if settings.quick else 2000,
                    )
    return section
