"""Issue 4: firstwrite's idempotency layer vs Powertools' ``idempotent_function`` vs idemkit.

All three run on one engine file, through boto3 clients bound to it in-process (the same
client for firstwrite and Powertools; idemkit's backend needs a boto3 *resource*, whose client
is bound to the same engine). DynamoDB calls are counted with a botocore ``before-call``
handler; time per request is wall time of the whole decorated call.
"""

from __future__ import annotations

import copy
import hashlib
import json
import statistics
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore import xform_name

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
from .engine_bound import boto3_client

SCENARIOS = ("first call", "duplicate", "in progress")
TIME_TARGET = 0.8  # firstwrite time per request <= 0.8x Powertools
OURS = "firstwrite"
POWERTOOLS = "Powertools"
IDEMKIT = "idemkit"


class CallCounter:
    """Counts every DynamoDB API call a client makes (one per operation, retries excluded), in
    all and per table.

    A library's calls are those on its own table: a library may still be making a call after
    its request has returned (idemkit's event-loop thread finishes its in-progress request's
    UpdateItem after the caller got ``IdempotencyConflict``), and a total over the shared client
    would put that call in whichever contender's timed slice it lands in."""

    def __init__(self) -> None:
        self.total = 0
        self.by_table: dict[str, int] = {}

    def attach(self, client: Any) -> None:
        # before-parameter-build carries the caller's parameters (before-call has the
        # serialised body only) and, like before-call, fires once per operation
        client.meta.events.register("before-parameter-build.dynamodb", self._on_call)

    def _on_call(self, params: dict[str, Any], **_kwargs: Any) -> None:
        self.count(params)

    def count(self, params: dict[str, Any]) -> None:
        """One call with these parameters (its table: ``TableName``, or a transaction's
        first item's)."""
        self.total += 1
        table = params.get("TableName")
        if table is None:
            for action in params.get("TransactItems", ())[:1]:
                for body in action.values():
                    table = body.get("TableName")
        if isinstance(table, str):
            self.by_table[table] = self.by_table.get(table, 0) + 1

    def on(self, tables: tuple[str, ...]) -> int:
        """The calls made on ``tables`` so far."""
        return sum(self.by_table.get(t, 0) for t in tables)


# One recorded DynamoDB call: (client method name, its parameters, whether it failed its condition).
Recorded = tuple[str, dict[str, Any], bool]


class _CountedClient:
    """A DirectClient (which has no botocore events) whose operation calls are counted, and
    recorded while ``recording`` is a list."""

    def __init__(self, client: Any, counter: CallCounter) -> None:
        self._client = client
        self._counter = counter
        self.recording: list[Recorded] | None = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name in ("exceptions", "meta") or not callable(attr):
            return attr
        counter = self._counter
        ccf = self._client.exceptions.ConditionalCheckFailedException

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter.count(kwargs)
            recording = self.recording
            if recording is None:
                return attr(*args, **kwargs)
            params = copy.deepcopy(kwargs)
            try:
                response = attr(*args, **kwargs)
            except ccf:
                recording.append((name, params, True))
                raise
            recording.append((name, params, False))
            return response

        setattr(self, name, counted)  # build the wrapper once per operation
        return counted


class Shared:
    """One engine, one client (boto3 bound in process, or the DirectClient), one counter."""

    def __init__(self, directory: Path, *, direct: bool = False) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.engine.binding.sync import bind
        from firstwrite.engine.direct.client import DirectClient

        self.engine = Engine(directory / "idempotency.db", durability="normal")
        self.counter = CallCounter()
        self.client: Any
        if direct:
            self.client = _CountedClient(DirectClient(self.engine), self.counter)
        else:
            self.client = bind(boto3_client(), self.engine)
            self.counter.attach(self.client)

    def record(self, fn: Callable[[], Any]) -> list[Recorded]:
        """The DynamoDB calls ``fn()`` makes on the shared client, in order."""
        if isinstance(self.client, _CountedClient):
            self.client.recording = recorded = []
            try:
                fn()
            finally:
                self.client.recording = None
            return recorded
        return record_calls(self.client, fn)

    def replayable(self, recorded: list[Recorded], *, fresh: bool) -> list[Replayed]:
        """``recorded`` calls bound to the shared client's methods (:func:`replayable`)."""
        return replayable(self.client, recorded, fresh=fresh)

    def bound_resource(self) -> Any:
        """A boto3 DynamoDB resource whose client answers from the same engine."""
        import boto3

        from firstwrite.engine.binding.sync import bind

        resource = boto3.session.Session(
            aws_access_key_id="AKIDBENCH",
            aws_secret_access_key="bench-secret",
            region_name="us-east-1",
        ).resource("dynamodb", region_name="us-east-1")
        bind(resource.meta.client, self.engine)
        self.counter.attach(resource.meta.client)
        return resource

    def create_table(self, name: str, key: str, *, ttl_attribute: str | None = None) -> None:
        self.client.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        if ttl_attribute is not None:
            # Like for like: every library's table has TTL on, as each one's docs require.
            self.client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute},
            )

    def close(self) -> None:
        self.engine.close()


