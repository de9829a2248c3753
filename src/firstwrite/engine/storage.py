"""All SQL lives here: the catalog, items, transaction tokens, on one SQLite database.

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
* A write function must raise only *before* it changes anything (validate, evaluate conditions,
  then write). A :class:`~firstwrite.engine.errors.DynamoDBError` from one function fails only
  that call; any other exception rolls back the whole batch and fails every call in it, so an
  acknowledgement always means committed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import msgpack

from .errors import DynamoDBError
from .values import Item

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tables (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    region     TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    definition TEXT NOT NULL,
    UNIQUE (region, name)
);
CREATE TABLE IF NOT EXISTS items (
    table_id INTEGER NOT NULL,
    pk       BLOB NOT NULL,
    sk       BLOB NOT NULL,
    size     INTEGER NOT NULL,
    body     BLOB NOT NULL,
    PRIMARY KEY (table_id, pk, sk)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tokens (
    region       TEXT NOT NULL,
    token        TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    completed_at REAL NOT NULL,
    response     BLOB NOT NULL,
    PRIMARY KEY (region, token)
) WITHOUT ROWID;
"""

_SCHEMA_VERSION = "1"
_BUSY_TIMEOUT_S = 60.0


def pack(item: Item) -> bytes:
    return msgpack.packb(item, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(body: bytes) -> Item:
    return msgpack.unpackb(body, raw=False)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class TableRow:
    """A catalog entry: the table's storage id and its definition (DescribeTable's source)."""

    id: int
    region: str
    name: str
    version: int
    definition: dict[str, Any]


class Reader:
    """Read access over one connection; every method is one consistent SQLite snapshot."""

    def __init__(self, conn: sqlite3.Connection, storage: Storage) -> None:
        self._conn = conn
        self._storage = storage

    # catalog ---------------------------------------------------------------------------------

    def table(self, region: str, name: str) -> TableRow | None:
        row = self._conn.execute(
            "SELECT id, version FROM tables WHERE region = ? AND name = ?", (region, name)
        ).fetchone()
        if row is None:
            return None
        return self._storage._definition(self._conn, row[0], row[1])

    def table_names(self, region: str) -> list[str]:
        rows = self._conn.execute(
            "SELECT name FROM tables WHERE region = ? ORDER BY name", (region,)
        ).fetchall()
        return [r[0] for r in rows]

    def tables(self, region: str | None = None) -> list[TableRow]:
        sql = "SELECT id, version FROM tables"
        args: tuple[Any, ...] = ()
        if region is not None:
            sql += " WHERE region = ?"
            args = (region,)
        rows = self._conn.execute(sql + " ORDER BY region, name", args).fetchall()
        return [self._storage._definition(self._conn, r[0], r[1]) for r in rows]

    def table_stats(self, table_id: int) -> tuple[int, int]:
        """(item count, total item bytes) of a table."""
        count, total = self._conn.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM items WHERE table_id = ?", (table_id,)
        ).fetchone()
        return int(count), int(total)

    # items -----------------------------------------------------------------------------------

    def get(self, table_id: int, pk: bytes, sk: bytes = b"") -> Item | None:
        row = self._conn.execute(
            "SELECT body FROM items WHERE table_id = ? AND pk = ? AND sk = ?", (table_id, pk, sk)
        ).fetchone()
        return None if row is None else unpack(row[0])

    def range(
        self,
        table_id: int,
        pk: bytes | None = None,
        *,
        low: tuple[bytes, bool] | None = None,
        high: tuple[bytes, bool] | None = None,
        forward: bool = True,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes, int, Item]]:
        """Items in key order: one partition (``pk``) or the whole table (``pk=None``).

        ``low``/``high`` bound the sort key (for a partition) or the ``(pk, sk)`` position (for a
        scan, as the ExclusiveStartKey) as ``(bytes, inclusive)``. Yields ``(pk, sk, size, item)``.
        """
        where = ["table_id = ?"]
        args: list[Any] = [table_id]
        column = "sk" if pk is not None else "pk"
        if pk is not None:
            where.append("pk = ?")
            args.append(pk)
        if low is not None:
            where.append(f"{column} {'>=' if low[1] else '>'} ?")
            args.append(low[0])
        if high is not None:
            where.append(f"{column} {'<=' if high[1] else '<'} ?")
            args.append(high[0])
        order = "ASC" if forward else "DESC"
        sql = (
            f"SELECT pk, sk, size, body FROM items WHERE {' AND '.join(where)} "
            f"ORDER BY pk {order}, sk {order}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        for row_pk, row_sk, size, body in self._conn.execute(sql, args):
            yield row_pk, row_sk, size, unpack(body)

    def scan_after(
        self, table_id: int, after: tuple[bytes, bytes] | None, limit: int
    ) -> list[tuple[bytes, bytes, int, Item]]:
        """Up to ``limit`` items of a table in (pk, sk) order, strictly after ``after``."""
        if after is None:
            rows = self._conn.execute(
                "SELECT pk, sk, size, body FROM items WHERE table_id = ? ORDER BY pk, sk LIMIT ?",
                (table_id, limit),
            ).fetchall()
        else:
            rows = self._conn.execute(
                "SELECT pk, sk, size, body FROM items WHERE table_id = ? AND (pk, sk) > (?, ?) "
                "ORDER BY pk, sk LIMIT ?",
                (table_id, after[0], after[1], limit),
            ).fetchall()
        return [(p, s, z, unpack(b)) for p, s, z, b in rows]

    # transaction tokens ----------------------------------------------------------------------

    def token(self, region: str, token: str) -> tuple[str, float, bytes] | None:
        row = self._conn.execute(
            "SELECT fingerprint, completed_at, response FROM tokens WHERE region = ? AND token = ?",
            (region, token),
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])


