"""Issue 11: the Idempotency-Key middleware's overhead per request on a trivial FastAPI handler,
against the same app with hand-written glue over Powertools' ``idempotent_function`` and against
idemkit's ASGI middleware, all on one local engine file through in-process boto3 clients.

Each request goes through the whole ASGI app in process (no sockets): the app is called with a
scope, a ``receive`` holding the JSON body and a ``send`` collecting the answer, on one event
loop per contender. The *bare* app (the same handler, no idempotency) is measured in the same
repetitions; a contender's overhead is its time per request minus the bare app's, pair by pair.
"""

import asyncio
import contextvars
import json
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any

from ._common import (
    Check,
    Contender,
    Section,
    Series,
    Settings,
    Table,
    Target,
    package_version,
    profile_contender,
    run_interleaved,
    scratch_dir,
    try_import,
)
from .idempotency import Replayed, Shared, _AsyncTable, replay

SCENARIOS = ("first call", "replay")
TIME_TARGET = 0.8  # firstwrite's overhead <= 0.8x the faster peer's
OURS = "firstwrite"
POWERTOOLS = "Powertools glue"
IDEMKIT = "idemkit"
BARE = "bare app"
CLIENT = "client-1"


def _body(order_id: str) -> bytes:
    return json.dumps(
        {"order_id": order_id, "amount": 1000, "currency": "EUR", "card": "tok_visa"}
    ).encode()