# A recorded call, ready to replay: (bound method, params, whether it failed its condition,
# the partition key attribute given a new value on each replay, or None).
Replayed = tuple[Callable[..., Any], dict[str, Any], bool, str | None]


def record_calls(client: Any, fn: Callable[[], Any]) -> list[Recorded]:
    """The DynamoDB calls ``fn()`` makes on a boto3 ``client``, in order, each with whether its
    condition failed."""
    calls: list[list[Any]] = []

    def on_params(params: dict[str, Any], model: Any, **_kwargs: Any) -> None:
        calls.append([xform_name(model.name), copy.deepcopy(params), False])

    def on_answer(parsed: dict[str, Any], **_kwargs: Any) -> None:
        code = parsed.get("Error", {}).get("Code")
        calls[-1][2] = code == "ConditionalCheckFailedException"

    events = client.meta.events
    hooks = (("provide-client-params.dynamodb", on_params), ("after-call.dynamodb", on_answer))
    for event, hook in hooks:  # unique ids are per emitter, not per event
        events.register(event, hook, unique_id=f"bench-record-{event}")
    try:
        fn()
    finally:
        for event, _hook in hooks:
            events.unregister(event, unique_id=f"bench-record-{event}")
    return [(name, params, failed) for name, params, failed in calls]


def replayable(client: Any, recorded: list[Recorded], *, fresh: bool) -> list[Replayed]:
    """``recorded`` calls bound to ``client``'s methods, for :func:`replay`; ``fresh``: each
    replay writes a new key value (the table's partition key)."""
    keys: dict[str, str] = {}
    calls: list[Replayed] = []
    for method, params, failed in recorded:
        table = params.get("TableName")
        if fresh and table is not None and table not in keys:
            schema = client.describe_table(TableName=table)["Table"]["KeySchema"]
            keys[table] = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
        calls.append((getattr(client, method), params, failed, keys.get(table or "")))
    return calls


def replay(calls: list[Replayed], i: int, ccf: type[BaseException], name: str) -> None:
    """Make ``calls`` again (replay number ``i``); each must end as the recorded one did:
    written, or its condition failed (``ccf``)."""
    for method, params, failed, fresh in calls:
        request = params
        if fresh is not None:  # a new key value, in the item or key the call names
            request = dict(params)
            part = "Item" if "Item" in request else "Key"
            attributes = request[part] = dict(request[part])
            attributes[fresh] = {"S": f"{attributes[fresh]['S']}#{i}"}
        try:
            method(**request)
        except ccf:
            if failed:
                continue
            raise
        if failed:
            raise AssertionError(f"{name}: a replayed call that had failed went through")


def _order(order_id: str, *, block: bool = False) -> dict[str, Any]:
    order: dict[str, Any] = {
        "order_id": order_id,
        "amount": 1000,
        "currency": "EUR",
        "card": "tok_visa",
    }
    if block:
        order["block"] = True
    return order


class Library:
    """One idempotency library wrapping ``charge(order)``; ``in_progress`` is its exception."""

    name: str
    in_progress: tuple[type[BaseException], ...] = ()
    tables: tuple[str, ...] = ()  # the tables its calls go to (what its calls are counted on)

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.entered = threading.Event()
        self.release = threading.Event()

    def body(self, order: dict[str, Any]) -> dict[str, Any]:
        """The side effect: blocks for the in-progress scenario, else returns at once."""
        if order.get("block"):
            self.entered.set()
            self.release.wait(60)
        return {"order_id": order["order_id"], "status": "charged", "amount": order["amount"]}

    def call(self, order: dict[str, Any]) -> Any:
        raise NotImplementedError


