"""TTL-removal audit, fed from the table's stream.

TTL deletes a record some time after ``expires_at`` (DynamoDB: typically within 48 hours).
Once it is gone, a late retry of that request looks new and runs again. The configuration check
(``retention >= client_retry_ceiling``) prevents this by design; the audit *detects* it when the
assumption about clients is wrong:

* a stream ``REMOVE`` made by the TTL service (``userIdentity`` = DynamoDB service) is noted
  with the record's original claim time (carried by its owner token);
* a later ``INSERT`` of the same key (a fresh claim) before ``claimed_at + window`` (the retry
  window, default the configuration's ``client_retry_ceiling``) counts
  ``dynamo_ttl_delete_before_retry_total`` and is reported to ``on_detect``.

Nothing here runs on the request path: it costs no call per request. Feed it GetRecords
responses' ``Records`` or a Lambda DynamoDB-stream event's ``Records`` (both casings of
``userIdentity`` are accepted). Notes live in an :class:`AuditStore`: in memory, or a DynamoDB
table (:class:`DynamoAuditStore`, items expire by TTL after the window).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from . import record as r
from .metrics import NULL, Metrics

log = logging.getLogger("firstwrite.idempotency.audit")

TTL_PRINCIPAL = "dynamodb.amazonaws.com"


@dataclass(frozen=True, slots=True)
class Removal:
    record_id: str
    claimed_at: int
    removed_at: float
    window_ends: float


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
        self.client.put_item(
            TableName=self.table,
            Item={
                "pk": {"S": removal.record_id},
                "claimed_at": {"N": str(removal.claimed_at)},
                "removed_at": {"N": repr(removal.removed_at)},
                "window_ends": {"N": repr(removal.window_ends)},
                "expires_at": {"N": str(int(removal.window_ends) + 1)},
            },
        )

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


class TtlAudit:
    """Consumes stream records of the idempotency table (any view type with ``OldImage`` for
    removals: ``OLD_IMAGE`` or ``NEW_AND_OLD_IMAGES``)."""

    def __init__(
        self,
        *,
        window: float,
        partition_key: str = "pk",
        sort_key: str | None = None,
        store: AuditStore | None = None,
        metrics: Metrics = NULL,
        on_detect: Callable[[str, Removal], None] | None = None,
    ) -> None:
        self.window = window
        self.partition_key = partition_key
        self.sort_key = sort_key
        self.store: AuditStore = store or MemoryAuditStore()
        self.metrics = metrics
        self.on_detect = on_detect
        self.detected = 0

    def _record_id(self, keys: Mapping[str, Any]) -> str:
        pk = keys[self.partition_key]["S"]
        if self.sort_key is None:
            return str(pk)
        return f"{pk}|{keys[self.sort_key]['S']}"

    def process(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Consume records (in stream order); returns how many re-claims were detected."""
        found = 0
        for record in records:
            data = record.get("dynamodb") or {}
            keys = data.get("Keys")
            if not keys:
                continue
            record_id = self._record_id(keys)
            event = record.get("eventName")
            when = _epoch(data.get("ApproximateCreationDateTime"))
            if event == "REMOVE" and _is_ttl(record):
                claimed = r.claimed_at_of(data.get("OldImage") or {})
                claimed_at = int(when if claimed is None else claimed)
                self.store.note(Removal(record_id, claimed_at, when, claimed_at + self.window))
            elif event == "INSERT":
                removal = self.store.find(record_id)
                if removal is None:
                    continue
                claimed = r.claimed_at_of(data.get("NewImage") or {})
                at = when if claimed is None else claimed
                if at < removal.window_ends:
                    found += 1
                    self._detected(record_id, removal)
        return found

    def _detected(self, record_id: str, removal: Removal) -> None:
        self.detected += 1
        log.error(
            "key %s claimed again at most %.0fs after its first claim, after TTL removed it: "
            "a late retry may have run twice; raise retention",
            record_id,
            self.window,
            extra={"idempotency_key": record_id, "dynamo_error_code": "TTLDeleteBeforeRetry"},
        )
        if self.metrics.enabled:
            self.metrics.count("dynamo_ttl_delete_before_retry_total")
        if self.on_detect is not None:
            self.on_detect(record_id, removal)

    def poll(
        self, streams_client: Any, stream_arn: str, iterators: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Read every shard of ``stream_arn`` once (from TRIM_HORIZON, or the iterators a
        previous poll returned) and process the records. Returns the next iterators."""
        iterators = dict(iterators or {})
        desc = streams_client.describe_stream(StreamArn=stream_arn)["StreamDescription"]
        for shard in desc.get("Shards", []):
            shard_id = shard["ShardId"]
            if shard_id not in iterators:
                iterators[shard_id] = streams_client.get_shard_iterator(
                    StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
        for shard_id, iterator in list(iterators.items()):
            while iterator:
                response = streams_client.get_records(ShardIterator=iterator, Limit=1000)
                records = response.get("Records", [])
                self.process(records)
                nxt = response.get("NextShardIterator")
                if not records or nxt is None:
                    iterator = nxt
                    break
                iterator = nxt
            if iterator:
                iterators[shard_id] = iterator
            else:
                iterators.pop(shard_id, None)
        return iterators