def _handler_result(order: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": order["order_id"], "status": "created", "amount": order["amount"]}


# -- the four apps ------------------------------------------------------------------------------


def bare_app(_: Shared) -> Any:
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/orders", status_code=201)
    async def create(order: dict[str, Any]) -> dict[str, Any]:
        return _handler_result(order)

    return app


def firstwrite_app(shared: Shared) -> Any:
    from firstwrite.http import HttpConfig, IdempotencyMiddleware
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    guard = Idempotency(
        IdempotencyConfig(table_name=f"firstwrite-{uuid.uuid4().hex[:8]}"), client=shared.client
    )
    guard.ensure_table()
    app = bare_app(shared)
    app.add_middleware(
        IdempotencyMiddleware,
        guard=guard,
        config=HttpConfig(principal=lambda request: request.header("x-client")),
    )
    return app


def powertools_app(shared: Shared) -> Any:
    """What a user writes today: the glue around ``idempotent_function`` (key header, scope,
    status mapping, replay marker, response reconstruction)."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )
    from fastapi import Depends, FastAPI, Request
    from fastapi.responses import JSONResponse

    warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")
    table = f"powertools-{uuid.uuid4().hex[:8]}"
    shared.create_table(table, "id", ttl_attribute="expiration")
    replayed: contextvars.ContextVar[bool] = contextvars.ContextVar("replayed", default=False)

    def mark_replay(response: Any, _record: Any) -> Any:
        replayed.set(True)
        return response

    persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=shared.client)
    config = IdempotencyConfig(
        event_key_jmespath="[client, method, path, key]",
        payload_validation_jmespath="body",
        response_hook=mark_replay,
    )

    @idempotent_function(
        data_keyword_argument="request", persistence_store=persistence, config=config
    )
    def create(request: dict[str, Any]) -> dict[str, Any]:
        return {"status": 201, "body": _handler_result(json.loads(request["body"]))}

    app = FastAPI()

    async def raw_body(request: Request) -> bytes:  # read on the loop, before the thread
        return bytes(await request.body())

    @app.post("/orders")
    def endpoint(request: Request, body: bytes = Depends(raw_body)) -> JSONResponse:
        key = request.headers.get("idempotency-key")
        if key is None:
            return JSONResponse({"error": "Idempotency-Key required"}, 400)
        key = key.strip().removeprefix('"').removesuffix('"')
        data = {
            "client": request.headers.get("x-client"),
            "method": request.method,
            "path": request.url.path,
            "key": key,
            "body": body.decode(),
        }
        try:
            result = create(request=data)
        except IdempotencyAlreadyInProgressError:
            return JSONResponse({"error": "in progress"}, 409, headers={"retry-after": "1"})
        except IdempotencyValidationError:
            return JSONResponse({"error": "key reused with another request"}, 422)
        headers = {"idempotent-replayed": "true"} if replayed.get() else None
        return JSONResponse(result["body"], result["status"], headers=headers)

    return app


def idemkit_app(shared: Shared) -> Any:
    from idemkit import HttpConfig
    from idemkit import IdempotencyMiddleware as IdemkitMiddleware
    from idemkit.backends.dynamodb import PK, DynamoBackend

    table = f"idemkit-{uuid.uuid4().hex[:8]}"
    shared.create_table(table, PK, ttl_attribute="ttl")
    backend = DynamoBackend(table=table, create_table=False)
    backend._table = _AsyncTable(shared.bound_resource().Table(table))
    app = bare_app(shared)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app.add_middleware(
            IdemkitMiddleware,
            backend=backend,
            config=HttpConfig(
                scope=lambda request: request.headers.get("x-client"),
                wait_timeout_seconds=0.0,  # like the others: answer "in progress" at once
                compat_mode="stripe",  # Idempotent-Replayed, as the others send
            ),
            manage_backend=False,
        )
    return app


# -- driving an ASGI app in process ---------------------------------------------------------------


class _Driver:
    """Calls an ASGI app in process on its own event loop: one request, one answer."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()

    def post(self, body: bytes, key: str) -> tuple[int, dict[bytes, bytes], bytes]:
        return self.loop.run_until_complete(self._post(body, key))

    async def _post(self, body: bytes, key: str) -> tuple[int, dict[bytes, bytes], bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/orders",
            "raw_path": b"/orders",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"bench"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"idempotency-key", key.encode()),
                (b"x-client", CLIENT.encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
        }
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        answer: dict[str, Any] = {"headers": {}, "body": []}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["headers"] = dict(message.get("headers", []))
            elif message["type"] == "http.response.body":
                answer["body"].append(message.get("body", b""))

        await self.app(scope, receive, send)
        return answer["status"], answer["headers"], b"".join(answer["body"])

    def close(self) -> None:
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()


class AppScenario(Contender):
    """One app, one scenario; counts DynamoDB calls during timed slices only."""

    def __init__(self, shared: Shared, name: str, factory: Callable[[Shared], Any], scenario: str):
        self.shared = shared
        self.name = name
        self.factory = factory
        self.scenario = scenario
        self.driver: _Driver | None = None
        self.requests = 0
        self.calls = 0
        self.cpu = 0.0  # process CPU seconds (all threads) during the timed slices
        self._mark = 0
        self._cpu_mark = 0.0
        self._prefix = uuid.uuid4().hex[:8]
        self._expected = b""

    def setup(self) -> None:
        self.driver = _Driver(self.factory(self.shared))
        if self.scenario == "replay":
            status, _, body = self.driver.post(_body(f"{self._prefix}-dup"), f"{self._prefix}-dup")
            if status != 201:
                raise RuntimeError(f"{self.name}: the first call answered {status}: {body!r}")
            self._expected = body

    def resume(self) -> None:
        self._mark = self.shared.counter.total
        self._cpu_mark = time.process_time()

    def pause(self) -> None:
        self.calls += self.shared.counter.total - self._mark
        self.cpu += time.process_time() - self._cpu_mark

    def op(self, i: int) -> None:
        driver = self.driver
        assert driver is not None
        self.requests += 1
        if self.scenario == "first call":
            key = f"{self._prefix}-{i}"
            status, headers, body = driver.post(_body(key), key)
            if status != 201 or b"idempotent-replayed" in headers:
                raise AssertionError(f"{self.name}: first call answered {status} {body!r}")
        else:
            key = f"{self._prefix}-dup"
            status, headers, body = driver.post(_body(key), key)
            # The glue rebuilds the body from Powertools' stored dict (keys re-sorted): equal
            # JSON, not equal bytes. The middlewares replay the bytes.
            same = (
                json.loads(body) == json.loads(self._expected)
                if self.name == POWERTOOLS
                else body == self._expected
            )
            if status != 201 or not same:
                raise AssertionError(f"{self.name} replayed {status} {body!r}")
            if self.name != BARE and headers.get(b"idempotent-replayed") != b"true":
                raise AssertionError(f"{self.name}: a replay without Idempotent-Replayed")

    def teardown(self) -> None:
        if self.driver is not None:
            self.driver.close()

    @property
    def calls_per_request(self) -> float:
        return self.calls / self.requests if self.requests else float("nan")


def calls_alone(name: str) -> str:
    return f"{name}'s calls alone"


class CallsAlone(AppScenario):
    """The bare app plus the DynamoDB calls one request of ``factory``'s app made (recorded),
    replayed on the same client with none of the middleware around them, each in a worker
    thread as a middleware that never blocks the event loop must make them: what any such
    middleware making exactly those calls costs at least. On *first call* each replay gets a
    fresh key value; a replayed call must end as the recorded one did."""

    def __init__(self, shared: Shared, name: str, factory: Callable[[Shared], Any], scenario: str):
        super().__init__(shared, calls_alone(name), factory, scenario)
        self._bare: _Driver | None = None
        self._steps: list[list[Replayed]] = []
        self._ccf: type[BaseException] = Exception

    def setup(self) -> None:
        super().setup()  # the app under test (and, for a replay, its completed key)
        driver = self.driver
        assert driver is not None
        self._bare = _Driver(bare_app(self.shared))
        client = self.shared.client
        self._ccf = client.exceptions.ConditionalCheckFailedException
        key = f"{self._prefix}-dup" if self.scenario == "replay" else f"{self._prefix}-rec"
        recorded = self.shared.record(lambda: driver.post(_body(key), key))
        if not recorded:
            raise RuntimeError(f"{self.name}: the app made no DynamoDB call")
        calls = self.shared.replayable(recorded, fresh=self.scenario == "first call")
        # One guard step per call here (claim; complete): each gets its own hop.
        self._steps = [[call] for call in calls]

    def op(self, i: int) -> None:
        assert self._bare is not None
        self.requests += 1
        self._bare.loop.run_until_complete(self._request(i))

    async def _request(self, i: int) -> None:
        # Off the loop like the middleware's own calls: one worker-thread hop per guard step
        # (claim, then complete), around the bare app's request.
        steps = self._steps
        await asyncio.to_thread(self._replay, steps[0], i)
        assert self._bare is not None
        status, _, _ = await self._bare._post(_body(f"{self._prefix}-{i}"), f"{self._prefix}-{i}")
        if status != 201:
            raise AssertionError(f"the bare app answered {status}")
        for step in steps[1:]:
            await asyncio.to_thread(self._replay, step, i)

    def _replay(self, calls: list[Replayed], i: int) -> None:
        replay(calls, i, self._ccf, self.name)

    def teardown(self) -> None:
        super().teardown()
        if self._bare is not None:
            self._bare.close()


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="middleware",
        title="Idempotency-Key middleware vs Powertools glue vs idemkit (issue 11)",
        method=[
            "One FastAPI app, one trivial handler (`POST /orders`: a 4-field JSON order in, 201 "
            "with a 3-field JSON answer), four ways: bare; with firstwrite's "
            "`IdempotencyMiddleware` (a synchronous `Idempotency` guard on the shared client, "
            "run in worker threads so the event loop never blocks); with hand-written glue "
            "around Powertools "
            f"{package_version('aws-lambda-powertools')} `idempotent_function` in a sync "
            "endpoint (FastAPI's worker thread: header, scope, 409/422 mapping, the replay "
            "marker through `response_hook`); with idemkit "
            f"{package_version('idemkit')}'s `IdempotencyMiddleware` (`DynamoBackend`; its "
            "aioboto3 table replaced by a thin adapter that calls boto3 inline on the loop, "
            "as in the idempotency benchmark).",
            "Every contender scopes the key by a client header, method and path, fingerprints "
            "the body, and sends `Idempotent-Replayed: true` on a replay (idemkit in its "
            "`stripe` compatibility mode for that header). The middlewares replay the stored "
            "bytes; the Powertools glue rebuilds the body from the stored dict (same JSON, keys "
            "re-sorted). One engine file (`durability='normal'`) and one shared client: first a "
            "boto3 client bound in process, then the `DirectClient` (idemkit needs a boto3 "
            "resource, so it runs on the first only). DynamoDB calls counted during the timed "
            "slices.",
            "Requests are ASGI calls in process (scope, receive, send; no sockets), one event "
            "loop per contender. *first call*: a new key each request. *replay*: the key of a "
            "completed request.",
            "**Overhead** = a contender's time per request minus the bare app's in the same "
            "repetition (pairs measured seconds apart); the target compares overheads: "
            f"firstwrite <= {TIME_TARGET}x the faster peer. **{calls_alone(OURS)}**: the bare "
            "app plus the DynamoDB calls of one firstwrite request replayed with no middleware "
            "code, each in a worker thread (`asyncio.to_thread`, as a middleware that never "
            "blocks the event loop must): the least any such middleware making those calls "
            "costs (the bound). "
            f"{settings.reps} repetitions of {settings.duration:g} s, interleaved.",
        ],
    )
    for direct in (False, True):
        _run_on_client(section, settings, log, direct=direct)
    return section


