"""The database behind one engine: connections, transactions and group commit.

Concurrency model
-----------------
* One SQLite file, WAL mode. Other engines (threads or processes) may open the same file.
* Writes run as short ``BEGIN IMMEDIATE`` transactions, so the read-check-write of a conditional
  write happens under SQLite's write lock: every single-item conditional write is linearizable,
  across threads and across processes.
* Group commit: concurrent writers in one process queue their write functions; one of them (the
  leader) runs the whole queue in one transaction and commits once, then wakes the others. With
  ``durability="full"`` that is one fsync for many acknowledged writes. An uncontended writer
  leads its own batch of one, in its own thread, with no hand-off.
* Reads use one connection per thread and see every committed write (WAL snapshots).
* Catalog rows are cached per process and only ever used through statements that verify them
  (core.py): no cache can outlive a change made by another engine.
* A write may run in autocommit (``write(fn, autocommit=True)``): a single statement is its own
  transaction, the least SQLite can do. Uncontended, ``fn`` then runs with no BEGIN/COMMIT;
  queued with other writers it runs inside their shared transaction like any other.
* A write function must raise only *before* it changes anything (validate, evaluate conditions,
  then write), or ask for a savepoint (``write(fn, savepoint=True)``, used by the control plane,
  whose hooks may refuse after the catalog row is written). A
  :class:`~firstwrite.engine.errors.DynamoDBError` from one function fails only that call; any
  other exception rolls back the whole batch and fails every call in it, so an acknowledgement
  always means committed.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..errors import DynamoDBError, internal_error
from ..values import Item
from .access import Reader, Writer
from .base import Catalog, TableRow
from .schema import SCHEMA, SCHEMA_VERSION

__all__ = ["Storage"]

T = TypeVar("T")

_BUSY_TIMEOUT_S = 60.0


def _statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, one by one (a semicolon in a comment ends none)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            yield statement
            statement = ""
    if statement.strip():
        raise ValueError(f"the schema ends in an incomplete statement: {statement!r}")


class _Slot:
    __slots__ = ("autocommit", "done", "error", "fn", "result", "savepoint")

    def __init__(self, fn: Callable[[Writer], Any], savepoint: bool, autocommit: bool) -> None:
        self.fn = fn
        self.savepoint = savepoint
        self.autocommit = autocommit
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


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
        self._leading = False
        self._closed = False
        # An in-memory database is one connection shared by all threads under a lock.
        self._memory_lock = threading.RLock()
        self._writer_conn = self._connect()
        self._writer = Writer(self._writer_conn, self.catalog)
        self._init_schema()

    # connections -------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        target = ":memory:" if self.path is None else self.path
        conn = sqlite3.connect(
            target, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        if not self._memory:
            conn.execute("PRAGMA journal_mode=WAL")
            synchronous = "FULL" if self.durability == "full" else "NORMAL"
            conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=OFF")
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    def _init_schema(self) -> None:
        conn = self._writer_conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(SCHEMA):
                conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                )
            elif row[0] != SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path}: database schema version {row[0]} is not {SCHEMA_VERSION}"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

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
            row = self.read(lambda r: r.cached_table(region, name))
        return row

    def get_checked(self, row: TableRow, pk: bytes, sk: bytes = b"") -> Item | None:
        """:meth:`Reader.get_checked` on this thread's reader: one statement, no transaction."""
        reader: Reader | None = None if self._memory else getattr(self._local, "reader", None)
        if reader is None or self._closed:
            return self.read(lambda r: r.get_checked(row, pk, sk))
        return reader.get_checked(row, pk, sk)

    def forget_table(self, row: TableRow) -> None:
        """Drop ``row``'s table from the catalog cache (it changed, or is about to)."""
        self.catalog.forget(row)

    # reads -------------------------------------------------------------------------------------

    def read(self, fn: Callable[[Reader], T]) -> T:
        """Run ``fn`` with a reader; for several statements in one snapshot use :meth:`snapshot`."""
        self._check_open()
        if self._memory:
            with self._memory_lock:
                return fn(self._writer)
        return fn(self._reader()[0])

    def snapshot(self, fn: Callable[[Reader], T]) -> T:
        """Run ``fn`` inside one read transaction: all its reads see the same committed state."""
        self._check_open()
        if self._memory:
            with self._memory_lock:
                return fn(self._writer)
        reader, conn = self._reader()
        conn.execute("BEGIN")
        try:
            return fn(reader)
        finally:
            conn.execute("COMMIT")

    # writes ------------------------------------------------------------------------------------

    def write(
        self, fn: Callable[[Writer], T], *, savepoint: bool = False, autocommit: bool = False
    ) -> T:
        """Run ``fn`` in a committed write transaction, group-committed with concurrent callers.

        ``fn`` must raise only before it writes, unless ``savepoint=True``: then a DynamoDBError
        raised after writing rolls back exactly what ``fn`` wrote (a few microseconds more, so
        the item hot paths, which check everything first, do without).

        ``autocommit=True`` is for a ``fn`` whose one write is a single statement, correct
        whether or not it runs inside a transaction: uncontended, it runs with no BEGIN/COMMIT
        (the statement commits itself).
        """
        if self._closed:
            raise RuntimeError("the engine is closed")
        if autocommit and not self._memory:
            with self._cond_lock:
                alone = not self._leading and not self._pending
                if alone:
                    self._leading = True
            if alone:  # uncontended: no slot, no batch, no transaction
                try:
                    return fn(self._writer)
                except DynamoDBError:
                    raise
                except Exception as exc:
                    raise internal_error() from exc
                finally:
                    with self._cond_lock:
                        self._leading = False
                        if self._pending:
                            self._cond.notify_all()
        slot = _Slot(fn, savepoint, autocommit)
        with self._cond_lock:
            if not self._leading and not self._pending:
                # Uncontended: lead a batch of this write alone, nothing to queue or wait for.
                self._leading = True
                batch = [slot]
            else:
                self._pending.append(slot)
                while not slot.done and self._leading:
                    self._cond.wait()
                if not slot.done:
                    self._leading = True
                    batch, self._pending = self._pending, []
                else:
                    batch = []
        if batch:
            try:
                self._run_batch(batch)
            finally:
                with self._cond_lock:
                    self._leading = False
                    # Everyone waiting is in _pending or in this batch: an uncontended writer
                    # (batch of one, nobody queued) has nobody to wake.
                    if self._pending or len(batch) > 1:
                        self._cond.notify_all()
        if slot.error is not None:
            # Unlink before raising: the error's traceback holds this frame, which holds the
            # slot. Left linked, every failed write (a failed condition, say) is a reference
            # cycle that only the garbage collector frees, at ~6 us a call (measured).
            error, slot.error = slot.error, None
            try:
                raise error
            finally:
                del error
        return slot.result  # type: ignore[no-any-return]

    def _run_batch(self, batch: list[_Slot]) -> None:
        lock = self._memory_lock if self._memory else None
        if lock is not None:
            lock.acquire()
        conn = self._writer_conn
        if len(batch) == 1 and batch[0].autocommit:
            self._run_autocommit(batch[0], lock)
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
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
                conn.execute("COMMIT")
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
        try:
            slot.result = slot.fn(self._writer)
        except DynamoDBError as exc:
            slot.error = exc
        except Exception as exc:
            slot.error = internal_error()
            slot.error.__cause__ = exc
        finally:
            slot.done = True
            if lock is not None:
                lock.release()

    # lifecycle ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the engine is closed")

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
