"""Provisioned throughput and partition ceilings: DynamoDB's token buckets.

With ``Engine(enforce_throughput=True)`` (or :meth:`.injector.FaultInjector.enforce_throughput`),
PROVISIONED tables get a read and a write bucket each, refilled at the provisioned units per
second of engine clock, holding up to 300 seconds of unused capacity (a bucket starts full);
an empty one answers ``ProvisionedThroughputExceededException``. Every table, on-demand too,
also gets one bucket per partition key value and side, refilled at DynamoDB's per-partition
ceiling (1,000 WCU, 3,000 RCU per second) and holding one second of it; an empty one answers
:func:`key_range_error`. A :class:`Ceiling` (from a ``hot_key`` fault) adds buckets of its own
with a lower rate. A call is admitted while its buckets hold capacity and charged the units it
consumed (a key its share of its table's units). Off by default: no other local engine
enforces it. Buckets live in the engine object: processes sharing a file each keep their own.

:func:`throttling_error` is the throttling error as DynamoDB sends it, for the buckets and
for injected throttling alike.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...consumed import want_capacity
from ...errors import DynamoDBError
from ...operations._request_keys import READ_OPERATIONS, WRITE_OPERATIONS, partition_keys

if TYPE_CHECKING:
    from ...context import Context, Host
    from ...storage import Reader, TableRow

__all__ = [
    "BURST_SECONDS",
    "HOT_KEY_THROTTLED",
    "PARTITION_UNITS",
    "READ_OPERATIONS",
    "THROUGHPUT_EXCEEDED",
    "WRITE_OPERATIONS",
    "Ceiling",
    "TokenBuckets",
    "key_range_error",
    "throttling_error",
]

BURST_SECONDS = 300.0
THROUGHPUT_EXCEEDED = (
    "The level of configured provisioned throughput for the table was exceeded. "
    "Consider increasing your provisioning level with the UpdateTable API."
)
# ThrottlingException's message when one partition of an on-demand table is over its ceiling.
HOT_KEY_THROTTLED = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
    "scaling your table or index so please try again shortly. If exceptions persist, check if "
    "you have a hot key: "
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
)
# DynamoDB's per-partition ceilings, units per second, whatever the billing mode.
PARTITION_UNITS = {"read": 3000.0, "write": 1000.0}
_PRUNE_AT = 4096  # buckets kept before full ones are dropped
_REASON_SUFFIX = {
    "ProvisionedThroughputExceededException": "ProvisionedThroughputExceeded",
    "RequestLimitExceeded": "AccountLimitExceeded",
}


def _table_arn(engine: Host, region: str, table: str) -> str:
    return f"arn:aws:dynamodb:{region}:{engine.account_id}:table/{table}"


def _side(operation: str) -> str:
    return "Write" if operation in WRITE_OPERATIONS else "Read"


def throttling_error(
    engine: Host, code: str, operation: str, region: str, tables: Iterable[str], message: str
) -> DynamoDBError:
    """A throttling error as DynamoDB sends it, with ThrottlingReasons where it has them."""
    suffix = _REASON_SUFFIX.get(code)
    if suffix is None or not tables:
        return DynamoDBError(code, message)
    side = _side(operation)
    reasons = [
        {"reason": f"Table{side}{suffix}", "resource": _table_arn(engine, region, t)}
        for t in dict.fromkeys(tables)
    ]
    return DynamoDBError(code, message, ThrottlingReasons=reasons)


def _billing(row: TableRow) -> str:
    summary = row.definition.get("BillingModeSummary") or {}
    return str(summary.get("BillingMode", "PROVISIONED"))


def key_range_error(engine: Host, row: TableRow, operation: str) -> DynamoDBError:
    """DynamoDB's answer to a call on a partition over its ceiling: on a PROVISIONED table
    ``ProvisionedThroughputExceededException``, on an on-demand one ``ThrottlingException``
    (whose member is ``throttlingReasons``), each with the reason
    ``Table<Read|Write>KeyRangeThroughputExceeded``."""
    reasons = [
        {
            "reason": f"Table{_side(operation)}KeyRangeThroughputExceeded",
            "resource": _table_arn(engine, row.region, row.name),
        }
    ]
    if _billing(row) == "PROVISIONED":
        return DynamoDBError(
            "ProvisionedThroughputExceededException", THROUGHPUT_EXCEEDED, ThrottlingReasons=reasons
        )
    return DynamoDBError("ThrottlingException", HOT_KEY_THROTTLED, throttlingReasons=reasons)


@dataclass(frozen=True)
class Ceiling:
    """A lower partition ceiling: ``units`` per second (both sides) for the partitions whose
    key text is in ``keys`` (any partition when ``None``) of ``table`` (any when ``None``).
    ``source`` tells its buckets from other ceilings'."""

    source: int
    units: float
    table: str | None = None
    keys: frozenset[str] | None = None

    def applies(self, table: str, key: str) -> bool:
        return (self.table is None or self.table == table) and (
            self.keys is None or key in self.keys
        )


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


