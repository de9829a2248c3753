"""The TTL audit: a retry that arrives after TTL removed its record is no longer taken for new.

TTL removes a finished record some time after its retention; a retry later still (a client
retrying longer than ``client_retry_ceiling`` promised) finds no record and would run again.
This audit is the defence when that promise does not hold (docs/guarantees.md, "The TTL audit"):

1. :meth:`TtlAudit.process` reads the table's stream. A ``REMOVE`` by the TTL service of a
   finished record becomes a **tombstone** under the same key (when the audit has a
   ``client``), kept for ``window`` seconds. A claim's condition fails on it and returns it, so
   a request with the same fingerprint is a **late retry**: counted, logged, and run again (the
   default) or refused with :class:`~.errors.LateRetryError` (``refuse_late_retries=True``). A
   different request with the same key replaces the tombstone.
2. The removal is also noted in an :class:`AuditStore` (in memory, or a DynamoDB table); a fresh
   claim of that key within ``window`` of the removal is a late retry detected after the fact:
   counted, logged, and passed to ``on_detect``.
3. Each TTL ``REMOVE``'s age against the key's last request: ``dynamo_ttl_remove_age_seconds``.

Feed it GetRecords' or a Lambda DynamoDB-stream event's ``Records`` (either ``userIdentity``
casing); the stream needs the old image (``OLD_IMAGE`` or ``NEW_AND_OLD_IMAGES``).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from . import record as r
from .client_errors import client_error_code
from .config import IdempotencyConfig
from .keys import caller_key
from .layout import DEFAULT
from .metrics import NULL, Metrics
from .requests import NO_FINGERPRINT, Requests, same_request
from .stream_reading import StreamPolling

log = logging.getLogger("firstwrite.idempotency.audit")

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
DEFAULT_WINDOW = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Removal:
    """A finished record TTL removed. Times are epoch seconds; ``window_ends`` is when the
    removal stops being remembered."""

    record_id: str
    claimed_at: int
    removed_at: float
    window_ends: float
    fingerprint: str | None = None
    status: str = "COMPLETED"


class AuditStore(Protocol):
    def note(self, removal: Removal) -> None: ...

    def find(self, record_id: str) -> Removal | None: ...


class MemoryAuditStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._removals: dict[str, Removal] = {}

    def note(self, removal: Removal) -> None:
        with self._lock:
            self._removals[removal.record_id] = removal

    def find(self, record_id: str) -> Removal | None:
        with self._lock:
            return self._removals.get(record_id)


class DynamoAuditStore:
    """Removal notes in a DynamoDB table keyed ``pk`` (S), expiring via TTL on ``expires_at``."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table = table_name

    def note(self, removal: Removal) -> None:
        item = {
            "pk": {"S": removal.record_id},
            "claimed_at": {"N": str(removal.claimed_at)},
            "removed_at": {"N": repr(removal.removed_at)},
            "window_ends": {"N": repr(removal.window_ends)},
            "expires_at": {"N": str(int(removal.window_ends) + 1)},
            "status": {"S": removal.status},
        }
        if removal.fingerprint is not None:
            item["fingerprint"] = {"S": removal.fingerprint}
        self.client.put_item(TableName=self.table, Item=item)

    def find(self, record_id: str) -> Removal | None:
        item = self.client.get_item(
            TableName=self.table, Key={"pk": {"S": record_id}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        return Removal(
            record_id,
            int(float(item["claimed_at"]["N"])),
            float(item["removed_at"]["N"]),
            float(item["window_ends"]["N"]),
            item["fingerprint"]["S"] if "fingerprint" in item else None,
            item["status"]["S"] if "status" in item else "COMPLETED",
        )


def _epoch(value: Any) -> float:
    """Stream timestamps: boto3 parses them into ``datetime``; Lambda events carry numbers."""
    if value is None:
        return 0.0
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return float(value)


def _is_ttl(record: Mapping[str, Any]) -> bool:
    identity = record.get("userIdentity") or {}
    kind = identity.get("Type", identity.get("type"))
    principal = identity.get("PrincipalId", identity.get("principalId"))
    return kind == "Service" and principal == TTL_PRINCIPAL


class TtlAudit(StreamPolling):
    """Consumes stream records of the idempotency table.

    ``window``: how long after TTL removed a record its key is remembered (default 7 days).
    ``config`` and ``client``: the guard's configuration and a boto3 client, to write
    tombstones into its table (without a client, removals are only noted in ``store`` and late
    retries detected after the fact). ``partition_key``/``sort_key`` default to ``config``'s.
    """

    def __init__(
        self,
        *,
        window: float = DEFAULT_WINDOW,
        config: IdempotencyConfig | None = None,
        client: Any = None,
        partition_key: str | None = None,
        sort_key: str | None = None,
        store: AuditStore | None = None,
        metrics: Metrics = NULL,
        on_detect: Callable[[str, Removal], None] | None = None,
    ) -> None:
        if window <= 0:
            raise ValueError("window must be > 0 seconds")
        if client is not None and config is None:
            raise ValueError("writing tombstones needs the guard's config (its table and key)")
        self.window = window
        self.config = config
        self.client = client
        self.partition_key = partition_key or (config.partition_key if config else "pk")
        self.sort_key = sort_key if sort_key is not None else (config.sort_key if config else None)
        self.store: AuditStore = store or MemoryAuditStore()
        self.metrics = metrics
        self.on_detect = on_detect
        self._requests = Requests(config) if config is not None else None
        self.layout = config.layout if config is not None else DEFAULT
        self.detected = 0
        self.tombstones = 0

    def _ids(self, keys: Mapping[str, Any]) -> tuple[str, str]:
        """(record id, the caller's key) of a stream record's ``Keys``."""
        pk = str(keys[self.partition_key]["S"])
        if self.sort_key is None:
            return pk, caller_key(pk)
        sk = str(keys[self.sort_key]["S"])
        return f"{pk}|{sk}", caller_key(pk, sk)

    def process(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Consume records (in stream order); returns how many late retries were detected
        after the fact (an ``INSERT`` after a remembered removal)."""
        found = 0
        for record in records:
            data = record.get("dynamodb") or {}
            keys = data.get("Keys")
            if not keys:
                continue
            event = record.get("eventName")
            if event == "REMOVE" and _is_ttl(record):
                self._removed(keys, data.get("OldImage") or {}, data)
            elif event == "INSERT":
                found += self._inserted(keys, data.get("NewImage") or {}, data)
        return found

    def _removed(self, keys: Mapping[str, Any], old: dict[str, Any], data: Any) -> None:
        n = self.layout
        if n.expires not in old or n.removed_at in old:
            return  # not an idempotency record, or a tombstone expiring in turn
        try:
            rec = r.Record.from_item(old, n)
        except (KeyError, ValueError):
            return  # not an idempotency record of this layout
        removed_at = _epoch(data.get("ApproximateCreationDateTime"))
        claimed = rec.claimed_at
        if claimed is not None and self.metrics.enabled:
            self.metrics.observe(
                "dynamo_ttl_remove_age_seconds",
                max(0.0, removed_at - claimed),
                record=rec.status.value.lower(),
            )
        if not rec.finished:
            return  # PENDING or retryable FAILED: running the request again is the answer
        record_id, _ = self._ids(keys)
        claimed_at = int(removed_at if claimed is None else claimed)
        removal = Removal(
            record_id,
            claimed_at,
            removed_at,
            removed_at + self.window,
            rec.fingerprint,
            rec.status.value,
        )
        self.store.note(removal)
        # A hand-built row (no owner) leaves no tombstone: a tombstone is fenced by an owner.
        if self.client is not None and self._requests is not None and not rec.foreign:
            call = self._requests.tombstone(
                dict(keys),
                old[n.owner]["S"],
                rec.fingerprint,
                rec.status.value,
                removed_at,
                self.window,
            )
            try:
                self.client.put_item(**call.params)
            except Exception as exc:
                if client_error_code(exc) != "ConditionalCheckFailedException":
                    raise
                return  # a claim was made since the removal: the INSERT will tell
            self.tombstones += 1

    def _inserted(self, keys: Mapping[str, Any], new: dict[str, Any], data: Any) -> int:
        n = self.layout
        if n.removed_at in new:
            return 0  # a tombstone (ours, or another consumer's)
        record_id, key = self._ids(keys)
        removal = self.store.find(record_id)
        if removal is None:
            return 0
        claimed = r.claimed_at_of(new, n)
        at = _epoch(data.get("ApproximateCreationDateTime")) if claimed is None else claimed
        fp = new.get(n.fingerprint, {}).get("S", NO_FINGERPRINT)
        if at >= removal.window_ends or not same_request(removal.fingerprint, fp):
            return 0
        self._detected(key, record_id, removal, at - removal.claimed_at)
        return 1

    def _detected(self, key: str, record_id: str, removal: Removal, age: float) -> None:
        self.detected += 1
        log.error(
            "late retry of %r ran again: claimed %.0fs after the first request, after TTL "
            "removed its %s record; raise retention, or set refuse_late_retries and give this "
            "audit a client so the next one is refused",
            key,
            age,
            removal.status,
            extra={
                "idempotency_key": key,
                "record_id": record_id,
                "record_age": age,
                "dynamo_error_code": "TTLDeleteBeforeRetry",
            },
        )
        if self.metrics.enabled:
            self.metrics.count("dynamo_ttl_delete_before_retry_total")
        if self.on_detect is not None:
            self.on_detect(record_id, removal)
