"""Fault injection: throttling, latency, stale reads, injected errors and crash points.

Off by default and free when off: nothing is installed on the engine until a fault is added
(``engine.interceptors`` and ``engine.change_hooks`` stay empty, so a call pays one empty-list
check), and everything is uninstalled again by :meth:`FaultInjector.clear` or when the last
counted fault is used up.

Each fault is scoped by operation(s), table and region (``None`` matches any) and fires on every
matching call (``rate=1``), on a seeded random fraction of them (``rate=0.2, seed=7``), or on the
next ``count`` matching calls only; so tests stay deterministic.

Kinds
-----
``error``
    Answer with a DynamoDB error instead of running the call: ``ThrottlingException``,
    ``ProvisionedThroughputExceededException``, ``RequestLimitExceeded`` (HTTP 400, retried by
    botocore), ``TransactionConflictException`` (400, not retried), ``InternalServerError``
    (500, retried), with DynamoDB's ``__type``, message and ``ThrottlingReasons``.
``latency``
    Sleep (wall clock) a fixed time or a seeded random time in a range before the call.
``stale_read``
    Answer eventually consistent GetItem/Query/Scan as of ``lag`` seconds ago (engine clock).
    While the fault is on, writes to its tables keep the previous version of each item in
    storage; reads with ``ConsistentRead=true`` are never affected.
``crash``
    ``os._exit(exit_code)`` at a named point: ``before_operation``, ``before_commit`` (inside
    the write transaction, so the write is lost) or ``after_commit`` (the write is durable, its
    response is never sent). For a server process: "did it land?" tests.

Provisioned throughput
----------------------
With ``Engine(enforce_throughput=True)`` (or :meth:`FaultInjector.enforce_throughput`),
PROVISIONED tables get DynamoDB's token buckets: per table, one for reads and one for writes,
refilled at the provisioned units per second of engine clock and holding up to 300 seconds of
unused capacity (the burst capacity; a bucket starts full). A call is admitted while its
bucket holds capacity and is charged the units it consumed; an empty bucket answers
``ProvisionedThroughputExceededException``. Off by default, because no other local engine
enforces it and a suite written against them would start failing. Buckets live in the engine
object: processes sharing a file each enforce their own.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .context import Context, Feature
from .errors import DynamoDBError
from .schema import item_key
from .storage import Reader, TableRow, Writer
from .values import Item, item_size

if TYPE_CHECKING:
    from .api import Engine

__all__ = [
    "CRASH_EXIT_CODE",
    "CRASH_POINTS",
    "ERRORS",
    "Fault",
    "FaultInjector",
]

CRASH_EXIT_CODE = 86
CRASH_POINTS = ("before_operation", "before_commit", "after_commit")
KINDS = ("error", "latency", "stale_read", "crash")
BURST_SECONDS = 300.0

# code -> DynamoDB's message. Throttling messages as DynamoDB sends them on the wire.
ERRORS: dict[str, str] = {
    "ProvisionedThroughputExceededException": (
        "The level of configured provisioned throughput for the table was exceeded. "
        "Consider increasing your provisioning level with the UpdateTable API."
    ),
    "ThrottlingException": "Rate of requests exceeds the allowed throughput.",
    "RequestLimitExceeded": (
        "Throughput exceeds the current throughput limit for your account. Please contact AWS "
        "Support at https://aws.amazon.com/support request a limit increase"
    ),
    "TransactionConflictException": "Transaction is ongoing for the item",
    "InternalServerError": "Internal server error",
    "ServiceUnavailable": "DynamoDB is currently unavailable. (This should be a rare occurrence.)",
}
_REASON_SUFFIX = {
    "ProvisionedThroughputExceededException": "ProvisionedThroughputExceeded",
    "RequestLimitExceeded": "AccountLimitExceeded",
}
WRITE_OPERATIONS = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
)
READ_OPERATIONS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_STALE_OPERATIONS = frozenset({"GetItem", "Query", "Scan"})
# Context.extras key.
_CRASH_BEFORE_COMMIT = "firstwrite.crash_before_commit"


def tables_of(operation: str, params: Mapping[str, Any]) -> list[str]:
    """The table names a request touches."""
    name = params.get("TableName")
    if isinstance(name, str):
        return [name]
    items = params.get("RequestItems")
    if isinstance(items, Mapping):
        return [str(t) for t in items]
    transact = params.get("TransactItems")
    names: list[str] = []
    if isinstance(transact, list):
        for element in transact:
            if isinstance(element, Mapping):
                for action in element.values():
                    if isinstance(action, Mapping) and isinstance(action.get("TableName"), str):
                        names.append(action["TableName"])
    return names


def _table_arn(engine: Engine, region: str, table: str) -> str:
    return f"arn:aws:dynamodb:{region}:{engine.account_id}:table/{table}"


def throttling_error(
    engine: Engine, code: str, operation: str, region: str, tables: Iterable[str], message: str
) -> DynamoDBError:
    """A throttling error as DynamoDB sends it, with ThrottlingReasons where it has them."""
    suffix = _REASON_SUFFIX.get(code)
    if suffix is None or not tables:
        return DynamoDBError(code, message)
    side = "Write" if operation in WRITE_OPERATIONS else "Read"
    reasons = [
        {"reason": f"Table{side}{suffix}", "resource": _table_arn(engine, region, t)}
        for t in dict.fromkeys(tables)
    ]
    return DynamoDBError(code, message, ThrottlingReasons=reasons)


# --- faults ----------------------------------------------------------------------------------


@dataclass
class Fault:
    """One configured fault (see the module notes for the kinds)."""

    id: int
    kind: str
    operations: frozenset[str] | None = None
    table: str | None = None
    region: str | None = None
    rate: float = 1.0
    count: int | None = None  # firings left; None: unlimited
    seed: int | None = None
    code: str | None = None
    message: str | None = None
    latency: tuple[float, float] | None = None
    lag: float | None = None
    point: str | None = None
    exit_code: int = CRASH_EXIT_CODE
    fired: int = 0
    _random: random.Random = field(default_factory=random.Random, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def matches(self, operation: str, region: str, tables: list[str]) -> bool:
        if self.operations is not None and operation not in self.operations:
            return False
        if self.region is not None and region != self.region:
            return False
        return self.table is None or self.table in tables

    def fire(self) -> bool:
        """Decide whether this matching call is hit (and count it)."""
        with self._lock:
            if self.count is not None and self.count <= 0:
                return False
            if self.rate < 1.0 and self._random.random() >= self.rate:
                return False
            if self.count is not None:
                self.count -= 1
            self.fired += 1
            return True

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.count <= 0

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind}
        if self.operations is not None:
            out["operations"] = sorted(self.operations)
        for key in ("table", "region", "code", "message", "lag", "point", "seed"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.latency is not None:
            out["latency"] = {"min": self.latency[0], "max": self.latency[1]}
        if self.kind == "crash":
            out["exit_code"] = self.exit_code
        out["rate"] = self.rate
        out["remaining"] = self.count
        out["fired"] = self.fired
        return out


@dataclass
class _Bucket:
    rate: float
    capacity: float
    tokens: float
    at: float

    def refill(self, now: float, rate: float, capacity: float) -> float:
        if rate != self.rate or capacity != self.capacity:  # UpdateTable changed it
            self.rate, self.capacity = rate, capacity
        if now > self.at:
            self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = max(self.at, now)
        return self.tokens


def _positive(value: Any, what: str) -> float:
    number = float(value)
    if math.isnan(number) or number < 0:
        raise ValueError(f"{what} must be a number >= 0, not {value!r}")
    return number


class FaultInjector(Feature):
    """``engine.faults``: add, list and clear faults; provisioned-throughput enforcement.

    Installs nothing until a fault is added (or throughput enforced): its hooks come and go
    with the faults (:meth:`_sync`).
    """

    engine: Engine  # set by install()

    def __init__(self, *, enforce_throughput: bool = False) -> None:
        self._lock = threading.RLock()
        self._faults: tuple[Fault, ...] = ()
        self._ids = itertools.count(1)
        self._enforcing = False
        self.burst_seconds = BURST_SECONDS
        self._buckets: dict[tuple[str, str, int, str], _Bucket] = {}
        self._installed: set[str] = set()
        self._enforce_at_install = enforce_throughput

    def install(self, engine: Engine) -> None:
        self.engine = engine
        if self._enforce_at_install:
            self.enforce_throughput(True)

    # configuring -------------------------------------------------------------------------

    def add(
        self,
        kind: str,
        *,
        operation: str | Iterable[str] | None = None,
        table: str | None = None,
        region: str | None = None,
        rate: float | None = None,
        count: int | None = None,
        seed: int | None = None,
        code: str | None = None,
        message: str | None = None,
        latency: float | tuple[float, float] | None = None,
        lag: float | None = None,
        point: str | None = None,
        exit_code: int = CRASH_EXIT_CODE,
    ) -> Fault:
        """Add one fault; returns it (``.id`` removes it again). Raises ValueError if invalid."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(KINDS)}")
        operations: frozenset[str] | None
        if operation is None:
            operations = None
        elif isinstance(operation, str):
            operations = frozenset({operation})
        else:
            operations = frozenset(operation)
        if rate is None:
            rate = 1.0
        rate = _positive(rate, "rate")
        if rate > 1:
            raise ValueError(f"rate must be between 0 and 1, not {rate}")
        if count is not None and (isinstance(count, bool) or int(count) < 1):
            raise ValueError(f"count must be a positive integer, not {count!r}")
        fault = Fault(
            id=0,
            kind=kind,
            operations=operations,
            table=table,
            region=region,
            rate=rate,
            count=None if count is None else int(count),
            seed=seed,
            exit_code=int(exit_code),
        )
        if seed is not None:
            fault._random.seed(seed)
        if kind == "error":
            if code not in ERRORS:
                raise ValueError(f"error faults need code= one of {', '.join(ERRORS)}")
            fault.code = code
            fault.message = ERRORS[code] if message is None else message
        elif kind == "latency":
            if latency is None:
                raise ValueError("latency faults need latency=seconds or (min, max)")
            low, high = (latency, latency) if isinstance(latency, (int, float)) else latency
            low, high = _positive(low, "latency"), _positive(high, "latency")
            if high < low:
                raise ValueError(f"latency range ({low}, {high}) is reversed")
            fault.latency = (low, high)
        elif kind == "stale_read":
            if lag is None:
                raise ValueError("stale_read faults need lag=seconds")
            fault.lag = _positive(lag, "lag")
            if operations is not None and not operations <= _STALE_OPERATIONS:
                raise ValueError("stale_read faults apply to GetItem, Query and Scan only")
        elif kind == "crash":
            if point not in CRASH_POINTS:
                raise ValueError(f"crash faults need point= one of {', '.join(CRASH_POINTS)}")
            fault.point = point
        with self._lock:
            fault.id = next(self._ids)
            self._faults = (*self._faults, fault)
            self._sync()
        return fault

    def throttle(
        self,
        *,
        operation: str | Iterable[str] | None = None,
        table: str | None = None,
        region: str | None = None,
        count: int | None = None,
        rate: float | None = None,
        seed: int | None = None,
        code: str = "ProvisionedThroughputExceededException",
    ) -> Fault:
        """Throttle matching calls (``code``: also ThrottlingException, RequestLimitExceeded)."""
        return self.add(
            "error",
            operation=operation,
            table=table,
            region=region,
            count=count,
            rate=rate,
            seed=seed,
            code=code,
        )

    def error(self, code: str, **scope: Any) -> Fault:
        """Inject ``code`` (e.g. InternalServerError, TransactionConflictException)."""
        return self.add("error", code=code, **scope)

    def latency(self, seconds: float | tuple[float, float], **scope: Any) -> Fault:
        return self.add("latency", latency=seconds, **scope)

    def stale_reads(self, lag: float, **scope: Any) -> Fault:
        return self.add("stale_read", lag=lag, **scope)

    def crash(self, point: str, **scope: Any) -> Fault:
        return self.add("crash", point=point, **scope)

    def remove(self, fault_id: int) -> bool:
        with self._lock:
            before = len(self._faults)
            self._faults = tuple(f for f in self._faults if f.id != fault_id)
            removed = len(self._faults) != before
            self._sync()
        return removed

    def clear(self) -> None:
        """Remove every fault (throughput enforcement, a table setting, stays as it is)."""
        with self._lock:
            had_history = any(f.kind == "stale_read" for f in self._faults)
            self._faults = ()
            self._sync()
        if had_history:
            self.engine.storage.write(Writer.clear_history)

    def active(self) -> list[Fault]:
        """The faults in force, in the order they were added."""
        return list(self._faults)

    def enforce_throughput(
        self, enabled: bool = True, *, burst_seconds: float | None = None
    ) -> None:
        """Switch provisioned-throughput enforcement on or off (buckets restart full)."""
        with self._lock:
            if burst_seconds is not None:
                self.burst_seconds = _positive(burst_seconds, "burst_seconds")
            self._enforcing = bool(enabled)
            self._buckets.clear()
            self._sync()

    @property
    def enforcing_throughput(self) -> bool:
        return self._enforcing

    def describe(self) -> dict[str, Any]:
        return {
            "faults": [f.describe() for f in self._faults],
            "throughput": {"enforced": self._enforcing, "burst_seconds": self.burst_seconds},
        }

    # installing --------------------------------------------------------------------------

    def _sync(self) -> None:
        """Install exactly the hooks the current faults need (called under the lock)."""
        faults = self._faults
        engine = self.engine
        self._toggle(
            self._intercept,
            bool(faults) or self._enforcing,
            engine.add_interceptor,
            engine.remove_interceptor,
        )
        self._toggle(
            self._record,
            any(f.kind == "stale_read" for f in faults),
            engine.add_change_hook,
            engine.remove_change_hook,
        )
        self._toggle(
            self._crash_in_transaction,
            any(f.kind == "crash" and f.point == "before_commit" for f in faults),
            engine.add_change_hook,
            engine.remove_change_hook,
        )

    def _toggle(
        self, hook: Any, wanted: bool, add: Callable[[Any], None], remove: Callable[[Any], None]
    ) -> None:
        # Change hooks go in without a watch predicate: they act on every table's writes.
        name = hook.__name__
        if wanted and name not in self._installed:
            add(hook)
            self._installed.add(name)
        elif not wanted and name in self._installed:
            remove(hook)
            self._installed.discard(name)

    def _drop_exhausted(self) -> None:
        with self._lock:
            live = tuple(f for f in self._faults if not f.exhausted)
            if len(live) != len(self._faults):
                self._faults = live
                self._sync()

    # the interceptor -----------------------------------------------------------------------

    def _intercept(self, ctx: Context) -> None:
        operation, region = ctx.operation, ctx.region
        tables = tables_of(operation, ctx.params)
        exhausted = False
        as_of: float | None = None  # the stale-read instant (the oldest, if several fire)
        for fault in self._faults:
            if not fault.matches(operation, region, tables):
                continue
            kind = fault.kind
            if kind == "latency":
                if fault.fire():
                    assert fault.latency is not None
                    low, high = fault.latency
                    time.sleep(low if low == high else fault._random.uniform(low, high))
            elif kind == "error":
                if fault.fire():
                    if fault.exhausted:
                        self._drop_exhausted()
                    assert fault.code is not None and fault.message is not None
                    raise throttling_error(
                        self.engine, fault.code, operation, region, tables, fault.message
                    )
            elif kind == "stale_read":
                if operation in _STALE_OPERATIONS and fault.fire():
                    assert fault.lag is not None
                    past = ctx.now() - fault.lag
                    as_of = past if as_of is None else min(as_of, past)
            elif fault.point == "before_operation":
                if fault.fire():
                    _crash(fault)
            elif fault.point == "before_commit":
                ctx.extras[_CRASH_BEFORE_COMMIT] = fault
            else:
                ctx.on_finish(functools.partial(_crash_after, fault))
            exhausted = exhausted or fault.exhausted
        if as_of is not None:
            ctx.reader_hook = operator.methodcaller("as_of", as_of)
        if exhausted:
            self._drop_exhausted()
        if self._enforcing and tables:
            self._admit(ctx, tables)

    def _crash_in_transaction(
        self, ctx: Context, w: Writer, row: TableRow, old: Item | None, new: Item | None
    ) -> None:
        fault = ctx.extras.get(_CRASH_BEFORE_COMMIT)
        if fault is not None and fault.fire():
            _crash(fault)

    # stale reads: history --------------------------------------------------------------------

    def _record(
        self, ctx: Context, w: Writer, row: TableRow, old: Item | None, new: Item | None
    ) -> None:
        lags = [
            f.lag
            for f in self._faults
            if f.kind == "stale_read"
            and f.lag is not None
            and (f.table is None or f.table == row.name)
            and (f.region is None or f.region == row.region)
        ]
        if not lags:
            return
        item = new if new is not None else old
        if item is None:
            return
        pk, sk = item_key(row.key_schema, item)
        now = self.engine.clock.now()
        w.record_history(row.id, pk, sk, now, old, item_size(old), now - max(lags))

    # provisioned throughput ------------------------------------------------------------------

    def _admit(self, ctx: Context, tables: list[str]) -> None:
        side = "write" if ctx.operation in WRITE_OPERATIONS else "read"
        if ctx.operation not in WRITE_OPERATIONS and ctx.operation not in READ_OPERATIONS:
            return  # control plane: not charged
        region = ctx.region
        now = ctx.now()
        charged: list[tuple[str, _Bucket]] = []
        throttled: list[str] = []
        for name in dict.fromkeys(tables):
            row = self.engine.storage.read(functools.partial(_table, region=region, name=name))
            bucket = self._bucket(row, side, now) if row is not None else None
            if bucket is None:
                continue
            if bucket.tokens <= 0:
                throttled.append(name)
            charged.append((name, bucket))
        if throttled:
            raise throttling_error(
                self.engine,
                "ProvisionedThroughputExceededException",
                ctx.operation,
                region,
                throttled,
                ERRORS["ProvisionedThroughputExceededException"],
            )
        if not charged:
            return
        asked = ctx.params.get("ReturnConsumedCapacity")
        if asked not in ("TOTAL", "INDEXES"):
            ctx.params = {**ctx.params, "ReturnConsumedCapacity": "TOTAL"}
        buckets = dict(charged)

        def charge(
            c: Context, response: dict[str, Any] | None, error: DynamoDBError | None
        ) -> None:
            with self._lock:
                if response is not None:
                    consumed = response.get("ConsumedCapacity")
                    if asked not in ("TOTAL", "INDEXES"):
                        response.pop("ConsumedCapacity", None)
                    entries = consumed if isinstance(consumed, list) else [consumed]
                    for entry in entries:
                        if isinstance(entry, Mapping) and entry.get("TableName") in buckets:
                            buckets[entry["TableName"]].tokens -= float(
                                entry.get("CapacityUnits", 0)
                            )
                elif error is not None and error.code == "ConditionalCheckFailedException":
                    # A failed conditional write still consumes a write unit.
                    for bucket in buckets.values():
                        bucket.tokens -= 1.0

        ctx.on_finish(charge)

    def _bucket(self, row: TableRow, side: str, now: float) -> _Bucket | None:
        definition = row.definition
        billing = (definition.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
        if billing != "PROVISIONED":
            return None
        throughput = definition.get("ProvisionedThroughput") or {}
        rate = float(
            throughput.get("ReadCapacityUnits" if side == "read" else "WriteCapacityUnits") or 0
        )
        if rate <= 0:
            return None
        capacity = rate * self.burst_seconds
        key = (row.region, row.name, row.id, side)
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(rate, capacity, capacity, now)
            bucket.refill(now, rate, capacity)
        return bucket


def _table(reader: Reader, *, region: str, name: str) -> TableRow | None:
    return reader.table(region, name)


def _crash_after(
    fault: Fault, ctx: Context, response: dict[str, Any] | None, error: DynamoDBError | None
) -> None:
    if error is None and fault.fire():
        _crash(fault)


def _crash(fault: Fault) -> None:
    sys.stderr.write(f"firstwrite: crash fault {fault.id} reached {fault.point}; exiting\n")
    sys.stderr.flush()
    os._exit(fault.exit_code)