class TokenBuckets:
    """The buckets of one engine: per (region, table, table id, read or write), and per
    partition key value within them."""

    def __init__(self, engine: Host) -> None:
        self.engine = engine
        self.burst_seconds = BURST_SECONDS
        self._lock = threading.Lock()
        self._buckets: dict[tuple[Any, ...], _Bucket] = {}
        self._prune_at = _PRUNE_AT

    def reset(self) -> None:
        """Forget every bucket: each starts full again at its next call."""
        with self._lock:
            self._buckets.clear()

    def admit(
        self,
        ctx: Context,
        tables: list[str],
        *,
        enforce: bool = True,
        ceilings: Sequence[Ceiling] = (),
    ) -> None:
        """Charge this call to its buckets (when it reads or writes items): with ``enforce``,
        its tables' and their partitions' (DynamoDB's ceilings); and those of ``ceilings``.
        Raises ProvisionedThroughputExceededException if a table's bucket is empty, or
        :func:`key_range_error` if a partition's is."""
        side = "write" if ctx.operation in WRITE_OPERATIONS else "read"
        if ctx.operation not in WRITE_OPERATIONS and ctx.operation not in READ_OPERATIONS:
            return  # control plane: not charged
        region = ctx.region
        now = ctx.now()
        charged: list[tuple[str, _Bucket, float]] = []  # table, bucket, share of its units
        throttled: list[str] = []
        hot: TableRow | None = None
        for name in dict.fromkeys(tables):
            row = self.engine.storage.read(functools.partial(_table, region=region, name=name))
            if row is None:
                continue
            if enforce:
                bucket = self._table_bucket(row, side, now)
                if bucket is not None:
                    if bucket.tokens <= 0:
                        throttled.append(name)
                    charged.append((name, bucket, 1.0))
            keys = partition_keys(ctx.operation, ctx.params, name, row.key_schema.hash_name)
            for key in dict.fromkeys(keys):
                share = keys.count(key) / len(keys)
                rates = [(0, PARTITION_UNITS[side])] if enforce else []
                rates += [(c.source, c.units) for c in ceilings if c.applies(name, key)]
                for source, rate in rates:
                    bucket = self._bucket(
                        (row.region, row.name, row.id, side, key, source), rate, rate, now
                    )
                    if bucket.tokens <= 0 and hot is None:
                        hot = row
                    charged.append((name, bucket, share))
        if throttled:
            raise throttling_error(
                self.engine,
                "ProvisionedThroughputExceededException",
                ctx.operation,
                region,
                throttled,
                THROUGHPUT_EXCEEDED,
            )
        if hot is not None:
            raise key_range_error(self.engine, hot, ctx.operation)
        if not charged:
            return
        want_capacity(ctx)  # the answer loses it again if the caller did not ask

        def charge(
            c: Context, response: dict[str, Any] | None, error: DynamoDBError | None
        ) -> None:
            with self._lock:
                if response is not None:
                    consumed = response.get("ConsumedCapacity")
                    entries = consumed if isinstance(consumed, list) else [consumed]
                    units = {
                        entry.get("TableName"): float(entry.get("CapacityUnits", 0))
                        for entry in entries
                        if isinstance(entry, Mapping)
                    }
                    for table, bucket, share in charged:
                        bucket.tokens -= units.get(table, 0.0) * share
                elif error is not None and error.code == "ConditionalCheckFailedException":
                    # A failed conditional write still consumes a write unit.
                    for _table_name, bucket, share in charged:
                        bucket.tokens -= share

        ctx.on_finish(charge)

    def touched(
        self, ctx: Context, tables: list[str], table: str | None, keys: frozenset[str]
    ) -> TableRow | None:
        """The first of this call's tables (``table`` only, when given) in which the request
        names an item whose partition key text is in ``keys``, or ``None``."""
        for name in dict.fromkeys(tables):
            if table is not None and name != table:
                continue
            row = self.engine.storage.read(functools.partial(_table, region=ctx.region, name=name))
            if row is None:
                continue
            found = partition_keys(ctx.operation, ctx.params, name, row.key_schema.hash_name)
            if not keys.isdisjoint(found):
                return row
        return None

    def _prune(self, now: float) -> None:
        # A bucket that has refilled is the same as none (a new one starts full): drop those,
        # so one bucket per partition key ever seen does not grow without bound.
        full = [
            key
            for key, b in self._buckets.items()
            if b.tokens + max(0.0, now - b.at) * b.rate >= b.capacity
        ]
        for key in full:
            del self._buckets[key]
        self._prune_at = max(_PRUNE_AT, 2 * len(self._buckets))

    def _table_bucket(self, row: TableRow, side: str, now: float) -> _Bucket | None:
        if _billing(row) != "PROVISIONED":
            return None
        throughput = row.definition.get("ProvisionedThroughput") or {}
        rate = float(
            throughput.get("ReadCapacityUnits" if side == "read" else "WriteCapacityUnits") or 0
        )
        if rate <= 0:
            return None
        return self._bucket(
            (row.region, row.name, row.id, side), rate, rate * self.burst_seconds, now
        )

    def _bucket(self, key: tuple[Any, ...], rate: float, capacity: float, now: float) -> _Bucket:
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self._prune_at:
                    self._prune(now)
                bucket = self._buckets[key] = _Bucket(rate, capacity, capacity, now)
            bucket.refill(now, rate, capacity)
        return bucket


def _table(reader: Reader, *, region: str, name: str) -> TableRow | None:
    return reader.table(region, name)