class FirstwriteLib(Library):
    name = OURS

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        api = _firstwrite_api()
        assert not isinstance(api, str)
        idempotency_cls, config_cls, in_progress = api
        self.in_progress = (in_progress,)
        table = f"firstwrite-{uuid.uuid4().hex[:8]}"
        self.tables = (table,)
        # A live duplicate answered at once, as Powertools and idemkit answer it: the default
        # in-progress wait's own cost is measured apart (bench/budget.py).
        config = config_cls(table_name=table, in_progress_wait=0)
        self.guard = idempotency_cls(config, client=shared.client)
        self.guard.ensure_table()
        from firstwrite import idempotent

        def charge(order: dict[str, Any]) -> dict[str, Any]:
            return self.body(order)

        # Key from order_id, every argument fingerprinted: the decorator's defaults.
        self.charge: Callable[..., Any] = idempotent(self.guard, key="order.order_id")(charge)

    def call(self, order: dict[str, Any]) -> Any:
        return self.charge(order=order)


class PowertoolsLib(Library):
    name = POWERTOOLS

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
        )

        self.in_progress = (IdempotencyAlreadyInProgressError,)
        # Outside Lambda it warns on every claim that it has no remaining-time context.
        warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")
        table = f"powertools-{uuid.uuid4().hex[:8]}"
        self.tables = (table,)
        shared.create_table(table, "id", ttl_attribute="expiration")
        persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=shared.client)
        # Key from order_id, the whole payload validated: what firstwrite does by default.
        config = IdempotencyConfig(event_key_jmespath="order_id", payload_validation_jmespath="@")

        def charge(order: dict[str, Any]) -> dict[str, Any]:
            return self.body(order)

        self.charge: Callable[..., Any] = idempotent_function(
            data_keyword_argument="order", persistence_store=persistence, config=config
        )(charge)

    def call(self, order: dict[str, Any]) -> Any:
        return self.charge(order=order)


class _AsyncTable:
    """idemkit's DynamoBackend awaits an aioboto3 Table; this runs boto3's Table inline.

    aioboto3 is not installed (and not ours to add); awaiting a synchronous in-process call
    keeps idemkit's own logic unchanged and adds no I/O wait.
    """

    def __init__(self, table: Any) -> None:
        self._table = table

    async def update_item(self, **kwargs: Any) -> Any:
        return self._table.update_item(**kwargs)

    async def get_item(self, **kwargs: Any) -> Any:
        return self._table.get_item(**kwargs)

    async def delete_item(self, **kwargs: Any) -> Any:
        return self._table.delete_item(**kwargs)

    async def put_item(self, **kwargs: Any) -> Any:
        return self._table.put_item(**kwargs)


class IdemkitLib(Library):
    name = IDEMKIT

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        from idemkit import IdempotencyConflict, MethodConfig, idempotent_sync
        from idemkit.backends.dynamodb import PK, DynamoBackend

        self.in_progress = (IdempotencyConflict,)
        table = f"idemkit-{uuid.uuid4().hex[:8]}"
        self.tables = (table,)
        shared.create_table(table, PK, ttl_attribute="ttl")
        backend = DynamoBackend(table=table, create_table=False)
        backend._table = _AsyncTable(shared.bound_resource().Table(table))
        config = MethodConfig(
            key_fields=["order.order_id"],
            validation_fingerprint=lambda args: json.dumps(args["order"], sort_keys=True).encode(),
            scope=lambda _args: "bench",
            wait_timeout_seconds=0.0,  # like the others: answer "in progress" at once
        )

        def charge(order: dict[str, Any]) -> dict[str, Any]:
            return self.body(order)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.charge: Callable[..., Any] = idempotent_sync(backend=backend, config=config)(
                charge
            )

    def call(self, order: dict[str, Any]) -> Any:
        return self.charge(order=order)


def _firstwrite_api() -> tuple[Any, Any, type[BaseException]] | str:
    """(Idempotency, IdempotencyConfig, InProgressError) from the public API, or why not."""
    top, why = try_import(
        "firstwrite", "Idempotency", "IdempotencyConfig", "InProgressError", "idempotent"
    )
    if top is None:
        return why or "?"
    return top.Idempotency, top.IdempotencyConfig, top.InProgressError


