"""DynamoDB Streams: the change hook that records item changes, and streams on and off.

* A table's stream is switched on and off by ``StreamSpecification`` on CreateTable/UpdateTable
  (a table hook, in the catalog transaction). Every enable creates a new stream with a new ARN;
  a disabled (or deleted) table's last stream stays readable for 24 hours.
* Records are written by a change hook inside the item's own write transaction, so a crash can
  neither lose a record of a committed write nor invent one for a rolled-back write. Sequence
  numbers come from an AUTOINCREMENT column allocated in that transaction: strictly increasing
  across every process writing the database file.
* One shard per stream (DynamoDB splits shards by partition and time; consumers that walk the
  shard list handle one shard like many). A disabled stream's shard is closed: it gets an
  EndingSequenceNumber and GetRecords ends with no NextShardIterator once it is drained.
* Time comes from the engine clock: ApproximateCreationDateTime and the 24-hour retention
  (:meth:`Streams._purge`, run by the TTL sweeper).
* Global tables, as on DynamoDB: a table going global gets a NEW_AND_OLD_IMAGES stream if it
  had none, each replica one of its own (the ``replica`` action); none is disabled while the
  table has replicas. The Streams API that reads the records is ``operations/streams.py``.
"""

from __future__ import annotations

import copy
import math
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..context import Context, Feature
from ..errors import DynamoDBError, validation
from ..item_keys import key_of
from ..operations.streams import RETENTION_S
from ..storage import TableRow, Writer, pack
from ..values import Item, equal, item_size

if TYPE_CHECKING:
    from ..context import Host

__all__ = ["Streams", "same_item"]

_VIEW_TYPES = ("NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY")
# The stream a table without one gets when it goes global (DynamoDB's choice).
REPLICA_STREAM_VIEW = "NEW_AND_OLD_IMAGES"


# --- stream labels ------------------------------------------------------------------------------


def _label(at: float) -> str:
    """A stream label: the creation instant as ISO 8601 with milliseconds, no zone (as AWS)."""
    millis = math.floor(at * 1000)
    seconds, ms = divmod(millis, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}"


# --- recording changes (change hook) -----------------------------------------------------------


def same_item(old: Item, new: Item) -> bool:
    """Whether two stored items are equal as DynamoDB sees them (sets ignore order)."""
    return old.keys() == new.keys() and all(equal(old[k], new[k]) for k in old)


def _on_change(ctx: Context, w: Writer, row: TableRow, old: Item | None, new: Item | None) -> None:
    stream = row.definition.get("_stream")
    if stream is None:  # the one check a write pays when streams are off
        return
    if old is None:
        if new is None:
            return
        event = "INSERT"
    elif new is None:
        event = "REMOVE"
    elif same_item(old, new):
        return  # a write that changes nothing makes no record
    else:
        event = "MODIFY"
    view = stream["view"]
    keys = key_of(row.key_schema, new if new is not None else old)  # type: ignore[arg-type]
    now = ctx.now()
    data: dict[str, Any] = {"ApproximateCreationDateTime": float(math.floor(now)), "Keys": keys}
    size = item_size(keys)
    if new is not None and view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
        data["NewImage"] = new
        size += item_size(new)
    if old is not None and view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
        data["OldImage"] = old
        size += item_size(old)
    data["SizeBytes"] = size
    data["StreamViewType"] = view
    record: dict[str, Any] = {
        "eventID": uuid.uuid4().hex,
        "eventName": event,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": row.region,
        "dynamodb": data,
    }
    principal = ctx.principal
    if principal is not None:
        record["userIdentity"] = {"Type": "Service", "PrincipalId": principal}
    w.stream_append(stream["id"], now, pack(record))


# --- switching streams on and off (table hook) ---------------------------------------------------