def _run_on_client(
    section: Section, settings: Settings, log: Callable[[str], None], *, direct: bool
) -> None:
    client_name = "DirectClient" if direct else "boto3 bound in process"
    with scratch_dir("middleware-") as directory:
        shared = Shared(directory, direct=direct)
        try:
            factories: list[tuple[str, Callable[[Shared], Any]]] = [(BARE, bare_app)]
            skipped: dict[str, str] = {}
            for name, module, factory in (
                (OURS, "firstwrite.http", firstwrite_app),
                (POWERTOOLS, "aws_lambda_powertools.utilities.idempotency", powertools_app),
                (IDEMKIT, "idemkit.backends.dynamodb", idemkit_app),
            ):
                _, why = try_import(module)
                if name == IDEMKIT and direct:
                    why = "needs a boto3 resource, which the DirectClient is not"
                if why is None:
                    factories.append((name, factory))
                else:
                    skipped[name] = why
            for scenario in SCENARIOS:
                log(f"  middleware / {scenario}, {client_name}")
                contenders: list[AppScenario] = [
                    AppScenario(shared, n, f, scenario) for n, f in factories
                ]
                if any(n == OURS for n, _ in factories):
                    contenders.append(CallsAlone(shared, OURS, firstwrite_app, scenario))
                series, more = run_interleaved(contenders, settings, log=log)
                table = _table(
                    f"{scenario}, {client_name}", series, contenders, {**skipped, **more}
                )
                section.tables.append(table)
                if table.targets and not _met(table):
                    log(f"  profiling firstwrite / {scenario} (target missed)")
                    section.profiles[f"firstwrite, {scenario}, {client_name}"] = profile_contender(
                        AppScenario(shared, OURS, firstwrite_app, scenario),
                        200 if settings.quick else 2000,
                    )
        finally:
            shared.close()


