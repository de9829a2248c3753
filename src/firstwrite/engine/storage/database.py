"""The database behind one engine: connections, transactions and group commit.

Size: one concept: group commit and group fsync share locks, queues and waits (read together).

* One SQLite file in WAL mode, which other engines (threads or processes) may open too. Writes
  are short ``BEGIN IMMEDIATE`` transactions, so every single-item conditional write is
  linearizable across threads and processes; reads (one connection per thread) see every commit.
* Group commit: concurrent writers in one process queue their functions; a leader runs the queue
  in one transaction and commits once. A background write (``background=True``) runs alone; a
  chore (``post_chore``, chores.py) is carried by the leaders, after their callers' functions.
* Durability ``full``: nothing is answered before the WAL is synced past every commit it wrote
  or saw (:meth:`Storage._sync`, :meth:`Storage.deferred`); a read of some tables' items
  (``tables=``) waits only for commits that wrote them or changed anything else.
* A write function raises only *before* it changes anything, or asks for a savepoint. A
  :class:`~firstwrite.engine.errors.DynamoDBError` fails only its own call; any other exception
  rolls back the whole batch and fails every call in it: an acknowledgement means committed.
* Cached catalog rows are used only through statements that verify them (core.py).

The whole model, background writes, chores and autocommit included: docs/engine.md, "Storage".
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator
from functools import partial
from typing import Any, TypeVar

from ..errors import DynamoDBError, internal_error
from ..values import Item
from .access import Reader, Writer
from .base import Catalog, TableRow
from .chores import Chore, carry, report
from .schema import install

__all__ = ["Pending", "Storage"]

T = TypeVar("T")

_BUSY_TIMEOUT_S = 60.0
# A resting background write waits for a leader's hand-over while writers are busy; this long at
# most (they may all stop before its rest is over, and then no leader finishes to wake it).
_REST_FALLBACK_S = 0.02


class _Slot:
    __slots__ = (
        "autocommit",
        "background",
        "done",
        "error",
        "fn",
        "result",
        "savepoint",
        "seq",
        "taken",
    )

    def __init__(
        self, fn: Callable[[Writer], Any], savepoint: bool, autocommit: bool, background: bool
    ) -> None:
        self.fn = fn
        self.savepoint = savepoint
        self.autocommit = autocommit
        self.background = background
        self.taken = False  # in a leader's batch (no longer in the queue)
        self.done = False
        self.seq = 0  # the commit it is part of (durability "full": synced before answering)
        self.result: Any = None
        self.error: BaseException | None = None


class Pending:
    """What a :meth:`Storage.deferred` block left to make durable: its last commit (written or
    seen), synced by :meth:`wait`."""

    __slots__ = ("seq", "storage")

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.seq = 0

    def needed(self) -> bool:
        return self.seq > self.storage._synced

    def wait(self) -> None:
        """Return once everything the block wrote or saw is durable (or raise
        InternalServerError: the fsync failed)."""
        if self.seq:
            self.storage._sync(self.seq)

    def split(self) -> Pending:
        """Inside the block, on its thread: what the calls made since the last split (or the
        block's start) wrote or saw, to wait for on its own; the block's still covers it."""
        local = self.storage._local
        part = Pending(self.storage)
        seq = getattr(local, "deferred", None)
        if seq:
            part.seq = seq
            self.seq = max(self.seq, seq)
            local.deferred = 0
        return part


def _nothing(w: Writer) -> None:
    """The write function of :meth:`Storage.run_chore`: the chore is the whole batch."""


def _batch_end(pending: list[_Slot]) -> int:
    """The next batch is ``pending[:end]``, led by one of its slots' threads: a background slot
    alone, or the slots queued ahead of the first background one."""
    for end, queued in enumerate(pending):
        if queued.background:
            return end or 1
    return len(pending)


class Storage:
    """The SQLite database behind one engine: ``path=None`` keeps it in memory."""

    def __init__(self, path: str | None, *, durability: str = "normal") -> None:
        self.path = path
        self.durability = durability
        self._memory = path is None
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self.catalog = Catalog()  # this process's catalog rows (base.py, core.py)
        self._current_tables = self.catalog.current  # cached_table's hot path, one lookup less
        # Group commit state.
        # _cond's lock, entered directly on the hot path (Condition.__enter__ is Python code).
        self._cond_lock = threading.Lock()
        self._cond = threading.Condition(self._cond_lock)
        self._pending: list[_Slot] = []
        self._backgrounds = 0  # background slots in _pending
        self._leading = False
        # A background write resting until this time.monotonic() (0.0: none); _granted: a
        # leader handed it the lead (module docstring).
        self._rest_until = 0.0
        self._granted = False
        # Work posted for the writers leading batches to carry (chores.py), or None.
        self._chore: Chore | None = None
        self._autocheckpoint = 1000  # the writer's, while a chore is posted (SQLite's default)
        self._closed = False
        # Durability "full" (file databases): commits are numbered when they start; _committed
        # is the last finished one, _synced the last one an fsync of the WAL covers.
        self._full = durability == "full" and path is not None
        self._commits = 0
        self._committed = 0
        self._synced = 0
        self._syncing = False
        self._sync_waiters = 0
        self._sync_failed: BaseException | None = None
        self._wal_fd: int | None = None
        self._leader: int | None = None  # the thread running the current commit
        # Per table id, the last commit that wrote its items (set by the writer before each
        # write's statement: CoreWrites.marks); _global, the last commit that changed anything
        # else (the catalog, indexes, streams, history, TTL...), which every read waits for.
        self._marks: dict[int, int] = {}
        self._global = 0
        # An in-memory database is one connection shared by all threads under a lock.
        self._memory_lock = threading.RLock()
        self._writer_conn = self._connect()
        self._writer = Writer(self._writer_conn, self.catalog)
        if self._full:
            self._writer.marks = self._marks
        install(self._writer_conn, self.path)

    # connections -------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        target = ":memory:" if self.path is None else self.path
        conn = sqlite3.connect(
            target, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        if not self._memory:
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL: no fsync inside COMMIT. With durability "full" the engine fsyncs the WAL
            # itself before answering (_sync), outside the write lock.
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=OFF")
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    def _reader(self) -> tuple[Reader, sqlite3.Connection]:
        """This thread's reader and its connection, made on first use (file databases only:
        an in-memory database is read through the writer, under its lock)."""
        local = self._local
        reader: Reader | None = getattr(local, "reader", None)
        if reader is None:
            conn = self._connect()
            reader = local.reader = Reader(conn, self.catalog)
            local.conn = conn
        return reader, local.conn

    def cached_table(self, region: str, name: str) -> TableRow | None:
        """:meth:`Reader.cached_table` with no connection touched on a cache hit."""
        row = self._current_tables.get((region, name))
        if row is None:
            row = self.read(lambda r: r.cached_table(region, name), tables=())
        return row

    def get_checked(self, row: TableRow, pk: bytes, sk: bytes = b"") -> Item | None:
        """:meth:`Reader.get_checked` on this thread's reader: one statement, no transaction."""
        reader: Reader | None = None if self._memory else getattr(self._local, "reader", None)
        if reader is None or self._closed:
            return self.read(lambda r: r.get_checked(row, pk, sk))
        item = reader.get_checked(row, pk, sk)
        if self._full:
            self._settle(self._seen_in((row.id,)))
        return item

    # reads -------------------------------------------------------------------------------------

    def read(self, fn: Callable[[Reader], T], *, tables: Collection[int] | None = None) -> T:
        """Run ``fn`` with a reader; for several statements in one snapshot use :meth:`snapshot`.

        ``tables``: the ids of the only tables whose items (and index entries) ``fn`` reads,
        besides the catalog (``()``: the catalog only), looked at once ``fn`` has returned (``fn``
        may fill it); with durability ``full`` the read then waits only for the fsync of commits
        that wrote those tables' items or changed anything else."""
        self._check_open()
        if self._memory:
            with self._memory_lock:
                return fn(self._writer)
        result = fn(self._reader()[0])
        if self._full:
            self._settle(self._seen() if tables is None else self._seen_in(tables))
        return result

    def snapshot(self, fn: Callable[[Reader], T], *, tables: Collection[int] | None = None) -> T:
        """Run ``fn`` inside one read transaction: all its reads see the same committed state
        (``tables``: as for :meth:`read`)."""
        self._check_open()
        if self._memory:
            with self._memory_lock:
                return fn(self._writer)
        reader, conn = self._reader()
        conn.execute("BEGIN")
        try:
            result = fn(reader)
        finally:
            conn.execute("COMMIT")
        if self._full:
            self._settle(self._seen() if tables is None else self._seen_in(tables))
        return result

    # writes ------------------------------------------------------------------------------------

    def post_chore(self, chore: Chore | None) -> None:
        """Have the writers leading batches carry ``chore`` from now on (chores.py); ``None``
        withdraws the posted one. Done under the lead: once this returns, every batch carries
        it, or none does. While one is posted, writers leave the WAL's checkpoints to the
        poster's thread (:meth:`checkpoint`)."""
        if chore is not None or self._chore is not None:
            self.write(partial(self._post, chore), background=True)

    def _post(self, chore: Chore | None, w: Writer) -> None:
        """Under the lead: post ``chore`` (or withdraw it) and hand the checkpoints over."""
        if not self._memory and (chore is None) != (self._chore is None):
            conn = self._writer_conn
            if chore is not None:
                self._autocheckpoint = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
            conn.execute(f"PRAGMA wal_autocheckpoint={0 if chore else self._autocheckpoint}")
        self._chore = chore

    def run_chore(self) -> None:
        """Run a piece of the posted chore now, as a background write of this thread (for an
        idle engine: no writer to carry it)."""
        self.write(_nothing, background=True)

    def checkpoint(self) -> None:
        """A passive WAL checkpoint on this thread's connection (copies what the WAL holds
        into the database, blocking no writer; SQLite's GIL-free work). The TTL sweeper runs
        them while writers carry its deletions (chores.py), as its own commits did before."""
        if not self._memory:
            self._reader()[1].execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def settle(self, seq: int) -> None:
        """Return once commit ``seq`` is durable (durability ``full``; else at once)."""
        if self._full:
            self._settle(seq)

    def writers_waiting(self) -> bool:
        """Whether writes are queued for the lead (a background write's cue to finish)."""
        return bool(self._pending)

    def writes_begun(self) -> int:
        """How many commits this storage has begun (a background writer compares two counts
        to tell whether other writers were busy in between)."""
        return self._commits

    def write(
        self,
        fn: Callable[[Writer], T],
        *,
        savepoint: bool = False,
        autocommit: bool = False,
        background: bool = False,
        rest_until: float = 0.0,
    ) -> T:
        """Run ``fn`` in a committed write transaction, group-committed with concurrent callers.

        ``fn`` must raise only before it writes, unless ``savepoint=True``: then a DynamoDBError
        raised after writing rolls back exactly what ``fn`` wrote (a few microseconds more, so
        the item hot paths, which check everything first, do without).

        ``autocommit=True`` is for a ``fn`` whose one write is a single statement, correct
        whether or not it runs inside a transaction: uncontended, it runs with no BEGIN/COMMIT
        (the statement commits itself).

        ``background=True``: ``fn`` runs alone in this thread, in its turn, after letting
        writers go until ``rest_until`` (a ``time.monotonic()`` value; module docstring).
        """
        if self._closed:
            raise RuntimeError("the engine is closed")
        if self._sync_failed is not None:
            raise internal_error() from self._sync_failed
        if autocommit and not self._memory:
            with self._cond_lock:
                alone = (
                    not self._leading
                    and not self._pending
                    and self._chore is None  # a chore needs a transaction to carry it
                    and not (self._rest_until and self._rest_over())
                )
                if alone:
                    self._leading = True
                    self._commits += 1
                    seq = self._commits
            if alone:  # uncontended: no slot, no batch, no transaction
                self._leader = threading.get_ident()
                changes = self._mark_from(seq)
                try:
                    result = fn(self._writer)
                except DynamoDBError:
                    self._marked(seq, changes)
                    self._finish(seq, 1)
                    if self._full:
                        self._settle(seq)  # the failure may rest on a commit not yet synced
                    raise
                except BaseException as exc:
                    self._marked(seq, changes)
                    self._finish(seq, 1)
                    if isinstance(exc, Exception):
                        raise internal_error() from exc
                    raise
                self._marked(seq, changes)
                self._finish(seq, 1)
                if self._full:
                    self._settle(seq)
                return result
        slot = _Slot(fn, savepoint, autocommit, background)
        granted = background and rest_until > 0 and self._rest(rest_until)
        with self._cond_lock:
            if granted or (
                not self._leading
                and not self._pending
                and not (self._rest_until and self._rest_over())
            ):
                # Uncontended (or a background write handed the lead after its rest): lead a
                # batch of this write alone, nothing to queue or wait for.
                self._leading = True
                batch = [slot]
            else:
                self._pending.append(slot)
                self._backgrounds += background
                while not slot.done and (
                    self._leading
                    or slot.taken
                    or (
                        self._backgrounds and slot not in self._pending[: _batch_end(self._pending)]
                    )
                ):
                    self._cond.wait()
                if not slot.done:
                    self._leading = True
                    if self._backgrounds:
                        end = _batch_end(self._pending)
                        batch, self._pending = self._pending[:end], self._pending[end:]
                        self._backgrounds -= background
                    else:
                        batch, self._pending = self._pending, []
                else:
                    batch = []
            if batch:
                self._commits += 1
                seq = self._commits
                for member in batch:
                    member.taken = True
                    member.seq = seq
        if batch:
            self._leader = threading.get_ident()
            try:
                self._run_batch(batch)
            finally:
                self._finish(seq, len(batch))
        if self._full and slot.seq:
            try:
                self._settle(slot.seq)
            except DynamoDBError:
                slot.result, slot.error = None, None
                raise
        if slot.error is not None:
            # Unlink before raising: the error's traceback holds this frame, which holds the
            # slot. Left linked, every failed write (a failed condition, say) is a reference
            # cycle that only the garbage collector frees, a cost on every such call.
            error, slot.error = slot.error, None
            try:
                raise error
            finally:
                del error
        return slot.result  # type: ignore[no-any-return]

    def _rest(self, until: float) -> bool:
        """A background write's rest: let writers go until ``until``. True if a leader then
        handed this thread the lead (else it takes its turn in the queue)."""
        with self._cond_lock:
            self._rest_until = until
            begun = self._commits
            try:
                while not self._granted and not self._closed:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    if self._leading or self._pending or self._commits != begun:
                        left += _REST_FALLBACK_S  # writers are busy: one of them wakes it
                    self._cond.wait(left)
                granted, self._granted = self._granted, False
                return granted
            finally:
                self._rest_until = 0.0

    def _rest_over(self) -> bool:
        """Under ``_cond_lock``, the lead free: if a resting background write's time has come,
        hand it the lead (the caller then queues behind it)."""
        if time.monotonic() < self._rest_until:
            return False
        self._rest_until = 0.0
        self._leading = self._granted = True
        self._cond.notify_all()
        return True

    def _finish(self, seq: int, size: int) -> None:
        """Hand the lead on once commit ``seq`` (a batch of ``size``) is done."""
        with self._cond_lock:
            self._leading = False
            self._leader = None
            self._committed = seq
            # Everyone waiting is queued, in this batch, or waiting for an fsync: an uncontended
            # writer (batch of one, nobody queued, nobody syncing) has nobody to wake. With
            # writers queued, a resting background write whose time has come goes first.
            if (self._pending or size > 1 or self._sync_waiters) and not (
                self._pending and self._rest_until and self._rest_over()
            ):
                self._cond.notify_all()

    def _run_batch(self, batch: list[_Slot]) -> None:
        lock = self._memory_lock if self._memory else None
        if lock is not None:
            lock.acquire()
        conn = self._writer_conn
        chore = self._chore  # (before the functions: post_chore's own batch carries none)
        if len(batch) == 1 and batch[0].autocommit and chore is None:
            self._run_autocommit(batch[0], lock)
            return
        piece: tuple[Any] | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            changes = self._mark_from(batch[0].seq)
            try:
                for slot in batch:
                    if slot.savepoint:
                        conn.execute("SAVEPOINT slot")
                    try:
                        slot.result = slot.fn(self._writer)
                    except DynamoDBError as exc:
                        slot.error = exc
                        if slot.savepoint:
                            conn.execute("ROLLBACK TO slot")
                            self.catalog.clear()  # rows it read may be ones it rolled back
                    if slot.savepoint:
                        conn.execute("RELEASE slot")
                if chore is not None:
                    piece = carry(conn, self._writer, self.catalog, chore, batch[0].background)
                    if piece is None and self._chore is chore:
                        self._post(None, self._writer)  # it failed: withdrawn (chores.py)
                self._marked(batch[0].seq, changes)  # before its rows are visible
                conn.execute("COMMIT")
                if piece is not None:
                    assert chore is not None
                    report(chore, piece[0], batch[0].seq)
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self.catalog.clear()  # a rolled-back catalog change must not survive in it
                failure = internal_error()
                failure.__cause__ = exc
                for slot in batch:
                    slot.result = None
                    slot.error = failure
                if not isinstance(exc, Exception):
                    raise
        except sqlite3.Error as exc:
            # BEGIN itself failed (e.g. the database stayed locked past the busy timeout).
            failure = internal_error()
            failure.__cause__ = exc
            for slot in batch:
                slot.error = failure
        finally:
            for slot in batch:
                slot.done = True
            if lock is not None:
                lock.release()

    def _run_autocommit(self, slot: _Slot, lock: threading.RLock | None) -> None:
        changes = self._mark_from(slot.seq)
        try:
            slot.result = slot.fn(self._writer)
        except DynamoDBError as exc:
            slot.error = exc
        except Exception as exc:
            slot.error = internal_error()
            slot.error.__cause__ = exc
        finally:
            self._marked(slot.seq, changes)
            slot.done = True
            if lock is not None:
                lock.release()

    # durability "full" -------------------------------------------------------------------------

    @contextlib.contextmanager
    def deferred(self) -> Iterator[Pending | None]:
        """Calls made by this thread inside the block return without waiting for their fsync.

        Yields ``None`` if there is never anything to wait for (durability ``normal``, or a
        nested block), else a :class:`Pending`: the block's answers must not be passed on
        before its ``wait()`` returned, once the block is left (on any thread)."""
        local = self._local
        if not self._full or getattr(local, "deferred", None) is not None:
            yield None
            return
        pending = Pending(self)
        local.deferred = 0
        try:
            yield pending
        finally:
            pending.seq, local.deferred = max(pending.seq, local.deferred), None

    def _mark_from(self, seq: int) -> int:
        """Before commit ``seq``'s write functions run: the writer's item writes mark their
        tables with ``seq``. The connection's change count so far."""
        if not self._full:
            return 0
        writer = self._writer
        writer.seq, writer.attributed = seq, 0
        return self._writer_conn.total_changes

    def _marked(self, seq: int, changes: int) -> None:
        """Before commit ``seq`` is visible (autocommit: after its one statement, an item
        write that marked its table first): if it changed any row besides the items its
        writes marked, every read waits for it."""
        if self._full and self._writer_conn.total_changes - changes != self._writer.attributed:
            self._global = seq

    def _seen_in(self, tables: Collection[int]) -> int:
        """:meth:`_seen` for a read of only ``tables``' items and the catalog: the last commit
        that wrote one of them or changed anything else."""
        seen = self._global
        marks = self._marks
        for table in tables:
            mark = marks.get(table, 0)
            if mark > seen:
                seen = mark
        return min(seen, self._seen())

    def _seen(self) -> int:
        """The last commit a read just made may have seen: any begun so far (a commit is
        visible before its thread marks it done), but not the reader's own unfinished one."""
        if self._leader == threading.get_ident():
            return self._committed
        return self._commits

    def _settle(self, seq: int) -> None:
        """Wait until commit ``seq`` is durable, or leave that to this thread's deferred block."""
        deferred: int | None = getattr(self._local, "deferred", None)
        if deferred is None:
            self._sync(seq)
        elif seq > deferred:
            self._local.deferred = seq

    def _sync(self, seq: int) -> None:
        """Return once an fsync of the WAL covers commit ``seq``: one thread fsyncs all that
        is committed while the others wait for it (or the next). After a failed fsync nothing
        more is acknowledged: what it should have made durable cannot be known to be."""
        if self._synced >= seq:
            return
        with self._cond_lock:
            while self._synced < seq:
                if self._sync_failed is not None:
                    raise internal_error() from self._sync_failed
                if self._syncing or self._committed < seq:
                    # An fsync is running, or commit seq is not done yet.
                    self._sync_waiters += 1
                    try:
                        self._cond.wait()
                    finally:
                        self._sync_waiters -= 1
                    continue
                self._syncing = True
                target = self._committed
                self._cond_lock.release()
                failure: BaseException | None = None
                try:
                    os.fsync(self._wal())
                except OSError as exc:
                    failure = exc
                finally:
                    self._cond_lock.acquire()
                    self._syncing = False
                    self._cond.notify_all()
                if failure is not None:
                    self._sync_failed = failure
                    raise internal_error() from failure
                self._synced = max(self._synced, target)

    def _wal(self) -> int:
        """A descriptor of the WAL file (opened once; its directory entry synced then too)."""
        if self._wal_fd is None:
            assert self.path is not None
            self._wal_fd = os.open(self.path + "-wal", os.O_RDONLY)
            directory = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        return self._wal_fd

    # lifecycle ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the engine is closed")

    def close(self) -> None:
        self._closed = True
        if self._wal_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._wal_fd)
            self._wal_fd = None
        with self._connections_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
