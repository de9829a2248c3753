"""Time to Live: the expiry index and the background sweeper.

As on DynamoDB, expiry is *not* a read-side filter: an item whose TTL attribute (a top-level
Number of epoch seconds) is in the past stays an ordinary item, visible to reads, queries and
updates, until the sweeper deletes it. The sweeper:
* reads due items off an expiry index that a change hook keeps in each item's own write
  transaction, so an idle sweep never scans a table; it builds that index, in slices, for the
  items already present when TTL is enabled;
* deletes due items in write transactions that re-check them, consuming no capacity, each item
  once even with several processes sweeping one file; a delete goes through the change hooks
  like any other (a stream REMOVE with the TTL service identity, indexes, replicas);
* shares the engine with its writers: while a sweep has due items, the writers leading batches
  carry it a bounded piece each (``storage/chores.py``); a piece that fails is rolled back
  alone and fails the sweep, never the writer's call;
* ignores values more than five years in the past (DynamoDB's guard against milliseconds), and
  purges stream records past their 24-hour retention.

Time is the engine clock: ``TTLConfig.lag`` delays deletion past expiry, ``sweep_now()`` runs
one sweep synchronously. Pacing: docs/engine.md, "TTL sweep". The API is ``operations/ttl.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ..context import Context, Feature
from ..errors import validation
from ..item_keys import item_key, key_of
from ..storage import Reader, TableRow, Writer, unpack
from ..values import Item

if TYPE_CHECKING:
    from ..context import Host

__all__ = ["TTLConfig", "TimeToLive", "expiry_of"]

log = logging.getLogger(__name__)

T = TypeVar("T")

FIVE_YEARS_S = 5 * 365 * 24 * 3600.0
# Work per sweeper's own transaction (at least one item) while writers are busy: a writer
# queued behind it waits about this.
SWEEP_SLICE_S = 0.0001
# After such a transaction the sweeper rests this many times as long as it took: writers keep
# three quarters of the engine.
SWEEP_REST = 3.0
# Work per sweep transaction on an idle engine (no rest; also capped by TTLConfig.batch_size):
# the first writer to come waits about this once.
SWEEP_IDLE_SLICE_S = 0.002
# A sweep's piece carried by a writer (storage/chores.py), in its own transaction: each write
# is about this much slower while a sweep has due items.
SWEEP_CHORE_S = 0.00006
# With due items and no writer beginning a commit for this long, the sweeper runs the pieces
# itself, growing from SWEEP_SLICE_S to SWEEP_IDLE_SLICE_S while no writer comes between two.
SWEEP_IDLE_AFTER_S = 0.002
# While its chore is posted the sweeper runs the WAL checkpoints (writers do not): this often
# while writers carry it (keeping the WAL short), and this often on an idle engine. Each
# checkpoint syncs the files once however little it copies, so the period bounds the syncs a
# sweep makes while writers wait (why this period: docs/engine.md, "TTL sweep").
SWEEP_CHECKPOINT_S, SWEEP_IDLE_CHECKPOINT_S = 0.01, 0.02
# DynamoDB refuses a second UpdateTimeToLive within about an hour of the previous one.
AWS_CHANGE_INTERVAL_S = 3600.0


@dataclass(frozen=True)
class TTLConfig:
    """How the sweeper behaves; every field is engine-clock seconds.

    ``sweep_interval``: time between background sweeps (``None``: no background thread, only
    :meth:`TimeToLive.sweep_now`). ``lag``: extra time after expiry before an item is deleted.
    ``batch_size``: at most this many items per sweeper transaction (each is also
    kept to about :data:`SWEEP_SLICE_S` of work). ``change_interval``: enforce DynamoDB's
    "modified multiple times within a fixed interval" rule with this window
    (:data:`AWS_CHANGE_INTERVAL_S` is DynamoDB's); ``None`` (the default) lets tests and local
    setups switch TTL off and on freely.
    """

    sweep_interval: float | None = 1.0
    lag: float = 0.0
    batch_size: int = 200
    change_interval: float | None = None

    def __post_init__(self) -> None:
        if self.sweep_interval is not None and not self.sweep_interval > 0:
            raise ValueError(f"sweep_interval must be > 0 or None, not {self.sweep_interval!r}")
        if not self.lag >= 0:
            raise ValueError(f"lag must be >= 0, not {self.lag!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {self.batch_size!r}")
        if self.change_interval is not None and not self.change_interval >= 0:
            raise ValueError(f"change_interval must be >= 0 or None, not {self.change_interval!r}")


@dataclass(frozen=True)
class Expired:
    """One item the sweeper deleted."""

    region: str
    table: str
    key: Item
    expires: float


def expiry_of(item: Item | None, attribute: str) -> float | None:
    """The epoch seconds of ``item``'s TTL attribute, or ``None`` if it is not a Number."""
    if item is None:
        return None
    value = item.get(attribute)
    if value is None:
        return None
    number = value.get("N")
    return None if number is None else float(number)


# --- keeping the expiry index (change hook) ------------------------------------------------------


def _on_change(ctx: Context, w: Writer, row: TableRow, old: Item | None, new: Item | None) -> None:
    ttl = row.definition.get("_ttl")
    if ttl is None:  # the one check a write pays when TTL is off
        return
    attribute = ttl["AttributeName"]
    before, after = expiry_of(old, attribute), expiry_of(new, attribute)
    if before == after and (new is not None or before is None):
        return
    item = new if new is not None else old
    assert item is not None
    pk, sk = item_key(row.key_schema, item)
    if after is None:
        w.ttl_clear(row.id, pk, sk)
    else:
        w.ttl_set(row.id, pk, sk, after)


# Who a TTL delete is by: the Context.principal of its change, a stream record's userIdentity.
TTL_PRINCIPAL = "dynamodb.amazonaws.com"
_CHANGED_TOO_OFTEN = "Time to live has been modified multiple times within a fixed interval"


# --- the sweeper -----------------------------------------------------------------------------------


class TimeToLive(Feature):
    """``engine.ttl``: the sweeper of one engine and its configuration."""

    _engine: Host  # set by install()

    def __init__(self, config: TTLConfig | None = None) -> None:
        self._config = config or TTLConfig()
        self._lock = threading.Lock()  # one sweep at a time in this engine
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._item_s = SWEEP_SLICE_S / 8  # a sweep slice's time per item, last measured
        self._slice_s = 0.0  # the last sweep slice's time
        self._scan_item_s = SWEEP_SLICE_S / 8  # a backfill slice's time per item, last measured
        self._target_s = SWEEP_SLICE_S  # the next slice's time: small while writers are busy
        self._rest_until = 0.0  # the next slice waits for writers until then (time.monotonic)

    def install(self, engine: Host) -> None:
        self._engine = engine
        engine.hooks.add_change_hook(_on_change, lambda row: "_ttl" in row.definition)
        engine.hooks.add_table_hook(self._on_table)

    def _on_table(
        self, ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
    ) -> TableRow:
        if action == "delete":
            w.ttl_drop_table(row.id)
        elif action == "ttl":
            # UpdateTimeToLive, after its own checks: DynamoDB's change-interval rule, then a
            # sweep soon once the change commits (the backfill of the existing items).
            interval = self._config.change_interval
            changed = row.definition.get("_ttl_changed")
            if interval is not None and changed is not None and ctx.now() - changed < interval:
                raise validation(_CHANGED_TOO_OFTEN)
            if params["TimeToLiveSpecification"]["Enabled"]:
                ctx.on_finish(self._woken)
        return row

    def _woken(self, ctx: Context, response: object, error: object) -> None:
        if error is None:
            self.wake()

    @property
    def config(self) -> TTLConfig:
        return self._config

    def configure(self, **changes: Any) -> TTLConfig:
        """Change the configuration (e.g. ``lag=3600``); takes effect at the next sweep."""
        self._config = replace(self._config, **changes)
        if self._config.sweep_interval is not None:
            self.start()
        self._wake.set()
        return self._config

    # lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background sweeper (if configured with a ``sweep_interval``)."""
        if self._config.sweep_interval is None or self._stop.is_set():
            return
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="firstwrite-ttl-sweeper", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the background sweeper for good (the engine calls it on close)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def close(self) -> None:
        self.stop()

    def wake(self) -> None:
        """Run the next background sweep now rather than at the next tick."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            interval = self._config.sweep_interval
            if interval is None:
                return
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.sweep_now()
            except Exception:  # keep sweeping: a failed sweep is retried on the next tick
                if self._stop.is_set():
                    return
                log.exception("TTL sweep failed")

    # sweeping --------------------------------------------------------------------------------

    def sweep_now(self) -> list[Expired]:
        """Run one complete sweep now: finish index backfills, delete every due item, purge
        expired stream records. Returns the deleted items in deletion order."""
        with self._lock:
            storage = self._engine.storage
            self._target_s, self._rest_until = SWEEP_SLICE_S, 0.0
            self._backfill()
            chore = _SweepChore(self)
            # Read first: an idle sweep must not take the write lock.
            while storage.read(self._any_due):
                chore.done.clear()
                storage.post_chore(chore)
                try:
                    self._watch(chore)
                finally:
                    storage.post_chore(None)
                if chore.error is not None:
                    raise chore.error
            storage.settle(chore.seq)
            self._engine.hooks.swept(self._engine.clock.now())
            return chore.deleted

    def _any_due(self, r: Reader) -> bool:
        before, not_before = self._window()
        return bool(r.ttl_due(before, not_before, 1))

    def _window(self) -> tuple[float, float]:
        """The expiry times due now: ``(before, not_before)``."""
        now = self._engine.clock.now()
        return now - self._config.lag, now - FIVE_YEARS_S

    def _watch(self, chore: _SweepChore) -> None:
        """Until the posted ``chore`` is done: leave it to the writers while they begin
        commits, and run it in this thread's own background writes when they do not."""
        storage = self._engine.storage
        idle = False
        checkpoint = time.monotonic() + SWEEP_CHECKPOINT_S
        while not chore.done.is_set():
            if time.monotonic() >= checkpoint:
                storage.checkpoint()
                every = SWEEP_IDLE_CHECKPOINT_S if idle else SWEEP_CHECKPOINT_S
                checkpoint = time.monotonic() + every
            begun, pieces = storage.writes_begun(), chore.pieces
            if not idle:
                if chore.done.wait(SWEEP_IDLE_AFTER_S):
                    return
                if storage.writes_begun() != begun and chore.pieces != pieces:  # carried
                    self._target_s = SWEEP_SLICE_S
                    continue
            storage.run_chore()
            # No writer began a commit meanwhile, nor waits: the next piece at once, larger.
            idle = storage.writes_begun() - begun == 1 and not storage.writers_waiting()
            self._target_s = min(self._target_s * 2, SWEEP_IDLE_SLICE_S) if idle else SWEEP_SLICE_S

    def _piece(self, w: Writer, idle: bool) -> tuple[list[Expired], bool]:
        """A piece of a sweep (:class:`_SweepChore`): a writer's (about :data:`SWEEP_CHORE_S`)
        or this sweeper's own; and whether due items may be left."""
        before, not_before = self._window()
        target_s = self._target_s if idle else SWEEP_CHORE_S
        return self._delete_due(w, before, not_before, target_s, idle)

    def _backfill(self) -> None:
        storage = self._engine.storage
        for table_id, attribute, _cursor in storage.read(lambda r: r.ttl_backfills()):
            chunk = partial(self._backfill_chunk, table_id=table_id, attribute=attribute)
            while self._slice(chunk):
                pass

    def _slice(self, fn: Callable[[Writer], T]) -> T:
        """Run one slice (a background write) after the last one's rest, and pace the next
        from whether writers were busy meanwhile (module docstring)."""
        storage = self._engine.storage
        begun = storage.writes_begun()
        result = storage.write(fn, background=True, rest_until=self._rest_until)
        # Commits begun since: this slice's own, and any writer's (in its rest, or queued).
        if storage.writes_begun() - begun > 1 or storage.writers_waiting():
            self._target_s = SWEEP_SLICE_S
            self._rest_until = time.monotonic() + self._slice_s * SWEEP_REST
        else:
            self._target_s = min(self._target_s * 2, SWEEP_IDLE_SLICE_S)
            self._rest_until = 0.0
        return result

    def _backfill_chunk(self, w: Writer, table_id: int, attribute: str) -> bool:
        """Index the table's next items, a slice's worth; ``False`` once the backfill is done."""
        pending = {t: (a, c) for t, a, c in w.ttl_backfills()}
        if table_id not in pending or pending[table_id][0] != attribute:
            return False  # TTL was disabled (or switched) meanwhile
        t0 = time.perf_counter()
        size = self._slice_items(self._scan_item_s)
        rows = w.scan_after(table_id, pending[table_id][1], size)
        entries = [(pk, sk, expiry_of(item, attribute)) for pk, sk, _size, item in rows]
        w.ttl_set_many(table_id, [(pk, sk, at) for pk, sk, at in entries if at is not None])
        self._slice_s = time.perf_counter() - t0
        if rows:
            self._scan_item_s = self._slice_s / len(rows)
        if len(rows) < size:
            w.ttl_backfill_done(table_id)
            return False
        w.ttl_backfill_set(table_id, attribute, (rows[-1][0], rows[-1][1]))
        return True

    def _slice_items(self, item_s: float, target_s: float | None = None) -> int:
        """Items per slice, from the last measured time per item."""
        target_s = self._target_s if target_s is None else target_s
        return min(self._config.batch_size, max(1, round(target_s / item_s)))

    def _delete_due(
        self, w: Writer, before: float, not_before: float, target_s: float, yielding: bool
    ) -> tuple[list[Expired], bool]:
        """One piece of a sweep: due items of the table with the earliest due entry, about
        ``target_s`` of work (``yielding``: less if writers queue meanwhile); and whether due
        items may be left."""
        t0 = time.perf_counter()
        due = w.ttl_due(before, not_before, 1)
        if not due:
            return [], False
        table_id = due[0][0]
        row = w.table_by_id(table_id)
        ttl = None if row is None else row.definition.get("_ttl")
        if row is None or ttl is None:  # stale entries of a dropped table or disabled TTL
            w.ttl_drop_table(table_id)
            return [], False
        limit = self._slice_items(self._item_s, target_s)
        if self._watched(row):
            deleted, more = self._delete_each(
                w, row, ttl["AttributeName"], before, not_before, limit, yielding
            )
        else:
            deleted, more = _delete_all(w, row, ttl["AttributeName"], before, not_before, limit)
        self._slice_s = time.perf_counter() - t0
        if deleted:  # the next slice's size, from this one's time per item
            self._item_s = self._slice_s / len(deleted)
        return deleted, more

    def _watched(self, row: TableRow) -> bool:
        """Whether a change hook other than TTL's own acts on ``row``'s writes (streams,
        secondary indexes, replicas, faults): each delete must then go through the hooks."""
        engine = self._engine
        watches = engine.hooks.change_watches
        for hook in engine.hooks.change_hooks:
            if hook is not _on_change and (watches.get(hook) is None or watches[hook](row)):
                return True
        return False

    def _delete_each(
        self,
        w: Writer,
        row: TableRow,
        attribute: str,
        before: float,
        not_before: float,
        limit: int,
        yielding: bool,
    ) -> tuple[list[Expired], bool]:
        """Delete due items one by one through the change hooks (a REMOVE stream record with
        the TTL service's identity, index entries, replication); and whether due items may be
        left (the slice stopped at its limit, or for queued writers)."""
        deleted: list[Expired] = []
        waiting = self._engine.storage.writers_waiting
        due = w.ttl_due(before, not_before, limit)
        for table_id, pk, sk, expires in due:
            if table_id != row.id:
                continue  # another table's: its own slice
            if yielding and deleted and waiting():
                return deleted, True  # the rest in a later slice, once the queued writers went
            item = w.get(table_id, pk, sk)
            current = expiry_of(item, attribute)
            if item is None or current is None or current != expires:
                _repair(w, table_id, pk, sk, current)
                continue
            w.delete(table_id, pk, sk)
            ctx = Context(
                self._engine,
                {},
                row.region,
                operation="TimeToLive",
                principal=TTL_PRINCIPAL,
            )
            self._engine.hooks.emit_change(ctx, w, row, item, None)  # TTL's hook clears the entry
            deleted.append(Expired(row.region, row.name, key_of(row.key_schema, item), expires))
        return deleted, len(due) == limit


class _SweepChore:
    """One sweep's deletions as a chore (storage/chores.py): carried by writers, a small
    piece each, or run by the sweeper on an idle engine. Its pieces are reported in commit
    order, so ``deleted`` is in deletion order."""

    def __init__(self, ttl: TimeToLive) -> None:
        self._ttl = ttl
        self.deleted: list[Expired] = []
        self.seq = 0  # the last commit with a piece of it
        self.pieces = 0  # committed so far
        self.error: Exception | None = None
        self.done = threading.Event()  # no due item left, or it failed

    def run(self, w: Writer, idle: bool) -> tuple[list[Expired], bool]:
        if self.done.is_set():
            return [], False
        return self._ttl._piece(w, idle)

    def committed(self, piece: tuple[list[Expired], bool], seq: int) -> None:
        deleted, more = piece
        self.pieces += 1
        if deleted:
            self.deleted += deleted
            self.seq = seq
        if not more:
            self.done.set()

    def failed(self, error: Exception) -> None:
        self.error = error
        self.done.set()


def _delete_all(
    w: Writer, row: TableRow, attribute: str, before: float, not_before: float, limit: int
) -> tuple[list[Expired], bool]:
    """Delete up to ``limit`` due items of a table no other hook watches, in two statements;
    and whether due items may be left (the slice stopped at its limit)."""
    deleted: list[Expired] = []
    rows = w.ttl_delete_due(row.id, before, not_before, limit)
    for pk, sk, size, body in rows:
        item = unpack(body)
        current = expiry_of(item, attribute)
        if current is None or not not_before <= current < before:
            # Defensive, as in _delete_each: the index disagreed with the item; put it back.
            w.put(row.id, pk, sk, size, item)
            _repair(w, row.id, pk, sk, current)
            continue
        deleted.append(Expired(row.region, row.name, key_of(row.key_schema, item), current))
    return deleted, len(rows) == limit


def _repair(w: Writer, table_id: int, pk: bytes, sk: bytes, current: float | None) -> None:
    """Point an expiry entry at the item's real expiry: the index is kept in each write's
    transaction, so this is unreachable unless a writer bypassed the hooks."""
    if current is None:
        w.ttl_clear(table_id, pk, sk)
    else:
        w.ttl_set(table_id, pk, sk, current)
