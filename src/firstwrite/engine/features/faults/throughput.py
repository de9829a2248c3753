"""Provisioned throughput: DynamoDB's token buckets for PROVISIONED tables.

With ``Engine(enforce_throughput=True)`` (or :meth:`FaultInjector.enforce_throughput`),
PROVISIONED tables get DynamoDB's token buckets: per table, one for reads and one for writes,
refilled at the provisioned units per second of engine clock and holding up to 300 seconds of
unused capacity (the burst capacity; a bucket starts full). A call is admitted while its
bucket holds capacity and is charged the units it consumed; an empty bucket answers
``ProvisionedThroughputExceededException``. Off by default, because no other local engine
enforces it and a suite written against them would start failing. Buckets live in the engine
object: processes sharing a file each enforce their own.

The fault injector (``injector.py``) switches enforcement on and off and calls
:meth:`TokenBuckets.admit` from its interceptor. :func:`throttling_error` is the throttling
error as DynamoDB sends it, for the buckets and for injected throttling alike.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import DynamoDBError

if TYPE_CHECKING:
    from ...context import Context, Host
    from ...storage import Reader, TableRow

__all__ = [
    "BURST_SECONDS",
    "READ_OPERATIONS",
    "THROUGHPUT_EXCEEDED",
    "WRITE_OPERATIONS",
    "TokenBuckets",
    "throttling_error",
]

BURST_SECONDS = 300.0
THROUGHPUT_EXCEEDED = (
    "The level of configured provisioned throughput for the table was exceeded. "
    "Consider increasing your provisioning level with the UpdateTable API."
)
WRITE_OPERATIONS = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
)
READ_OPERATIONS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_REASON_SUFFIX = {
    "ProvisionedThroughputExceededException": "ProvisionedThroughputExceeded",
    "RequestLimitExceeded": "AccountLimitExceeded",
}


def _table_arn(engine: Host, region: str, table: str) -> str:
    return f"arn:aws:dynamodb:{region}:{engine.account_id}:table/{table}"


def throttling_error(
    engine: Host, code: str, operation: str, region: str, tables: Iterable[str], message: str
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
    """The buckets of one engine, per (region, table, table id, read or write)."""

    def __init__(self, engine: Host) -> None:
        self.engine = engine
        self.burst_seconds = BURST_SECONDS
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str, int, str], _Bucket] = {}

    def reset(self) -> None:
        """Forget every bucket: each starts full again at its next call."""
        with self._lock:
            self._buckets.clear()

    def admit(self, ctx: Context, tables: list[str]) -> None:
        """Charge this call to its tables' buckets (when it reads or writes items), or raise
        ProvisionedThroughputExceededException if one of them is empty."""
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
                THROUGHPUT_EXCEEDED,
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