def _idemkit_available() -> str | None:
    mod, why = try_import("idemkit.backends.dynamodb", "DynamoBackend")
    return why if mod is None else None


class Scenario(Contender):
    """One library, one scenario; counts calls and requests during timed slices only."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        self.shared = shared
        self.factory = factory
        self.scenario = scenario
        self.lib: Library | None = None
        self.name = getattr(factory, "name", "?")
        self.requests = 0
        self.calls = 0
        self._mark = 0
        self._thread: threading.Thread | None = None
        self._prefix = uuid.uuid4().hex[:8]
        self._expected: Any = None

    def setup(self) -> None:
        lib = self.lib = self.factory(self.shared)
        if self.scenario == "duplicate":
            self._expected = lib.call(_order(f"{self._prefix}-dup"))
        elif self.scenario == "in progress":
            order = _order(f"{self._prefix}-busy", block=True)
            self._thread = threading.Thread(target=lib.call, args=(order,), daemon=True)
            self._thread.start()
            if not lib.entered.wait(30):
                raise RuntimeError("the in-progress call never started its body")

    def resume(self) -> None:
        self._mark = self.shared.counter.on(self._tables())

    def pause(self) -> None:
        self.calls += self.shared.counter.on(self._tables()) - self._mark

    def _tables(self) -> tuple[str, ...]:
        return self.lib.tables if self.lib is not None else ()

    def op(self, i: int) -> None:
        lib = self.lib
        assert lib is not None
        self.requests += 1
        if self.scenario == "first call":
            order = _order(f"{self._prefix}-{i}")
            result = lib.call(order)
            if result.get("order_id") != order["order_id"]:
                raise AssertionError(f"{self.name} returned {result!r}")
        elif self.scenario == "duplicate":
            result = lib.call(_order(f"{self._prefix}-dup"))
            if result != self._expected:
                raise AssertionError(f"{self.name} replayed {result!r}, not {self._expected!r}")
        else:
            try:
                lib.call(_order(f"{self._prefix}-busy", block=True))
            except lib.in_progress:
                return
            raise AssertionError(f"{self.name} ran a request whose twin is in progress")

    def teardown(self) -> None:
        if self.lib is not None:
            self.lib.release.set()
        if self._thread is not None:
            self._thread.join(30)

    @property
    def calls_per_request(self) -> float:
        return self.calls / self.requests if self.requests else float("nan")


def calls_alone(name: str) -> str:
    return f"{name}' calls alone" if name.endswith("s") else f"{name}'s calls alone"


class CallsAlone(Scenario):
    """A library's DynamoDB calls for one scenario, replayed on the same client with none of the
    library's own code around them: what a library making exactly those calls would cost if all
    its own work were free. The calls are recorded from one real request of the library; where
    the scenario needs a new key per request (*first call*), each replay gets a fresh key value.
    A replay must end as the recorded call did (written, or its condition failed)."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = calls_alone(self.name)
        self._calls: list[Replayed] = []
        self._ccf: type[BaseException] = Exception

    def setup(self) -> None:
        super().setup()
        client = self.shared.client
        self._ccf = client.exceptions.ConditionalCheckFailedException
        recorded = self.shared.record(lambda: Scenario.op(self, -1))
        self.requests = 0
        if not recorded:
            raise RuntimeError(f"{self.name}: the library made no DynamoDB call")
        self._calls = self.shared.replayable(recorded, fresh=self.scenario == "first call")

    def op(self, i: int) -> None:
        self.requests += 1
        replay(self._calls, i, self._ccf, self.name)


def least_work(name: str) -> str:
    return f"{name}'s calls + least work"


_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


