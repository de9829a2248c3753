"""Fault injection: throttling, hot keys, latency, stale reads, injected errors, crash points.

Off by default and free when off: hooks are installed only while a fault is on (or throughput
enforced). Each fault is scoped by operation(s), table and region (``None`` matches any) and
fires on every matching call (``rate=1``), a seeded random fraction (``rate=0.2, seed=7``), or
the next ``count`` matching calls; so tests stay deterministic. Kinds:

* ``error``: a DynamoDB error instead of the call (:data:`ERRORS`), with DynamoDB's status,
  ``__type``, message and ``ThrottlingReasons``, so botocore retries exactly what it would;
* ``hot_key``: one partition (``key=``) throttled as DynamoDB throttles a hot partition
  (``KeyRangeThroughputExceeded``), on every matching call or, with ``units=``, past that
  ceiling per second (``units=`` alone: every partition of the scope);
* ``latency``: a wall-clock sleep, fixed or seeded random in a range, before the call;
* ``stale_read``: eventually consistent GetItem/Query/Scan answered as of ``lag`` seconds ago
  (engine clock), from item versions kept while the fault is on; never ``ConsistentRead``;
* ``crash``: ``os._exit(exit_code)`` at ``before_operation``, ``before_commit`` (the write is
  lost) or ``after_commit`` (durable, never answered): "did it land?" tests of a server.

Throughput enforcement and ``units=`` ride on the same interceptor (``throughput.py``).
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

from ...context import Context, Feature
from ...errors import DynamoDBError
from ...item_keys import item_key
from ...operations._request_keys import hot_key_scope, tables_of
from ...storage import TableRow, Writer
from ...values import Item, item_size
from .throughput import (
    THROUGHPUT_EXCEEDED,
    Ceiling,
    TokenBuckets,
    key_range_error,
    throttling_error,
)

if TYPE_CHECKING:
    from ...context import Host

__all__ = [
    "CRASH_EXIT_CODE",
    "CRASH_POINTS",
    "ERRORS",
    "Fault",
    "FaultInjector",
]

CRASH_EXIT_CODE = 86
CRASH_POINTS = ("before_operation", "before_commit", "after_commit")
KINDS = ("error", "hot_key", "latency", "stale_read", "crash")

# code -> DynamoDB's message. Throttling messages as DynamoDB sends them on the wire.
ERRORS: dict[str, str] = {
    "ProvisionedThroughputExceededException": THROUGHPUT_EXCEEDED,
    "ThrottlingException": "Rate of requests exceeds the allowed throughput.",
    "RequestLimitExceeded": (
        "Throughput exceeds the current throughput limit for your account. Please contact AWS "
        "Support at https://aws.amazon.com/support request a limit increase"
    ),
    "TransactionConflictException": "Transaction is ongoing for the item",
    "InternalServerError": "Internal server error",
    "ServiceUnavailable": "DynamoDB is currently unavailable. (This should be a rare occurrence.)",
}
_STALE_OPERATIONS = frozenset({"GetItem", "Query", "Scan"})
# Context.extras key.
_CRASH_BEFORE_COMMIT = "firstwrite.crash_before_commit"


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
    key: str | dict[str, Any] | None = None  # hot_key: the partition key value, as given
    keys: frozenset[str] | None = None  # hot_key: its key_text forms
    units: float | None = None  # hot_key: the partition ceiling per second
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
        for key in ("table", "region", "code", "message", "lag", "point", "seed", "key", "units"):
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

    engine: Host  # set by install()

    def __init__(self, *, enforce_throughput: bool = False) -> None:
        self._lock = threading.RLock()
        self._faults: tuple[Fault, ...] = ()
        self._ids = itertools.count(1)
        self._enforcing = False
        self._installed: set[str] = set()
        self._enforce_at_install = enforce_throughput

    def install(self, engine: Host) -> None:
        self.engine = engine
        self._buckets = TokenBuckets(engine)
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
        key: str | Mapping[str, Any] | None = None,
        units: float | None = None,
    ) -> Fault:
        """Add one fault; returns it (``.id`` removes it again). Raises ValueError if invalid."""
        if kind != "hot_key" and (key is not None or units is not None):
            raise ValueError("key= and units= belong to hot_key faults")
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
        elif kind == "hot_key":
            counted = fault.count is not None or fault.rate < 1
            fault.key, fault.keys, fault.units = hot_key_scope(key, units, counted=counted)
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

    def hot_key(
        self,
        key: str | Mapping[str, Any] | None = None,
        *,
        units: float | None = None,
        **scope: Any,
    ) -> Fault:
        """Make partition ``key`` hot (see the module notes): ``add("hot_key", ...)``."""
        return self.add("hot_key", key=key, units=units, **scope)

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
                self._buckets.burst_seconds = _positive(burst_seconds, "burst_seconds")
            self._enforcing = bool(enabled)
            self._buckets.reset()
            self._sync()

    @property
    def enforcing_throughput(self) -> bool:
        return self._enforcing

    @property
    def burst_seconds(self) -> float:
        """How many seconds of unused capacity a bucket holds (throughput.py)."""
        return self._buckets.burst_seconds

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
            engine.hooks.add_interceptor,
            engine.hooks.remove_interceptor,
        )
        self._toggle(
            self._record,
            any(f.kind == "stale_read" for f in faults),
            engine.hooks.add_change_hook,
            engine.hooks.remove_change_hook,
        )
        self._toggle(
            self._crash_in_transaction,
            any(f.kind == "crash" and f.point == "before_commit" for f in faults),
            engine.hooks.add_change_hook,
            engine.hooks.remove_change_hook,
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
        ceilings: list[Ceiling] = []
        for fault in self._faults:
            if not fault.matches(operation, region, tables):
                continue
            kind = fault.kind
            if kind == "hot_key":
                if fault.units is not None:
                    ceilings.append(Ceiling(fault.id, fault.units, fault.table, fault.keys))
                    continue
                assert fault.keys is not None
                row = self._buckets.touched(ctx, tables, fault.table, fault.keys)
                if row is not None and fault.fire():
                    if fault.exhausted:
                        self._drop_exhausted()
                    raise key_range_error(self.engine, row, operation)
            elif kind == "latency":
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
        if (self._enforcing or ceilings) and tables:
            self._buckets.admit(ctx, tables, enforce=self._enforcing, ceilings=ceilings)

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


def _crash_after(
    fault: Fault, ctx: Context, response: dict[str, Any] | None, error: DynamoDBError | None
) -> None:
    if error is None and fault.fire():
        _crash(fault)


def _crash(fault: Fault) -> None:
    sys.stderr.write(f"firstwrite: crash fault {fault.id} reached {fault.point}; exiting\n")
    sys.stderr.flush()
    os._exit(fault.exit_code)
