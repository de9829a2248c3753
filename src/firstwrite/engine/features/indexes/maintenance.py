"""Secondary indexes: kept in every write's own transaction, built and dropped in the background.

A change hook keeps each index's entries (``storage/indexes.py``) in the transaction of the
write that changed the item, whoever wrote it (any write operation, a TTL deletion, a replicated
write): no index ever shows a half-applied write, before or after a crash. Only tables with
indexes are watched; the others keep the single-statement fast paths. The hook also records
each index's write units (``consumed.INDEX_UNITS``) and, with local secondary indexes, enforces
the item collection size limit and records ``ItemCollectionMetrics`` (``consumed.COLLECTIONS``).

A table hook gives CreateTable's indexes their storage, applies UpdateTable's
``GlobalSecondaryIndexUpdates`` with DynamoDB's rules, refuses DeleteTable while an index is
being built or dropped, and gives a new replica of a global table its own copy of every index.

A GSI added by UpdateTable goes through DynamoDB's states (``CREATING``, ``Backfilling`` false
then true while the items are indexed ``IndexConfig.batch_size`` per transaction, ``ACTIVE``);
a deleted one is ``DELETING`` until its entries are gone, and its unused attribute definitions
leave with it. The work runs on a background thread (``IndexConfig.background``) or with
:meth:`Indexes.work_now`; its progress is stored, so a crash or another engine resumes it.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ... import consumed
from ...context import Context, Feature
from ...errors import DynamoDBError
from ...item_keys import IndexSchema, index_entry, item_key
from ...storage import Reader, TableRow, Writer
from ...values import Item, item_size
from . import updates as index_updates

if TYPE_CHECKING:
    from ...context import Host

__all__ = ["COLLECTION_LIMIT_BYTES", "IndexConfig", "Indexes"]

log = logging.getLogger(__name__)

COLLECTION_LIMIT_BYTES = 10 * 1024**3  # an item collection of a table with an LSI: 10 GB
_GB = float(1024**3)


@dataclass(frozen=True)
class IndexConfig:
    """How index backfills and deletions run.

    ``batch_size``: base-table items indexed (or entries deleted) per transaction.
    ``background``: run them on a background thread as soon as UpdateTable asks (``False``:
    only :meth:`Indexes.work_now` runs them, so a test can observe ``CREATING``).
    ``poll_interval``: seconds between the background thread's checks for work another
    engine on the same file left. ``collection_limit``: the item collection size limit of
    tables with local secondary indexes, in bytes (DynamoDB's is 10 GB).
    """

    batch_size: int = 500
    background: bool = True
    poll_interval: float = 1.0
    collection_limit: int = COLLECTION_LIMIT_BYTES

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {self.batch_size!r}")
        if not self.poll_interval > 0:
            raise ValueError(f"poll_interval must be > 0, not {self.poll_interval!r}")
        if self.collection_limit < 1:
            raise ValueError(f"collection_limit must be >= 1, not {self.collection_limit!r}")


def _collection_metrics(row: TableRow, item: Item, size: int) -> dict[str, Any]:
    # DynamoDB gives a range of whole gigabytes around its estimate.
    low = float(int(size / _GB))
    return {
        "ItemCollectionKey": {row.key_schema.hash_name: item[row.key_schema.hash_name]},
        "SizeEstimateRangeGB": [low, low + 1.0],
    }


class Indexes(Feature):
    """``engine.indexes``: keeps secondary indexes and runs their backfills and deletions."""

    _engine: Host  # set by install()

    def __init__(self, config: IndexConfig | None = None) -> None:
        self._config = config or IndexConfig()
        self._lock = threading.Lock()  # one pass of background work at a time in this engine
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._scheduled = False  # work was scheduled in this process: list it under the lock
        self._thread: threading.Thread | None = None

    @property
    def config(self) -> IndexConfig:
        return self._config

    def configure(self, **changes: Any) -> IndexConfig:
        """Change the configuration (e.g. ``background=False``); takes effect at once."""
        self._config = replace(self._config, **changes)
        if self._config.background:
            self._start_thread()
        self._wake.set()
        return self._config

    # lifecycle -------------------------------------------------------------------------------

    def install(self, engine: Host) -> None:
        self._engine = engine
        engine.hooks.add_change_hook(
            self._on_change,
            lambda row: bool(row.indexes),
            refuses=lambda row: any(index.local for index in row.indexes),
        )
        engine.hooks.add_table_hook(self._on_table)

    def start(self) -> None:
        """Resume the backfills and deletions a previous run (or another engine) left."""
        if self._config.background:
            self._start_thread()
            self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10.0)

    def _start_thread(self) -> None:
        if self._stop.is_set():
            return
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="firstwrite-indexes", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._config.poll_interval)
            self._wake.clear()
            if self._stop.is_set() or not self._config.background:
                continue
            try:
                self.work_now()
            except RuntimeError:
                return  # the engine was closed under us
            except Exception:  # keep going: the work is stored and retried on the next pass
                if self._stop.is_set():
                    return
                log.exception("secondary index background work failed")

    # background work ---------------------------------------------------------------------------

    def work_now(self) -> int:
        """Run every pending backfill and index deletion to completion, now. Returns how many
        indexes were finished."""
        with self._lock:
            storage = self._engine.storage
            if self._scheduled:
                # Listed under the write lock: after the UpdateTable that scheduled it commits.
                self._scheduled = False
                backfills = storage.write(lambda w: w.index_backfills())
            else:
                backfills = storage.read(Reader.index_backfills)
            done = 0
            for index_id, table_id, _cursor in backfills:
                chunk = partial(self._backfill_chunk, index_id=index_id, table_id=table_id)
                while storage.write(chunk):
                    pass
                done += 1
            dropping = storage.read(
                lambda r: [
                    (row.id, index.id)
                    for row in r.tables()
                    for index in row.indexes
                    if index.status == "DELETING"
                ]
            )
            for table_id, index_id in dropping:
                chunk = partial(self._drop_chunk, index_id=index_id, table_id=table_id)
                while storage.write(chunk):
                    pass
                done += 1
            return done

    def _schedule(self) -> None:
        self._scheduled = True
        if self._config.background:
            self._start_thread()
            self._wake.set()

    def _backfill_chunk(self, w: Writer, index_id: int, table_id: int) -> bool:
        """Index the next ``batch_size`` items of a table; ``False`` once the backfill is over."""
        cursors = {i: c for i, t, c in w.index_backfills() if t == table_id}
        row = w.table_by_id(table_id)
        index = None if row is None else next((i for i in row.indexes if i.id == index_id), None)
        if row is None or index is None or index.status != "CREATING" or index_id not in cursors:
            w.index_backfill_done(index_id)  # dropped or deleted meanwhile
            return False
        definition = copy.deepcopy(row.definition)
        described = index_updates.find(definition, index.name)
        assert described is not None
        if described.get("Backfilling") is False:
            # Resource allocation is over: the table is ACTIVE while the index backfills.
            index_updates.set_index(definition, index.name, Backfilling=True)
            index_updates.settled(definition)
            row = w.update_table(row, definition)
        size = self._config.batch_size
        rows = w.scan_after(table_id, cursors[index_id], size)
        for _pk, _sk, _size, item in rows:
            entry = index_entry(row.key_schema, index, item)
            if entry is not None:
                w.index_put(index_id, *entry)
        if len(rows) == size:
            w.index_backfill_set(index_id, table_id, (rows[-1][0], rows[-1][1]))
            return True
        w.index_backfill_done(index_id)
        definition = copy.deepcopy(row.definition)
        index_updates.set_index(definition, index.name, IndexStatus="ACTIVE", Backfilling=None)
        index_updates.settled(definition)
        w.update_table(row, definition)
        return False

    def _drop_chunk(self, w: Writer, index_id: int, table_id: int) -> bool:
        """Delete the next entries of a DELETING index; at the end, the index itself."""
        row = w.table_by_id(table_id)
        index = None if row is None else next((i for i in row.indexes if i.id == index_id), None)
        if row is None or index is None or index.status != "DELETING":
            return False
        size = self._config.batch_size
        if w.index_drop_chunk(index_id, size) == size:
            return True
        definition = copy.deepcopy(row.definition)
        definition["GlobalSecondaryIndexes"] = [
            i for i in index_updates.gsis(definition) if i["IndexName"] != index.name
        ]
        if not definition["GlobalSecondaryIndexes"]:
            del definition["GlobalSecondaryIndexes"]
        ids = dict(definition["_index_ids"])
        ids.pop(index.name, None)
        definition["_index_ids"] = ids
        # The attributes only that index used leave AttributeDefinitions (DDB-TABLE-151).
        used = {k["AttributeName"] for k in definition["KeySchema"]}
        for member in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            for other in definition.get(member) or ():
                used.update(k["AttributeName"] for k in other["KeySchema"])
        definition["AttributeDefinitions"] = [
            d for d in definition["AttributeDefinitions"] if d["AttributeName"] in used
        ]
        index_updates.settled(definition)
        w.index_forget([index_id])
        w.update_table(row, definition)
        return False

    # keeping the entries (change hook) ---------------------------------------------------------

    def _on_change(
        self, ctx: Context, w: Writer, row: TableRow, old: Item | None, new: Item | None
    ) -> None:
        indexes = row.indexes
        if not indexes:
            return
        table = row.key_schema
        local: list[IndexSchema] = []
        for index in indexes:
            if index.status == "DELETING":
                continue
            if index.local:
                local.append(index)
            before = None if old is None else index_entry(table, index, old)
            after = None if new is None else index_entry(table, index, new)
            if before is None and after is None:
                continue  # the item is in neither version of this (sparse) index
            if before is not None and after is not None and before[:4] == after[:4]:
                if before[5] == after[5]:
                    continue  # nothing this index holds changed: no write, no units
                w.index_put(index.id, *after)
                units = consumed.write_units(after[4])
            else:
                units = 0.0
                if before is not None:
                    w.index_delete(index.id, *before[:4])
                    units += consumed.write_units(before[4])
                if after is not None:
                    w.index_put(index.id, *after)
                    units += consumed.write_units(after[4])
            consumed.add_index_units(ctx.extras, row.name, index.kind, index.name, units)
        if local:
            self._collection(ctx, w, row, tuple(i.id for i in local), old, new)

    def _collection(
        self,
        ctx: Context,
        w: Writer,
        row: TableRow,
        local_ids: tuple[int, ...],
        old: Item | None,
        new: Item | None,
    ) -> None:
        """The item collection rules of a table with local secondary indexes."""
        item = new if new is not None else old
        assert item is not None
        grew = new is not None and item_size(new) > item_size(old)
        wanted = ctx.params.get("ReturnItemCollectionMetrics") == "SIZE"
        replicated = ctx.operation == "ReplicatedWrite"
        if not wanted and (not grew or replicated):
            return
        pk, _sk = item_key(row.key_schema, item)
        size = w.collection_size(row.id, local_ids, pk)
        if grew and not replicated and size > self._config.collection_limit:
            # Raised after the writes: such tables are written under a savepoint (refuses=).
            raise DynamoDBError(
                "ItemCollectionSizeLimitExceededException", "Item collection size limit exceeded"
            )
        if wanted:
            per_table = ctx.extras.setdefault(consumed.COLLECTIONS, {})
            per_table.setdefault(row.name, []).append(_collection_metrics(row, item, size))

    # control plane (table hook) ----------------------------------------------------------------

    def _on_table(
        self, ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
    ) -> TableRow:
        if action == "create":
            return index_updates.created(w, row)
        if action == "delete":
            index_updates.check_delete(row)
            return row
        if params.get("ReplicaUpdates"):
            index_updates.replicas(w, row, params, self._schedule)
        if params.get("GlobalSecondaryIndexUpdates") is not None:
            row = index_updates.gsi_updates(ctx, w, row, params, self._schedule)
        if params.get("BillingMode") is not None:
            row = index_updates.billing_switch(w, row)
        return row