class LeastWork(CallsAlone):
    """A library's recorded calls (as :class:`CallsAlone`) plus the least Python any layer
    validating the payload must add to them, with nothing else: the payload's fingerprint
    (SHA-256 of its canonical JSON), the function called once (*first call*), its result
    encoded as JSON (*first call*) or the stored JSON decoded (*duplicate*), an "in progress"
    error raised and caught (*in progress*). No key building, owner token, record decoding,
    logging or retry policy. The bound of the time target: a layer making these calls cannot
    be faster than this, so where it misses 0.8x the target is out of reach on that client."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = least_work(getattr(factory, "name", "?"))
        self._stored = ""

    def setup(self) -> None:
        super().setup()
        self._stored = _canonical(self._expected)

    def op(self, i: int) -> None:
        lib = self.lib
        assert lib is not None
        self.requests += 1
        scenario = self.scenario
        if scenario == "first call":
            order = _order(f"{self._prefix}-{i}")
        elif scenario == "duplicate":
            order = _order(f"{self._prefix}-dup")
        else:
            order = _order(f"{self._prefix}-busy", block=True)
        hashlib.sha256(_canonical({"order": order}).encode()).hexdigest()
        replay(self._calls, i, self._ccf, self.name)
        if scenario == "first call":
            _canonical(lib.body(order))
        elif scenario == "duplicate":
            json.loads(self._stored)
        else:
            try:
                raise _Busy(order["order_id"])
            except _Busy:
                pass


class _Busy(Exception):
    """The least "in progress" answer: an exception raised and caught."""


def own_work_alone(name: str) -> str:
    return f"{name}'s own work alone"


class OwnWorkAlone(Scenario):
    """firstwrite with every DynamoDB call answered at once: each operation gets the answer
    (response or error) it got in one real request of the scenario, with no client, engine or
    botocore behind it. What firstwrite's own Python costs per request by itself; beside its
    calls alone it shows how much of the time is the layer's work, and how much that work
    slows down when it runs between botocore's calls (caches)."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = own_work_alone(self.name)

    def setup(self) -> None:
        super().setup()
        lib = self.lib
        assert isinstance(lib, FirstwriteLib)
        guard = lib.guard
        # the guard's operation -> client method (kept for teardown: the in-progress
        # scenario's blocked request completes through the real client)
        self._real = real = dict(guard._methods)
        answers: dict[str, Any] = {}

        def recording(operation: str, method: Any) -> Callable[..., Any]:
            def call(**params: Any) -> Any:
                try:
                    answers[operation] = response = method(**params)
                except Exception as exc:
                    answers[operation] = exc
                    raise
                return response

            return call

        guard._methods = {op: recording(op, m) for op, m in real.items()}
        try:
            Scenario.op(self, -1)
        finally:
            guard._methods = real
        self.requests = 0
        if not answers:
            raise RuntimeError(f"{self.name}: the library made no DynamoDB call")
        guard._methods = {op: _answering(answers[op]) for op in answers}

    def teardown(self) -> None:
        if isinstance(self.lib, FirstwriteLib) and hasattr(self, "_real"):
            self.lib.guard._methods = self._real
        super().teardown()


def _answering(answer: Any) -> Callable[..., Any]:
    """A client method that answers ``answer`` at once (raises it if it is an error)."""
    if isinstance(answer, BaseException):

        def fail(**_params: Any) -> Any:
            raise answer.with_traceback(None)  # no traceback piling up across requests

        return fail
    return lambda **_params: answer


def calls_timed(name: str) -> str:
    return f"{name}, its calls timed"


