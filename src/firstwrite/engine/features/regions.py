"""Regions and global tables: replicas and their asynchronous, last-writer-wins replication.

The engine serves every region at once: the catalog is keyed by (region, table name), and each
call runs in the region of its client (the SigV4 credential scope over HTTP). As on DynamoDB
(global tables version 2019.11.21), ``UpdateTable(ReplicaUpdates=[{"Create": {"RegionName":
r}}])`` creates a replica in region ``r`` (same key schema, the table's items, a stream of its
own from the table hooks' ``replica`` action), listed by every member's DescribeTable.

* A write to a replica queues one entry per other member *in the write's own transaction*, and
  an entry is deleted in the transaction that applies it: a crash neither loses nor duplicates
  replication work, and any engine (thread or process) on the same file can apply it.
* An entry is due ``lag`` seconds (engine clock) after its source write. Due entries are applied
  by a background thread and, lazily, before any call served in their target region, so a test
  with a frozen clock can ``engine.clock.advance(lag)`` and read the converged replica at once.
* Conflicts resolve last-writer-wins by (source write time, source region; the greater name
  wins a tie). A write always supersedes the version it overwrote, so the replicas converge.
  Replicated writes reach the other change hooks (streams) but are never re-replicated.
* Conditional writes are linearizable within the region they are sent to only: two regions
  may both accept a conditional create of the same key before either has seen the other's.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import threading
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..context import Context, Feature
from ..errors import DynamoDBError, invalid_parameters, validation
from ..item_keys import item_key
from ..storage import Reader, ReplicationEntry, TableRow, Writer
from ..validation import F, check
from ..values import Item, item_size

if TYPE_CHECKING:
    from ..context import Host

__all__ = ["DEFAULT_LAG_SECONDS", "GLOBAL_TABLE_VERSION", "REPLICATED", "Replication"]

log = logging.getLogger(__name__)

GLOBAL_TABLE_VERSION = "2019.11.21"
# Typical cross-region lag on AWS is about a second; 0 makes replicas converge on next touch.
DEFAULT_LAG_SECONDS = 1.0
# Context.extras key marking a write applied by replication (its source region).
REPLICATED = "firstwrite.replicated_from"
_POLL_SECONDS = 0.1
_BATCH = 500

_REGION = F("RegionName", required=True, min_len=1, max_len=64)
_REPLICA_UPDATES = (
    F(
        "ReplicaUpdates",
        kind="list",
        min_len=1,
        members=(
            F("Create", kind="struct", members=(_REGION,)),
            F("Update", kind="struct", members=(_REGION,)),
            F("Delete", kind="struct", members=(_REGION,)),
        ),
    ),
)


def _already_exists(name: str) -> DynamoDBError:
    # DynamoDB's wording, typo included.
    return validation(
        f"Failed to create a the new replica of table with name: '{name}' because one or more "
        "replicas already existed as tables."
    )


def members(row: TableRow) -> list[str]:
    """Every region of ``row``'s replication group, its own included, sorted."""
    others = [r["RegionName"] for r in row.definition.get("Replicas") or ()]
    return sorted({row.region, *others})