class Writer(Reader):
    """Read and write access inside one write transaction (see the module notes)."""

    def put(self, table_id: int, pk: bytes, sk: bytes, size: int, item: Item) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO items (table_id, pk, sk, size, body) VALUES (?, ?, ?, ?, ?)",
            (table_id, pk, sk, size, pack(item)),
        )

    def delete(self, table_id: int, pk: bytes, sk: bytes = b"") -> None:
        self._conn.execute(
            "DELETE FROM items WHERE table_id = ? AND pk = ? AND sk = ?", (table_id, pk, sk)
        )

    def create_table(self, region: str, name: str, definition: dict[str, Any]) -> TableRow:
        cursor = self._conn.execute(
            "INSERT INTO tables (region, name, version, definition) VALUES (?, ?, 1, ?)",
            (region, name, json.dumps(definition)),
        )
        table_id = cursor.lastrowid
        assert table_id is not None
        return TableRow(table_id, region, name, 1, definition)

    def update_table(self, row: TableRow, definition: dict[str, Any]) -> TableRow:
        self._conn.execute(
            "UPDATE tables SET definition = ?, version = version + 1 WHERE id = ?",
            (json.dumps(definition), row.id),
        )
        return TableRow(row.id, row.region, row.name, row.version + 1, definition)

    def drop_table(self, row: TableRow) -> None:
        self._conn.execute("DELETE FROM items WHERE table_id = ?", (row.id,))
        self._conn.execute("DELETE FROM tables WHERE id = ?", (row.id,))

    def save_token(
        self, region: str, token: str, fingerprint: str, completed_at: float, response: bytes
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO tokens (region, token, fingerprint, completed_at, response) "
            "VALUES (?, ?, ?, ?, ?)",
            (region, token, fingerprint, completed_at, response),
        )

    def purge_tokens(self, older_than: float) -> None:
        self._conn.execute("DELETE FROM tokens WHERE completed_at < ?", (older_than,))


class _Slot:
    __slots__ = ("done", "error", "fn", "result")

    def __init__(self, fn: Callable[[Writer], Any]) -> None:
        self.fn = fn
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
        self._definitions: dict[tuple[int, int], TableRow] = {}
        # Group commit state.
        self._cond = threading.Condition()
        self._pending: list[_Slot] = []
        self._leading = False
        self._closed = False
        # An in-memory database is one connection shared by all threads under a lock.
        self._memory_lock = threading.RLock()
        self._writer_conn = self._connect()
        self._writer = Writer(self._writer_conn, self)
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
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (_SCHEMA_VERSION,)
                )
            elif row[0] != _SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path}: database schema version {row[0]} is not {_SCHEMA_VERSION}"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _reader(self) -> Reader:
        if self._memory:
            return self._writer
        reader: Reader | None = getattr(self._local, "reader", None)
        if reader is None:
            reader = Reader(self._connect(), self)
            self._local.reader = reader
        return reader

    def _definition(self, conn: sqlite3.Connection, table_id: int, version: int) -> TableRow:
        key = (table_id, version)
        row = self._definitions.get(key)
        if row is None:
            region, name, text = conn.execute(
                "SELECT region, name, definition FROM tables WHERE id = ?", (table_id,)
            ).fetchone()
            row = TableRow(table_id, region, name, version, json.loads(text))
            self._definitions[key] = row
        return row

    # reads -------------------------------------------------------------------------------------

    def read(self, fn: Callable[[Reader], T]) -> T:
        """Run ``fn`` with a reader; for several statements in one snapshot use :meth:`snapshot`."""
        self._check_open()
        if self._memory:
            with self._memory_lock:
                return fn(self._writer)
        return fn(self._reader())

    def snapshot(self, fn: Callable[[Reader], T]) -> T:
        """Run ``fn`` inside one read transaction: all its reads see the same committed state."""
        self._check_open()
        if self._memory:
            with self._memory_lock:
                return fn(self._writer)
        reader = self._reader()
        reader._conn.execute("BEGIN")
        try:
            return fn(reader)
        finally:
            reader._conn.execute("COMMIT")

    # writes ------------------------------------------------------------------------------------

    def write(self, fn: Callable[[Writer], T]) -> T:
        """Run ``fn`` in a committed write transaction, group-committed with concurrent callers."""
        self._check_open()
        slot = _Slot(fn)
        with self._cond:
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
                with self._cond:
                    self._leading = False
                    self._cond.notify_all()
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[no-any-return]

    def _run_batch(self, batch: list[_Slot]) -> None:
        lock = self._memory_lock if self._memory else None
        if lock is not None:
            lock.acquire()
        conn = self._writer_conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for slot in batch:
                    try:
                        slot.result = slot.fn(self._writer)
                    except DynamoDBError as exc:
                        slot.error = exc
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                failure = DynamoDBError(
                    "InternalServerError", "DynamoDB could not process your request."
                )
                failure.__cause__ = exc
                for slot in batch:
                    slot.result = None
                    slot.error = failure
                if not isinstance(exc, Exception):
                    raise
        except sqlite3.Error as exc:
            # BEGIN itself failed (e.g. the database stayed locked past the busy timeout).
            failure = DynamoDBError(
                "InternalServerError", "DynamoDB could not process your request."
            )
            failure.__cause__ = exc
            for slot in batch:
                slot.error = failure
        finally:
            for slot in batch:
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