def _enable(ctx: Context, w: Writer, row: TableRow, view: str) -> dict[str, Any]:
    now = ctx.now()
    base = row.definition["TableArn"]
    at = now
    while True:  # a frozen clock can enable twice in one millisecond: labels must differ
        label = _label(at)
        arn = f"{base}/stream/{label}"
        if w.stream(arn) is None:
            break
        at += 0.001
    shard_id = f"shardId-{int(now * 1000):020d}-{uuid.uuid4().hex[:8]}"
    stream = w.stream_create(
        arn=arn,
        region=row.region,
        table_name=row.name,
        label=label,
        view_type=view,
        shard_id=shard_id,
        key_schema=copy.deepcopy(row.definition["KeySchema"]),
        created_at=now,
    )
    definition = copy.deepcopy(row.definition)
    definition["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": view}
    definition["LatestStreamArn"] = arn
    definition["LatestStreamLabel"] = label
    definition["_stream"] = {"id": stream.id, "arn": arn, "view": view}
    return definition


def _close(ctx: Context, w: Writer, row: TableRow) -> None:
    current = row.definition.get("_stream")
    if current is not None:  # the stream outlives its table by the retention period
        w.stream_close(current["id"], ctx.now())


def _going_global(ctx: Context, w: Writer, row: TableRow, updates: list[Any]) -> TableRow:
    """A table given a replica gets a stream if it has none (replication reads it). Runs
    before the regions feature's own hook, in the same transaction: a ReplicaUpdates it refuses
    undoes this too. (A removed replica's stream closes with its table: ``delete``.)"""
    if "_stream" in row.definition:
        return row
    if any(isinstance(u, Mapping) and u.get("Create") is not None for u in updates):
        return w.update_table(row, _enable(ctx, w, row, REPLICA_STREAM_VIEW))
    return row


def _on_table(
    ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
) -> TableRow:
    current = row.definition.get("_stream")
    if action == "delete":
        _close(ctx, w, row)
        return row
    if action == "update" and params.get("ReplicaUpdates"):
        return _going_global(ctx, w, row, params["ReplicaUpdates"])
    spec = params.get("StreamSpecification")
    if spec is None:
        return row
    enabled = bool(spec.get("StreamEnabled"))
    view = spec.get("StreamViewType")
    if enabled:
        error: DynamoDBError | None = None
        if current is not None:
            error = validation(f"Table already has an enabled stream: TableName: {row.name}")
        elif view is None:
            error = validation(
                "One or more parameter values were invalid: StreamViewType is required when "
                "StreamEnabled is true"
            )
        if error is not None:
            if action == "create":
                w.drop_table(row)  # the table row is this transaction's own: undo it whole
            raise error
        assert view in _VIEW_TYPES  # the request check enforces the enum
        return w.update_table(row, _enable(ctx, w, row, view))
    if action != "update":
        return row  # StreamEnabled=false at creation: no stream, nothing to record
    if current is None:
        raise validation(f"Table has no stream to disable: TableName: {row.name}")
    if row.definition.get("Replicas"):
        raise validation(
            "One or more parameter values were invalid: Disabling Stream is not allowed for a "
            "Global Table replica."
        )
    _close(ctx, w, row)
    definition = copy.deepcopy(row.definition)
    definition.pop("StreamSpecification", None)
    definition.pop("_stream", None)
    return w.update_table(row, definition)  # LatestStreamArn/Label stay, as on DynamoDB


class Streams(Feature):
    """``engine.streams``: records item changes of the tables whose stream is on.

    Retention (:meth:`_purge`) runs with the TTL sweeper.
    """

    def install(self, engine: Host) -> None:
        self._storage = engine.storage
        engine.hooks.add_change_hook(_on_change, lambda row: "_stream" in row.definition)
        engine.hooks.add_table_hook(_on_table)
        engine.hooks.add_sweep_hook(self._purge)

    def _purge(self, now: float) -> None:
        """Retention: drop records and closed streams older than 24 hours (after each sweep)."""
        before = now - RETENTION_S
        if self._storage.read(lambda r: r.stream_records_before(before)):
            self._storage.write(lambda w: w.stream_purge(before))