class Replication(Feature):
    """``engine.replication``: global tables and their replication."""

    engine: Host  # set by install()

    def __init__(self) -> None:
        self._lag = DEFAULT_LAG_SECONDS
        self._lags: dict[str, float] = {}  # per target region
        self._lock = threading.Lock()
        # Earliest queued write time per target region, as far as this engine knows: lets the
        # lazy apply skip SQLite entirely when nothing can be due.
        self._due: dict[str, float] = {}
        self._intercepting = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False

    def install(self, engine: Host) -> None:
        self.engine = engine
        engine.hooks.add_change_hook(
            self._on_change, lambda row: bool(row.definition.get("Replicas"))
        )
        engine.hooks.add_table_hook(self._on_table)

    def start(self) -> None:
        """Resume the replication another engine on this file left queued, if any."""
        if self.engine.storage.read(Reader.global_tables_exist):
            self._refresh_due()
            self._start()

    # configuration -------------------------------------------------------------------------

    def lag(self, seconds: float | None = None, *, region: str | None = None) -> float:
        """Set (or, without ``seconds``, read) the replication lag, for one target region or all.

        ``float("inf")`` holds replication back until :meth:`flush`. Setting the lag of all
        regions clears the per-region ones.
        """
        if seconds is not None:
            seconds = float(seconds)
            if math.isnan(seconds) or seconds < 0:
                raise ValueError(f"replication lag must be >= 0 seconds, not {seconds}")
            with self._lock:
                if region is None:
                    self._lag = seconds
                    self._lags.clear()
                else:
                    self._lags[region] = seconds
        return self._lag_for(region) if region is not None else self._lag

    def lags(self) -> dict[str, float]:
        return dict(self._lags)

    def _lag_for(self, region: str) -> float:
        return self._lags.get(region, self._lag)

    # replica management (in process; the API way is UpdateTable ReplicaUpdates) -------------

    def create_replica(self, table: str, region: str, replica_region: str) -> dict[str, Any]:
        """Make ``table`` of ``region`` a global table with a replica in ``replica_region``."""
        return self.engine.execute(
            "UpdateTable",
            {"TableName": table, "ReplicaUpdates": [{"Create": {"RegionName": replica_region}}]},
            region=region,
        )

    def delete_replica(self, table: str, region: str, replica_region: str) -> dict[str, Any]:
        return self.engine.execute(
            "UpdateTable",
            {"TableName": table, "ReplicaUpdates": [{"Delete": {"RegionName": replica_region}}]},
            region=region,
        )

    # applying ------------------------------------------------------------------------------

    def apply_due(self, region: str | None = None) -> int:
        """Apply every queued write whose lag has elapsed (to ``region``'s replicas, or all)."""
        return self._apply(region, force=False)

    def flush(self, region: str | None = None) -> int:
        """Apply every queued write now, whatever the lag. Returns how many were applied."""
        return self._apply(region, force=True)

    def backlog(self) -> list[dict[str, Any]]:
        """Queued replication work per (table, source region, target region)."""
        rows = self.engine.storage.read(Reader.replication_backlog)
        return [
            {"table": t, "source": s, "target": d, "pending": n, "oldest": at}
            for t, s, d, n, at in rows
        ]

    def _apply(self, region: str | None, *, force: bool) -> int:
        now = self.engine.clock.now()
        targets = [region] if region is not None else self._targets()
        applied = 0
        for target in targets:
            up_to = math.inf if force else now - self._lag_for(target)
            if up_to == -math.inf or math.isnan(up_to):
                continue
            while True:
                count = self.engine.storage.write(
                    functools.partial(self._apply_batch, target=target, up_to=up_to)
                )
                applied += count
                if count < _BATCH:
                    break
            self._refresh_due(target)
        return applied

    def _targets(self) -> list[str]:
        return sorted({row[2] for row in self.engine.storage.read(Reader.replication_backlog)})

    def _apply_batch(self, w: Writer, *, target: str, up_to: float) -> int:
        entries = w.replication_due(target, up_to, _BATCH)
        for entry in entries:
            self._apply_entry(w, entry)
        w.replication_done([e.seq for e in entries])
        return len(entries)

    def _apply_entry(self, w: Writer, entry: ReplicationEntry) -> None:
        row = w.table(entry.target_region, entry.table_name)
        if row is None:
            return  # the replica is gone: nothing to apply it to
        version = w.item_version(row.id, entry.pk, entry.sk)
        if version is not None and (entry.written_at, entry.source_region) <= version:
            return  # a later write already won there
        old = w.get(row.id, entry.pk, entry.sk)
        if entry.item is None:
            if old is not None:
                w.delete(row.id, entry.pk, entry.sk)
        else:
            w.put(row.id, entry.pk, entry.sk, item_size(entry.item), entry.item)
        w.set_item_version(row.id, entry.pk, entry.sk, entry.written_at, entry.source_region)
        engine = self.engine
        if len(engine.hooks.change_hooks) > 1 and (old is not None or entry.item is not None):
            ctx = Context(
                engine,
                {},
                region=entry.target_region,
                operation="ReplicatedWrite",
                extras={REPLICATED: entry.source_region},
            )
            engine.hooks.emit_change(ctx, w, row, old, entry.item)

    # hooks -----------------------------------------------------------------------------------

    def _on_change(
        self, ctx: Context, w: Writer, row: TableRow, old: Item | None, new: Item | None
    ) -> None:
        replicas = row.definition.get("Replicas")
        if not replicas or REPLICATED in ctx.extras:
            return
        item = new if new is not None else old
        if item is None:
            return
        pk, sk = item_key(row.key_schema, item)
        now = at = ctx.now()
        region = row.region
        version = w.item_version(row.id, pk, sk)
        if version is not None and (at, region) <= version:
            # The clock stands still or went back: still supersede what this write replaced.
            at = math.nextafter(version[0], math.inf)
        w.set_item_version(row.id, pk, sk, at, region)
        targets = [r["RegionName"] for r in replicas]
        w.replication_enqueue(row.name, region, targets, pk, sk, at, now, new)
        self._note_pending(targets, now)

    def _on_table(
        self, ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
    ) -> TableRow:
        if action == "update" and params.get("ReplicaUpdates") is not None:
            return self._update_replicas(ctx, w, row, params)
        if action == "delete" and row.definition.get("Replicas"):
            # Deleting one replica's table takes it out of the group.
            group = [m for m in members(row) if m != row.region]
            w.replication_purge(row.name, row.region)
            w.drop_item_versions(row.id)
            self._set_group(w, row.name, group, skip=row.region)
        return row

    def _update_replicas(
        self, ctx: Context, w: Writer, row: TableRow, params: Mapping[str, Any]
    ) -> TableRow:
        check(params, _REPLICA_UPDATES)
        group = members(row)
        name = row.name
        for update in params["ReplicaUpdates"]:
            actions = [k for k in ("Create", "Update", "Delete") if update.get(k) is not None]
            if len(actions) != 1:
                raise invalid_parameters(
                    "A ReplicationGroupUpdate must contain exactly one of Create, Update or Delete"
                )
            action = actions[0]
            target = update[action]["RegionName"]
            if target == row.region and action != "Update":
                raise validation(
                    "Cannot add or delete the local region through ReplicaUpdates. Use "
                    "CreateTable, DeleteTable, or UpdateTable as required."
                )
            if action == "Create":
                if target in group:
                    raise _already_exists(name)
                if w.table(target, name) is not None:
                    raise _already_exists(name)
                self._create_replica(ctx, w, row, target)
                group.append(target)
            elif target not in group:
                raise validation(
                    "Replica specified in the Replica Update or Replica Delete action of the "
                    "request was not found."
                )
            elif action == "Delete":
                replica = w.table(target, name)
                if replica is None:
                    w.replication_purge(name, target)
                else:  # its table goes as DeleteTable takes one: every feature's share first
                    self._table_hooks(ctx, w, replica, "delete")
                    w.drop_table(replica)
                group.remove(target)
            # "Update" carries per-replica overrides (throughput, KMS, table class): accepted,
            # nothing to change here.
        updated = self._set_group(w, name, sorted(group))
        return updated.get(row.region, row)

    def _create_replica(self, ctx: Context, w: Writer, row: TableRow, target: str) -> None:
        row = w.table(row.region, row.name) or row  # the stream a table hook switched on
        definition = {
            k: copy.deepcopy(v)
            for k, v in row.definition.items()
            # Streams, tags and other per-table state stay with their own table.
            if not k.startswith("_")
            and k not in ("StreamSpecification", "LatestStreamArn", "LatestStreamLabel")
        }
        definition["TableArn"] = (
            f"arn:aws:dynamodb:{target}:{self.engine.account_id}:table/{row.name}"
        )
        definition["TableId"] = str(uuid.uuid4())
        definition["CreationDateTime"] = ctx.now()
        replica = w.create_table(target, row.name, definition)
        # The other features' share of a new replica (its own stream: new ARN and label). The
        # seed copy below is recorded in no stream: those writes are in the table's own.
        settings = {"StreamSpecification": row.definition.get("StreamSpecification")}
        replica = self._table_hooks(ctx, w, replica, "replica", settings)
        w.copy_table_items(row.id, replica.id)
        # Writes from other members not yet applied to the seed must reach the new replica too.
        w.replication_fork(row.name, row.region, target)
        self._start()

    def _table_hooks(
        self,
        ctx: Context,
        w: Writer,
        replica: TableRow,
        action: str,
        params: Mapping[str, Any] | None = None,
    ) -> TableRow:
        """Every table hook's ``action`` on ``replica``'s table, in its own region."""
        at = Context(
            self.engine, {}, region=replica.region, operation=ctx.operation, extras=ctx.extras
        )
        for hook in self.engine.hooks.table_hooks:
            replica = hook(at, w, replica, action, params or {})
        return replica

    def _set_group(
        self, w: Writer, name: str, group: list[str], *, skip: str | None = None
    ) -> dict[str, TableRow]:
        """Write the group's membership into every member's definition (DescribeTable)."""
        out: dict[str, TableRow] = {}
        for region in group:
            if region == skip:
                continue
            member = w.table(region, name)
            if member is None:
                continue
            definition = copy.deepcopy(member.definition)
            others = [r for r in group if r != region]
            if others:
                definition["Replicas"] = [
                    {"RegionName": r, "ReplicaStatus": "ACTIVE"} for r in others
                ]
                definition["GlobalTableVersion"] = GLOBAL_TABLE_VERSION
            else:
                definition.pop("Replicas", None)
                definition.pop("GlobalTableVersion", None)
            out[region] = w.update_table(member, definition)
        return out

    # the lazy apply and the background applier ----------------------------------------------

    def _note_pending(self, targets: list[str], at: float) -> None:
        with self._lock:
            for target in targets:
                due = self._due.get(target)
                if due is None or at < due:
                    self._due[target] = at
        self._ensure_intercepting()
        self._start()

    def _refresh_due(self, region: str | None = None) -> None:
        storage = self.engine.storage
        if region is None:
            lanes = storage.read(Reader.replication_backlog)
            oldest: dict[str, float] = {}
            for _table, _source, target, _count, at in lanes:
                oldest[target] = min(at, oldest.get(target, math.inf))
            with self._lock:
                self._due = oldest
        else:
            first = storage.read(lambda r: r.replication_oldest(region))
            with self._lock:
                if first is None:
                    self._due.pop(region, None)
                else:
                    self._due[region] = first
        if self._due:
            self._ensure_intercepting()
        else:
            self._stop_intercepting()

    def _touch(self, ctx: Context) -> None:
        # Interceptor: before any call in a region, apply the writes now due there.
        due = self._due.get(ctx.region)
        if due is not None and due <= ctx.now() - self._lag_for(ctx.region):
            try:
                self._apply(ctx.region, force=False)
            except DynamoDBError:
                log.warning("replication to %s failed; the background applier retries", ctx.region)

    def _ensure_intercepting(self) -> None:
        with self._lock:
            if self._intercepting:
                return
            self._intercepting = True
        self.engine.hooks.add_interceptor(self._touch, first=True)

    def _stop_intercepting(self) -> None:
        with self._lock:
            if not self._intercepting:
                return
            self._intercepting = False
        self.engine.hooks.remove_interceptor(self._touch)

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name="firstwrite-replication", daemon=True
            )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(_POLL_SECONDS):
            try:
                self._refresh_due()
                if self._due:
                    self._apply(None, force=False)
            except RuntimeError:
                return  # the engine was closed under us
            except Exception:  # keep replicating: the entries stay queued
                log.exception("background replication failed")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