class CallsTimed(Scenario):
    """firstwrite on the real client with a clock around each of its DynamoDB calls: splits
    its own time beside the calls into the time its code runs between them and what its calls
    cost inside it, each against the same thing measured alone (own work alone, calls alone).
    Both run slower side by side than alone: the client's calls (botocore, the engine, SQLite)
    evict the layer's code and data from the CPU caches, and the layer evicts theirs. The two
    clock reads per call (~0.1 µs) count as the layer's time."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = calls_timed(self.name)
        self.inside_ns = 0
        self._slice = (0, 0)
        # (requests, ns inside the client's calls) per timed slice
        self.slices: list[tuple[int, int]] = []

    def setup(self) -> None:
        super().setup()
        lib = self.lib
        assert isinstance(lib, FirstwriteLib)
        guard = lib.guard
        self._real = real = dict(guard._methods)
        clock = time.perf_counter_ns

        def timed(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(**params: Any) -> Any:
                start = clock()
                try:
                    return method(**params)
                finally:
                    self.inside_ns += clock() - start

            return call

        guard._methods = {op: timed(m) for op, m in real.items()}

    def resume(self) -> None:
        super().resume()
        self._slice = (self.requests, self.inside_ns)

    def pause(self) -> None:
        super().pause()
        requests, inside = self._slice
        self.slices.append((self.requests - requests, self.inside_ns - inside))

    def teardown(self) -> None:
        if isinstance(self.lib, FirstwriteLib) and hasattr(self, "_real"):
            self.lib.guard._methods = self._real
        super().teardown()

    def split(self, series: Series) -> tuple[float, float] | None:
        """(median µs per request of its code between its calls, of its calls), over the timed
        slices (the warm-up's excluded), from ``series`` (this contender's, in µs/request)."""
        slices = self.slices[-len(series.values) :] if series.values else []
        if not slices or any(n == 0 for n, _ in slices):
            return None
        inside = [ns / n / 1000 for n, ns in slices]
        outside = [wall - calls for wall, calls in zip(series.values, inside, strict=True)]
        return statistics.median(outside), statistics.median(inside)


@dataclass(frozen=True)
class Allowance:
    """What each library does beside its DynamoDB calls in one table (medians, in the table's
    unit), and what the target leaves firstwrite on its calls: the target needs
    ``ours <= 0.8 x Powertools``, i.e. ``own <= 0.8 x theirs - calls``."""

    calls: float  # firstwrite's calls alone
    theirs: float  # Powertools, whole
    own: float  # firstwrite beside its calls
    their_own: float  # Powertools beside its calls
    allowed: float  # what the target leaves firstwrite beside its calls (<= 0: nothing)


def allowance(
    table: Table, us: str = OURS, peer: str = POWERTOOLS, target: float = TIME_TARGET
) -> Allowance | None:
    """The :class:`Allowance` of ``table`` (firstwrite's contender ``us`` against ``peer``, each
    with its calls alone, under ``us <= target x peer``), or None if one of the four was not
    measured."""
    ours, theirs = table.get(us), table.get(peer)
    calls, their_calls = table.get(calls_alone(us)), table.get(calls_alone(peer))
    if not all(s is not None and s.values for s in (ours, theirs, calls, their_calls)):
        return None
    assert ours and theirs and calls and their_calls
    return Allowance(
        calls=calls.median,
        theirs=theirs.median,
        own=ours.median - calls.median,
        their_own=theirs.median - their_calls.median,
        allowed=target * theirs.median - calls.median,
    )


def _own_time_note(
    table: Table,
    alone: Series | None = None,
    split: tuple[float, float] | None = None,
) -> None:
    """What each library spends beside its DynamoDB calls, and what firstwrite's share would
    have to be for the target on these calls: the target needs ``ours + calls <= 0.8 x
    Powertools``, so a cheaper call helps only while firstwrite's own time is small enough.
    ``alone``: firstwrite's own work alone (:class:`OwnWorkAlone`); ``split``: its code between
    its calls and its calls, timed inside its run (:meth:`CallsTimed.split`); all measured in
    the same run."""
    share = allowance(table)
    if share is None:
        return
    own, their_own, allowed = share.own, share.their_own, share.allowed
    for target in table.targets:
        target.why = f"{OURS}'s own time beside its calls {own:.1f} µs; " + (
            f"the target allows {allowed:.1f} µs on them"
            if allowed > 0
            else "its calls alone miss it"
        )
    table.notes.append(
        f"Own time beside the DynamoDB calls (medians): {OURS} {own:.1f} µs, {POWERTOOLS} "
        f"{their_own:.1f} µs; on these calls the target allows {OURS} "
        + (f"{allowed:.1f} µs." if allowed > 0 else "none at all (its calls alone miss it).")
    )
    if alone is not None and alone.values:
        work = alone.median
        table.notes.append(
            f"{own_work_alone(OURS)} (each call answered at once by its recorded answer, no "
            f"client; median of {len(alone.values)}, {min(alone.values):.1f} - "
            f"{max(alone.values):.1f}): {work:.1f} µs, against {own:.1f} µs of own time beside "
            f"the client's calls; its calls alone plus that work are "
            f"{(work + share.calls) / share.theirs:.2f}x {POWERTOOLS}"
            + (
                f": the work itself is {work - allowed:.1f} µs over the allowance."
                if work > allowed
                else "."
            )
        )
    if split is not None and alone is not None and alone.values:
        between, inside = split
        table.notes.append(
            f"Where the own time beside the calls goes ({calls_timed(OURS)}: a clock around "
            f"each call, medians): its code between its calls {between:.1f} µs per request "
            f"({between / alone.median:.1f}x its own work alone), its calls inside it "
            f"{inside:.1f} µs ({inside - share.calls:+.1f} µs against its calls alone). "
            "The layer's code and the client's calls each run slower side by side than alone: "
            "each evicts the other's code and data from the CPU caches."
        )


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="idempotency",
        title="Idempotency layer vs Powertools vs idemkit (issue 4)",
        method=[
            "One engine file (`durability='normal'`); firstwrite and Powertools share one client "
            "on it: first a boto3 client bound in process (`bind`, its default quick path: answered at `before-call`), then the `DirectClient` "
            "(calls counted by a thin proxy); idemkit's `DynamoBackend` uses a boto3 resource whose "
            "client is bound to the same engine (its aioboto3 dependency is not installed: its "
            "`Table` is replaced by a thin async adapter over boto3's, idemkit's logic is "
            "unchanged).",
            "The same function `charge(order)` (4-field dict in, 3-field dict out); the key "
            "is `order_id`, the whole payload is validated: firstwrite "
            "`@idempotent(Idempotency(IdempotencyConfig(table_name=...), client=...), "
            "key='order.order_id')` (defaults otherwise); Powertools "
            f"{package_version('aws-lambda-powertools')} `idempotent_function` with "
            "`DynamoDBPersistenceLayer(boto3_client=...)`, `event_key_jmespath='order_id'`, "
            f"`payload_validation_jmespath='@'`; idemkit {package_version('idemkit')} "
            "`idempotent_sync` with `key_fields=['order.order_id']`, a payload "
            "`validation_fingerprint`, `wait_timeout_seconds=0` (the others do not wait "
            "either). Local caches off everywhere (the defaults). Every table has TTL enabled on its expiry attribute, as each library's docs require (firstwrite: `expires_at`, Powertools: `expiration`, idemkit: `ttl`).",
            "*first call*: a new key each request (claim, run, store the result). "
            "*duplicate*: the key of a completed request (replay). *in progress*: the key of a "
            "request whose body is still running in another thread (each library's "
            "'in progress' error).",
            f"**{calls_alone('X')}**: the DynamoDB calls library X made for one request of the "
            "scenario (recorded), replayed on the same client with none of X's code around them "
            "(a fresh key value per request for *first call*): what X would cost if all its "
            f"own work were free. **{least_work(OURS)}** bounds the target: firstwrite's calls "
            "plus the least Python any payload-validating layer adds to them (the payload's "
            "SHA-256 fingerprint; the function called and its result JSON-encoded, or the "
            "stored JSON decoded, or an 'in progress' error raised and caught), nothing else; "
            "if even it misses 0.8x, no layer making firstwrite's calls can meet it on that "
            "client. "
            f"**{own_work_alone(OURS)}**: the converse, firstwrite with each call answered at "
            "once by the answer it got in one real request (no client, engine or botocore): "
            f"its own Python per request. **{calls_timed(OURS)}**: firstwrite on the real "
            "client with a clock around each DynamoDB call, which splits its own time beside "
            "the calls into its code between them and its calls inside it (in the notes).",
            "**Instructions (callgrind)**, boto3 bound in process only: the two libraries, "
            "their calls alone and firstwrite's calls + least work again, in one child process "
            "under valgrind's callgrind, which counts only inside the measured pieces "
            "(`bench/_callgrind.py`): per contender, 2 pieces of 150 requests after 30 "
            "uncounted (set-up, imports and start-up never counted). Instruction counts do not "
            "move with the machine's load (the two pieces of a contender agree within 1%). They "
            "and time disagree where code runs at different speeds: the least work's few lines "
            "stay in the CPU caches between botocore's calls, a real layer's code runs slower "
            "there (its own time beside the calls is about twice its own work alone). The same "
            "target and bound are read on them.",
            "DynamoDB calls per request: a `before-call` handler on the clients, counted during "
            "the timed slices only. Time: wall time of one whole call (µs), "
            f"{settings.reps} repetitions of {settings.duration:g} s, interleaved.",
        ],
    )
    api = _firstwrite_api()
    why_idemkit = _idemkit_available()
    for direct in (False, True):
        _run_on_client(section, settings, log, api, why_idemkit, direct=direct)
        if section.error:
            break
        if not direct and not isinstance(api, str):
            _count_instructions(section, settings, log)
    return section


def _count_instructions(section: Section, settings: Settings, log: Callable[[str], None]) -> None:
    """The bound client's scenarios again, in instructions per request (callgrind): the same
    contenders, measured in the same run, with no noise from the machine's load."""
    from .idempotency_instructions import tables

    counted, why = tables(settings, log)
    section.tables += counted
    if why is not None:
        section.method.append(f"Instructions per request (callgrind): not measured: {why}.")