def _met(table: Table) -> bool:
    target = table.targets[0]
    return target.passed(table.ratio(target.ours, target.peer))


def _table(
    scenario: str, series: list[Series], contenders: list[AppScenario], skipped: dict[str, str]
) -> Table:
    whole = {s.name: [1e6 / v for v in s.values] for s in series}
    bare = whole.get(BARE, [])
    overheads = [
        Series(name, [t - b for t, b in zip(times, bare, strict=False)], unit="µs/request")
        for name, times in whole.items()
        if name != BARE and bare
    ]
    calls = {c.name: c.calls_per_request for c in contenders if c.requests}
    cpu = {c.name: c.cpu / c.requests * 1e6 for c in contenders if c.requests}
    table = Table(
        title=f"{scenario}: overhead over the bare app",
        series=overheads,
        ours=[OURS],
        skipped=skipped,
        extra={
            "whole request µs (median)": {
                n: f"{sorted(v)[len(v) // 2]:,.1f}" for n, v in whole.items() if v
            },
            "CPU µs/request (all threads)": {n: f"{v:,.0f}" for n, v in cpu.items()},
            "DynamoDB calls/request": {n: f"{v:.2f}" for n, v in calls.items()},
        },
    )
    if bare:
        bare_cpu = cpu.get(BARE)
        table.notes.append(
            f"The bare app: {sorted(bare)[len(bare) // 2]:,.1f} µs per request (median)"
            + ("." if bare_cpu is None else f", {bare_cpu:,.0f} µs CPU.")
        )
    peers = [s for s in overheads if s.name in (POWERTOOLS, IDEMKIT) and s.values]
    if table.get(OURS) is not None and peers:
        faster = min(peers, key=lambda s: s.median)
        bound = calls_alone(OURS) if table.get(calls_alone(OURS)) is not None else None
        table.targets.append(Target(OURS, faster.name, maximum=TIME_TARGET, bound=bound))
        table.notes.append(f"The faster peer here: {faster.name}.")
    ours = calls.get(OURS)
    for peer in (POWERTOOLS, IDEMKIT):
        theirs = calls.get(peer)
        table.checks.append(
            Check(
                f"{OURS} / {peer} DynamoDB calls per request",
                "n/a" if ours is None or theirs is None else f"{ours:.2f} vs {theirs:.2f}",
                "no more",
                None if ours is None or theirs is None else ours <= theirs + 1e-9,
            )
        )
    return table