def _run_on_client(
    section: Section,
    settings: Settings,
    log: Callable[[str], None],
    api: Any,
    why_idemkit: str | None,
    *,
    direct: bool,
) -> None:
    client_name = "DirectClient" if direct else "boto3 bound in process"
    with scratch_dir("idempotency-") as directory:
        try:
            shared = Shared(directory, direct=direct)
        except Exception as exc:
            section.error = f"engine/binding unavailable: {type(exc).__name__}: {exc}"
            return
        try:
            factories: list[Callable[[Shared], Library]] = []
            skipped: dict[str, str] = {}
            if isinstance(api, str):
                skipped[OURS] = api
            else:
                factories.append(FirstwriteLib)
            factories.append(PowertoolsLib)
            if direct:
                skipped[IDEMKIT] = "uses a boto3 resource, which the DirectClient is not"
            elif why_idemkit is None:
                factories.append(IdemkitLib)
            else:
                skipped[IDEMKIT] = why_idemkit
            for scenario in SCENARIOS:
                log(f"  idempotency / {scenario}")
                contenders = [Scenario(shared, f, scenario) for f in factories]
                # Each library's calls with none of its code: the bound on any library making them.
                contenders += [
                    CallsAlone(shared, f, scenario)
                    for f in factories
                    if getattr(f, "name", "") in (OURS, POWERTOOLS)
                ]
                contenders += [
                    LeastWork(shared, f, scenario)
                    for f in factories
                    if getattr(f, "name", "") == OURS
                ]
                contenders += [
                    OwnWorkAlone(shared, f, scenario)
                    for f in factories
                    if getattr(f, "name", "") == OURS
                ]
                timed = [CallsTimed(shared, f, scenario) for f in factories if f is FirstwriteLib]
                contenders += timed
                series, more = run_interleaved(contenders, settings, log=log)
                for s in series:
                    s.values = [1e6 / v for v in s.values]
                    s.unit = "µs/request"
                # firstwrite's own work alone goes into the notes, not the table: it is no
                # library, and makes no DynamoDB call
                alone = next((x for x in series if x.name == own_work_alone(OURS)), None)
                timed_series = next((x for x in series if x.name == calls_timed(OURS)), None)
                split = timed[0].split(timed_series) if timed and timed_series else None
                series = [x for x in series if x is not alone and x is not timed_series]
                calls = {
                    c.name: c.calls_per_request
                    for c in contenders
                    if c.requests and not isinstance(c, (OwnWorkAlone, CallsTimed))
                }
                table = Table(
                    title=f"{scenario}, {client_name}",
                    series=series,
                    ours=[OURS],
                    targets=[Target(OURS, POWERTOOLS, maximum=TIME_TARGET, bound=least_work(OURS))],
                    skipped={**skipped, **more},
                    extra={"DynamoDB calls/request": {n: f"{v:.2f}" for n, v in calls.items()}},
                )
                ours, theirs = calls.get(OURS), calls.get(POWERTOOLS)
                table.checks.append(
                    Check(
                        f"{OURS} / {POWERTOOLS} DynamoDB calls per request",
                        "n/a" if ours is None or theirs is None else f"{ours:.2f} vs {theirs:.2f}",
                        "no more",
                        None if ours is None or theirs is None else ours <= theirs + 1e-9,
                    )
                )
                _own_time_note(table, alone, split)
                section.tables.append(table)
                if OURS in table.ours and table.get(OURS) is not None:
                    ratio = table.ratio(OURS, POWERTOOLS)
                    if not ratio <= TIME_TARGET:
                        log(f"  profiling firstwrite / {scenario} (target missed)")
                        section.profiles[f"firstwrite, {scenario}, {client_name}"] = (
                            profile_contender(
                                Scenario(shared, FirstwriteLib, scenario),
                                200 if settings.quick else 2000,
                            )
                        )
        finally:
            shared.close()
