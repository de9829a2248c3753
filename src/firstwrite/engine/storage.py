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
* Catalog rows are cached per process (:meth:`Reader.cached_table`). A cached row is only ever
  used through the ``*_checked`` item statements, which verify its id and version in the same
  statement and raise :class:`StaleTable` when another engine changed the table meanwhile: the
  single-item hot paths pay no catalog query, and no cache can outlive a change.
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

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import msgpack

from .errors import DynamoDBError, internal_error
from .keys import KeySchema
from .values import Item

T = TypeVar("T")


class StaleTable(DynamoDBError):
    """A cached catalog row no longer matches the database: refetch the table and retry.

    Raised by the ``*_checked`` statements before anything is written. Never reaches a client
    (the item operations retry); should it escape, it is an internal error.
    """

    def __init__(self) -> None:
        error = internal_error()
        super().__init__(error.code, error.message)


# The item statements of the single-item hot paths, each verifying in the same statement that
# the cached catalog row (?1 = id, version) is still current: ids are never reused
# (AUTOINCREMENT) and versions only grow, so a match means the table did not change.
_CHECKED_GET = (
    "SELECT version, (SELECT body FROM items WHERE table_id = ?1 AND pk = ?2 AND sk = ?3) "
    "FROM tables WHERE id = ?1"
)
_CHECKED_INSERT = (
    "INSERT INTO items (table_id, pk, sk, size, body) SELECT ?1, ?2, ?3, ?4, ?5 "
    "WHERE EXISTS (SELECT 1 FROM tables WHERE id = ?1 AND version = ?6) ON CONFLICT DO NOTHING"
)

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
-- Expired tokens are purged on every transaction: keep that a range delete, not a scan.
CREATE INDEX IF NOT EXISTS tokens_by_completion ON tokens (completed_at);
"""

# TTL (engine/ttl.py): one row per item whose TTL attribute is a Number, kept in the item's own
# write transaction, so the sweeper reads due items off an index instead of scanning tables.
# ttl_backfill holds the scan cursor of a table whose TTL was just enabled (done in chunks).
_TTL_SCHEMA = """
CREATE TABLE IF NOT EXISTS ttl_expiry (
    table_id INTEGER NOT NULL,
    pk       BLOB NOT NULL,
    sk       BLOB NOT NULL,
    expires  REAL NOT NULL,
    PRIMARY KEY (table_id, pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ttl_expiry_due ON ttl_expiry (expires);
CREATE TABLE IF NOT EXISTS ttl_backfill (
    table_id  INTEGER PRIMARY KEY,
    attribute TEXT NOT NULL,
    after_pk  BLOB,
    after_sk  BLOB
);
"""

# DynamoDB Streams (engine/streams.py): one row per stream (one shard each), and the records.
# AUTOINCREMENT makes record sequence numbers monotonic and never reused, across processes.
_STREAMS_SCHEMA = """
CREATE TABLE IF NOT EXISTS streams (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    arn             TEXT NOT NULL UNIQUE,
    region          TEXT NOT NULL,
    table_name      TEXT NOT NULL,
    label           TEXT NOT NULL,
    view_type       TEXT NOT NULL,
    shard_id        TEXT NOT NULL,
    key_schema      TEXT NOT NULL,
    created_at      REAL NOT NULL,
    start_seq       INTEGER NOT NULL,
    closed_at       REAL,
    end_seq         INTEGER,
    trimmed_through INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS stream_records (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    stream_id  INTEGER NOT NULL,
    created_at REAL NOT NULL,
    body       BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS stream_records_by_stream ON stream_records (stream_id, seq);
CREATE INDEX IF NOT EXISTS stream_records_by_time ON stream_records (created_at);
"""
_SCHEMA += _TTL_SCHEMA + _STREAMS_SCHEMA

_SCHEMA_VERSION = "1"
_BUSY_TIMEOUT_S = 60.0


_packers = threading.local()  # a Packer is not thread-safe; reusing one skips its setup


def pack(item: Item) -> bytes:
    packer = getattr(_packers, "packer", None)
    if packer is None:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    return packer.pack(item)  # type: ignore[no-any-return]


def unpack(body: bytes) -> Item:
    return msgpack.unpackb(body, raw=False)  # type: ignore[no-any-return]


def _key_bounds(
    pk: bytes | None, low: tuple[bytes, bool] | None, high: tuple[bytes, bool] | None
) -> tuple[list[str], list[Any]]:
    """SQL conditions and arguments for :meth:`Reader.range`'s partition and key bounds."""
    where: list[str] = []
    args: list[Any] = []
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
    return where, args


@dataclass(frozen=True, slots=True)
class TableRow:
    """A catalog entry at one version: the table's storage id, its definition (DescribeTable's
    source) and the key schema read from it. Storage builds one per (id, version) and reuses it.
    """

    id: int
    region: str
    name: str
    version: int
    definition: dict[str, Any]
    key_schema: KeySchema

    @classmethod
    def build(
        cls, table_id: int, region: str, name: str, version: int, definition: dict[str, Any]
    ) -> TableRow:
        return cls(table_id, region, name, version, definition, KeySchema.of(definition))


@dataclass(frozen=True)
class StreamRow:
    """A DynamoDB stream (engine/streams.py): one shard, open until ``closed_at``."""

    id: int
    arn: str
    region: str
    table_name: str
    label: str
    view_type: str
    shard_id: str
    key_schema: list[dict[str, str]]
    created_at: float
    start_seq: int
    closed_at: float | None
    end_seq: int | None
    trimmed_through: int


_STREAM_COLUMNS = (
    "id, arn, region, table_name, label, view_type, shard_id, key_schema, created_at, "
    "start_seq, closed_at, end_seq, trimmed_through"
)


def _stream_row(row: Any) -> StreamRow:
    return StreamRow(
        id=row[0],
        arn=row[1],
        region=row[2],
        table_name=row[3],
        label=row[4],
        view_type=row[5],
        shard_id=row[6],
        key_schema=json.loads(row[7]),
        created_at=row[8],
        start_seq=row[9],
        closed_at=row[10],
        end_seq=row[11],
        trimmed_through=row[12],
    )


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

    def cached_table(self, region: str, name: str) -> TableRow | None:
        """The table's catalog row, from this process's cache when it has one.

        The row may be stale: use it only with the ``*_checked`` statements, which verify it.
        """
        cache = self._storage._tables
        row = cache.get((region, name))
        if row is None:
            row = self.table(region, name)
            if row is not None and not self._conn.in_transaction:
                cache[(region, name)] = row  # only committed rows: a rollback cannot undo it
        return row

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

    def get_checked(self, row: TableRow, pk: bytes, sk: bytes = b"") -> Item | None:
        """:meth:`get`, verifying ``row`` (from :meth:`cached_table`) in the same statement."""
        found = self._current(row, self._conn.execute(_CHECKED_GET, (row.id, pk, sk)).fetchone())
        return None if found[1] is None else unpack(found[1])

    def _current(self, row: TableRow, found: tuple[Any, ...] | None) -> tuple[Any, ...]:
        """``found`` (a result row read with ``row.id``'s catalog version first), or
        :class:`StaleTable` when that version shows ``row`` is no longer current."""
        if found is None or found[0] != row.version:
            self._storage.forget_table(row)
            raise StaleTable()
        return found

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
        where, args = _key_bounds(pk, low, high)
        where.insert(0, "table_id = ?")
        args.insert(0, table_id)
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

    # Scan (operations/query.py) --------------------------------------------------------------

    def scan_from(
        self,
        table_id: int,
        after: tuple[bytes, bytes] | None = None,
        *,
        keep: Callable[[bytes], bool] | None = None,
    ) -> Iterator[tuple[bytes, bytes, int, Item]]:
        """A table's items in (pk, sk) order, strictly after ``after``, read lazily.

        ``keep(pk)`` selects a parallel-scan segment: rows it rejects are skipped before their
        bodies are decoded. The caller stops iterating at its page limit.
        """
        if after is None:
            cursor = self._conn.execute(
                "SELECT pk, sk, size, body FROM items WHERE table_id = ? ORDER BY pk, sk",
                (table_id,),
            )
        else:
            cursor = self._conn.execute(
                "SELECT pk, sk, size, body FROM items WHERE table_id = ? AND (pk, sk) > (?, ?) "
                "ORDER BY pk, sk",
                (table_id, after[0], after[1]),
            )
        try:
            for row_pk, row_sk, size, body in cursor:
                if keep is None or keep(row_pk):
                    yield row_pk, row_sk, size, unpack(body)
        finally:
            cursor.close()

    # transaction tokens ----------------------------------------------------------------------

    def token(self, region: str, token: str) -> tuple[str, float, bytes] | None:
        row = self._conn.execute(
            "SELECT fingerprint, completed_at, response FROM tokens WHERE region = ? AND token = ?",
            (region, token),
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    # TTL (engine/ttl.py) ---------------------------------------------------------------------

    def table_by_id(self, table_id: int) -> TableRow | None:
        row = self._conn.execute("SELECT version FROM tables WHERE id = ?", (table_id,)).fetchone()
        return None if row is None else self._storage._definition(self._conn, table_id, row[0])

    def ttl_due(
        self, before: float, not_before: float, limit: int
    ) -> list[tuple[int, bytes, bytes, float]]:
        """Up to ``limit`` (table_id, pk, sk, expires) with ``not_before <= expires < before``."""
        rows = self._conn.execute(
            "SELECT table_id, pk, sk, expires FROM ttl_expiry WHERE expires < ? AND expires >= ? "
            "ORDER BY expires LIMIT ?",
            (before, not_before, limit),
        ).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def ttl_backfills(self) -> list[tuple[int, str, tuple[bytes, bytes] | None]]:
        """Tables whose TTL index is still being built: (table_id, attribute, scan cursor)."""
        rows = self._conn.execute(
            "SELECT table_id, attribute, after_pk, after_sk FROM ttl_backfill ORDER BY table_id"
        ).fetchall()
        return [(r[0], r[1], None if r[2] is None else (r[2], r[3])) for r in rows]

    # DynamoDB Streams (engine/streams.py) ----------------------------------------------------

    def stream(self, arn: str) -> StreamRow | None:
        row = self._conn.execute(
            f"SELECT {_STREAM_COLUMNS} FROM streams WHERE arn = ?", (arn,)
        ).fetchone()
        return None if row is None else _stream_row(row)

    def streams_of(self, region: str) -> list[StreamRow]:
        rows = self._conn.execute(
            f"SELECT {_STREAM_COLUMNS} FROM streams WHERE region = ? ORDER BY arn", (region,)
        ).fetchall()
        return [_stream_row(r) for r in rows]

    def stream_records(
        self, stream_id: int, after: int, limit: int
    ) -> list[tuple[int, float, bytes]]:
        """Up to ``limit`` records (seq, created_at, body) of a stream with ``seq > after``."""
        rows = self._conn.execute(
            "SELECT seq, created_at, body FROM stream_records WHERE stream_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (stream_id, after, limit),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def stream_last_seq(self, stream_id: int, *, before: float | None = None) -> int | None:
        """The newest record's sequence number (only among those created before ``before``)."""
        if before is None:
            row = self._conn.execute(
                "SELECT max(seq) FROM stream_records WHERE stream_id = ?", (stream_id,)
            ).fetchone()
        else:
            row = self._conn.execute(
                "SELECT max(seq) FROM stream_records WHERE stream_id = ? AND created_at < ?",
                (stream_id, before),
            ).fetchone()
        return None if row[0] is None else int(row[0])

    def stream_next_seq(self) -> int:
        """The sequence number the next record will get (AUTOINCREMENT never goes back)."""
        row = self._conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'stream_records'"
        ).fetchone()
        return (0 if row is None else int(row[0])) + 1

    def stream_records_before(self, cutoff: float) -> bool:
        """Whether any record or closed stream is older than ``cutoff`` (cheap idle check)."""
        row = self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM stream_records WHERE created_at < ?) "
            "OR EXISTS (SELECT 1 FROM streams WHERE closed_at < ?)",
            (cutoff, cutoff),
        ).fetchone()
        return bool(row[0])


class Writer(Reader):
    """Read and write access inside one write transaction (see the module notes)."""

    def put(self, table_id: int, pk: bytes, sk: bytes, size: int, item: Item) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO items (table_id, pk, sk, size, body) VALUES (?, ?, ?, ?, ?)",
            (table_id, pk, sk, size, pack(item)),
        )

    def insert_checked(self, row: TableRow, pk: bytes, sk: bytes, size: int, item: Item) -> bool:
        """Store ``item`` in the table of a cached ``row`` unless an item is stored under its key,
        in one statement (so it is atomic in autocommit too). False when one is; raises
        :class:`StaleTable` if ``row`` is no longer current."""
        cursor = self._conn.execute(
            _CHECKED_INSERT, (row.id, pk, sk, size, pack(item), row.version)
        )
        if cursor.rowcount == 1:
            return True
        self._current(
            row, self._conn.execute("SELECT version FROM tables WHERE id = ?", (row.id,)).fetchone()
        )
        return False

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
        return TableRow.build(table_id, region, name, 1, definition)

    def update_table(self, row: TableRow, definition: dict[str, Any]) -> TableRow:
        self._conn.execute(
            "UPDATE tables SET definition = ?, version = version + 1 WHERE id = ?",
            (json.dumps(definition), row.id),
        )
        self._storage.forget_table(row)
        return TableRow.build(row.id, row.region, row.name, row.version + 1, definition)

    def drop_table(self, row: TableRow) -> None:
        self._storage.forget_table(row)
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

    # TTL (engine/ttl.py) ---------------------------------------------------------------------

    def ttl_set(self, table_id: int, pk: bytes, sk: bytes, expires: float) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO ttl_expiry (table_id, pk, sk, expires) VALUES (?, ?, ?, ?)",
            (table_id, pk, sk, expires),
        )

    def ttl_clear(self, table_id: int, pk: bytes, sk: bytes) -> None:
        self._conn.execute(
            "DELETE FROM ttl_expiry WHERE table_id = ? AND pk = ? AND sk = ?", (table_id, pk, sk)
        )

    def ttl_drop_table(self, table_id: int) -> None:
        """Forget a table's TTL index and backfill (TTL disabled, or table deleted)."""
        self._conn.execute("DELETE FROM ttl_expiry WHERE table_id = ?", (table_id,))
        self._conn.execute("DELETE FROM ttl_backfill WHERE table_id = ?", (table_id,))

    def ttl_backfill_set(
        self, table_id: int, attribute: str, after: tuple[bytes, bytes] | None
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO ttl_backfill (table_id, attribute, after_pk, after_sk) "
            "VALUES (?, ?, ?, ?)",
            (table_id, attribute, *(after or (None, None))),
        )

    def ttl_backfill_done(self, table_id: int) -> None:
        self._conn.execute("DELETE FROM ttl_backfill WHERE table_id = ?", (table_id,))

    # DynamoDB Streams (engine/streams.py) ----------------------------------------------------

    def stream_create(
        self,
        *,
        arn: str,
        region: str,
        table_name: str,
        label: str,
        view_type: str,
        shard_id: str,
        key_schema: list[dict[str, str]],
        created_at: float,
    ) -> StreamRow:
        start = self.stream_next_seq()
        cursor = self._conn.execute(
            "INSERT INTO streams (arn, region, table_name, label, view_type, shard_id, "
            "key_schema, created_at, start_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                arn,
                region,
                table_name,
                label,
                view_type,
                shard_id,
                json.dumps(key_schema),
                created_at,
                start,
            ),
        )
        assert cursor.lastrowid is not None
        stream = self.stream(arn)
        assert stream is not None
        return stream

    def stream_close(self, stream_id: int, at: float) -> None:
        """Close the stream's shard at its last record (DescribeStream's EndingSequenceNumber)."""
        last = self.stream_last_seq(stream_id)
        self._conn.execute(
            "UPDATE streams SET closed_at = ?, end_seq = coalesce(?, start_seq - 1) "
            "WHERE id = ? AND closed_at IS NULL",
            (at, last, stream_id),
        )

    def stream_append(self, stream_id: int, created_at: float, body: bytes) -> int:
        """Add one record; returns its sequence number (allocated in this transaction)."""
        cursor = self._conn.execute(
            "INSERT INTO stream_records (stream_id, created_at, body) VALUES (?, ?, ?)",
            (stream_id, created_at, body),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def stream_purge(self, cutoff: float) -> None:
        """Drop records created before ``cutoff`` and streams closed before it (retention)."""
        self._conn.execute(
            "UPDATE streams SET trimmed_through = max(trimmed_through, coalesce(("
            "SELECT max(seq) FROM stream_records r WHERE r.stream_id = streams.id "
            "AND r.created_at < ?), 0))",
            (cutoff,),
        )
        self._conn.execute("DELETE FROM stream_records WHERE created_at < ?", (cutoff,))
        gone = [
            r[0]
            for r in self._conn.execute(
                "SELECT id FROM streams WHERE closed_at < ?", (cutoff,)
            ).fetchall()
        ]
        for stream_id in gone:
            self._conn.execute("DELETE FROM stream_records WHERE stream_id = ?", (stream_id,))
            self._conn.execute("DELETE FROM streams WHERE id = ?", (stream_id,))


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
        self._definitions: dict[tuple[int, int], TableRow] = {}
        self._tables: dict[tuple[str, str], TableRow] = {}  # see Reader.cached_table
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
            row = TableRow.build(table_id, region, name, version, json.loads(text))
            self._definitions[key] = row
        return row

    def cached_table(self, region: str, name: str) -> TableRow | None:
        """:meth:`Reader.cached_table` with no connection touched on a cache hit."""
        row = self._tables.get((region, name))
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
        self._tables.pop((row.region, row.name), None)

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
                    if slot.savepoint:
                        conn.execute("RELEASE slot")
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._tables.clear()  # a rolled-back catalog change must not survive in it
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


# =============================================================================================
# Regions: global tables and asynchronous replication (used by regions.py)
# =============================================================================================
#
# replication_queue holds the replication work of a write, recorded in the write's own
# transaction, so a crash neither loses nor duplicates it: an entry is deleted in the same
# transaction that applies it to the target replica. item_versions keeps, per item of a
# replicated table, the (source write time, source region) of the write it shows, for
# last-writer-wins; a delete keeps its version row as the tombstone.

_SCHEMA += """
CREATE TABLE IF NOT EXISTS replication_queue (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name    TEXT NOT NULL,
    source_region TEXT NOT NULL,
    target_region TEXT NOT NULL,
    pk            BLOB NOT NULL,
    sk            BLOB NOT NULL,
    written_at    REAL NOT NULL,  -- the version, for last-writer-wins
    queued_at     REAL NOT NULL,  -- the source's clock at the write: the lag counts from here
    body          BLOB
);
CREATE INDEX IF NOT EXISTS replication_by_target ON replication_queue (target_region, queued_at);
CREATE TABLE IF NOT EXISTS item_versions (
    table_id   INTEGER NOT NULL,
    pk         BLOB NOT NULL,
    sk         BLOB NOT NULL,
    written_at REAL NOT NULL,
    region     TEXT NOT NULL,
    PRIMARY KEY (table_id, pk, sk)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class ReplicationEntry:
    """One write waiting to reach one replica; ``item`` is None for a delete."""

    seq: int
    table_name: str
    source_region: str
    target_region: str
    pk: bytes
    sk: bytes
    written_at: float
    queued_at: float
    item: Item | None


def replication_enqueue(
    w: Writer,
    table_name: str,
    source_region: str,
    target_regions: list[str],
    pk: bytes,
    sk: bytes,
    written_at: float,
    queued_at: float,
    item: Item | None,
) -> None:
    body = None if item is None else pack(item)
    w._conn.executemany(
        "INSERT INTO replication_queue "
        "(table_name, source_region, target_region, pk, sk, written_at, queued_at, body) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (table_name, source_region, t, pk, sk, written_at, queued_at, body)
            for t in target_regions
        ],
    )


def replication_due(
    r: Reader, target_region: str | None, up_to: float, limit: int
) -> list[ReplicationEntry]:
    """Queued entries queued at or before ``up_to``, oldest first (per target region)."""
    sql = (
        "SELECT seq, table_name, source_region, target_region, pk, sk, written_at, queued_at, "
        "body FROM replication_queue WHERE queued_at <= ?"
    )
    args: list[Any] = [up_to]
    if target_region is not None:
        sql += " AND target_region = ?"
        args.append(target_region)
    rows = r._conn.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit)).fetchall()
    return [
        ReplicationEntry(s, t, src, dst, pk, sk, at, q, None if body is None else unpack(body))
        for s, t, src, dst, pk, sk, at, q, body in rows
    ]


def replication_done(w: Writer, seqs: list[int]) -> None:
    w._conn.executemany("DELETE FROM replication_queue WHERE seq = ?", [(s,) for s in seqs])


def replication_backlog(r: Reader) -> list[tuple[str, str, str, int, float]]:
    """``(table, source region, target region, entries, oldest queue time)`` per queue lane."""
    rows = r._conn.execute(
        "SELECT table_name, source_region, target_region, count(*), min(queued_at) "
        "FROM replication_queue GROUP BY table_name, source_region, target_region "
        "ORDER BY table_name, source_region, target_region"
    ).fetchall()
    return [(t, s, d, int(n), float(at)) for t, s, d, n, at in rows]


def replication_oldest(r: Reader, target_region: str | None = None) -> float | None:
    """The queue time of the oldest queued entry (for one target region), or None."""
    if target_region is None:
        row = r._conn.execute("SELECT min(queued_at) FROM replication_queue").fetchone()
    else:
        row = r._conn.execute(
            "SELECT min(queued_at) FROM replication_queue WHERE target_region = ?",
            (target_region,),
        ).fetchone()
    return None if row[0] is None else float(row[0])


def replication_fork(w: Writer, table_name: str, from_target: str, to_target: str) -> None:
    """Copy the entries queued for one replica to a new one (writes not yet seen by its seed)."""
    w._conn.execute(
        "INSERT INTO replication_queue "
        "(table_name, source_region, target_region, pk, sk, written_at, queued_at, body) "
        "SELECT table_name, source_region, ?, pk, sk, written_at, queued_at, body "
        "FROM replication_queue "
        "WHERE table_name = ? AND target_region = ? ORDER BY seq",
        (to_target, table_name, from_target),
    )


def replication_purge(w: Writer, table_name: str, target_region: str) -> None:
    w._conn.execute(
        "DELETE FROM replication_queue WHERE table_name = ? AND target_region = ?",
        (table_name, target_region),
    )


def global_tables_exist(r: Reader) -> bool:
    """Is any table a replica of a global table, or any replication work queued?"""
    queued = r._conn.execute("SELECT 1 FROM replication_queue LIMIT 1").fetchone()
    if queued is not None:
        return True
    replicated = r._conn.execute(
        "SELECT 1 FROM tables WHERE definition LIKE '%\"Replicas\"%' LIMIT 1"
    ).fetchone()
    return replicated is not None


def item_version(r: Reader, table_id: int, pk: bytes, sk: bytes) -> tuple[float, str] | None:
    row = r._conn.execute(
        "SELECT written_at, region FROM item_versions WHERE table_id = ? AND pk = ? AND sk = ?",
        (table_id, pk, sk),
    ).fetchone()
    return None if row is None else (float(row[0]), str(row[1]))


def set_item_version(
    w: Writer, table_id: int, pk: bytes, sk: bytes, written_at: float, region: str
) -> None:
    w._conn.execute(
        "INSERT OR REPLACE INTO item_versions (table_id, pk, sk, written_at, region) "
        "VALUES (?, ?, ?, ?, ?)",
        (table_id, pk, sk, written_at, region),
    )


def copy_table_items(w: Writer, source_id: int, target_id: int) -> None:
    """Seed a new replica: every item of ``source_id`` and its version, in one statement each."""
    w._conn.execute(
        "INSERT OR REPLACE INTO items (table_id, pk, sk, size, body) "
        "SELECT ?, pk, sk, size, body FROM items WHERE table_id = ?",
        (target_id, source_id),
    )
    w._conn.execute(
        "INSERT OR REPLACE INTO item_versions (table_id, pk, sk, written_at, region) "
        "SELECT ?, pk, sk, written_at, region FROM item_versions WHERE table_id = ?",
        (target_id, source_id),
    )


def drop_item_versions(w: Writer, table_id: int) -> None:
    w._conn.execute("DELETE FROM item_versions WHERE table_id = ?", (table_id,))


# =============================================================================================
# Faults: item history for stale (eventually consistent) reads (used by faults.py)
# =============================================================================================
#
# While a stale-read fault is on, every write to a table in its scope records the item as it
# was before the write, stamped with the write's time. The state of a key at instant ``v`` is
# then the first recorded pre-image written after ``v``, or the current item when there is none.

_SCHEMA += """
CREATE TABLE IF NOT EXISTS item_history (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    table_id      INTEGER NOT NULL,
    pk            BLOB NOT NULL,
    sk            BLOB NOT NULL,
    superseded_at REAL NOT NULL,
    size          INTEGER NOT NULL,
    body          BLOB
);
CREATE INDEX IF NOT EXISTS item_history_by_key ON item_history (table_id, pk, sk, superseded_at);
"""


def record_history(
    w: Writer,
    table_id: int,
    pk: bytes,
    sk: bytes,
    superseded_at: float,
    old: Item | None,
    old_size: int,
    keep_after: float,
) -> None:
    """Remember ``old`` as the key's state until ``superseded_at``; forget what no read needs."""
    w._conn.execute(
        "DELETE FROM item_history WHERE table_id = ? AND pk = ? AND sk = ? AND superseded_at <= ?",
        (table_id, pk, sk, keep_after),
    )
    w._conn.execute(
        "INSERT INTO item_history (table_id, pk, sk, superseded_at, size, body) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (table_id, pk, sk, superseded_at, old_size, None if old is None else pack(old)),
    )


def clear_history(w: Writer) -> None:
    w._conn.execute("DELETE FROM item_history")


class AsOfReader(Reader):
    """A reader answering item reads as of instant ``as_of`` (see the section notes).

    Only the item reads are time-shifted (``get``, ``range``, ``scan_from``); the catalog is
    read as it is now.
    """

    def __init__(self, base: Reader, as_of: float) -> None:
        super().__init__(base._conn, base._storage)
        self.as_of = as_of

    def get(self, table_id: int, pk: bytes, sk: bytes = b"") -> Item | None:
        row = self._conn.execute(
            "SELECT body, 1 FROM item_history WHERE table_id = ? AND pk = ? AND sk = ? "
            "AND superseded_at > ? ORDER BY seq LIMIT 1",
            (table_id, pk, sk, self.as_of),
        ).fetchone()
        if row is None:
            return super().get(table_id, pk, sk)
        return None if row[0] is None else unpack(row[0])

    def _merged(
        self, table_id: int, where: list[str], args: list[Any], order: str, limit: int | None
    ) -> Iterator[tuple[bytes, bytes, int, Item]]:
        # Current items not rewritten since as_of, plus the first pre-image recorded after
        # as_of of every rewritten key (absent when the key did not exist then).
        cond = " AND ".join(where)
        sql = (
            "WITH h AS (SELECT pk, sk, size, body FROM item_history WHERE seq IN ("
            "  SELECT min(seq) FROM item_history WHERE table_id = ? AND superseded_at > ? "
            "  GROUP BY pk, sk)) "
            f"SELECT pk, sk, size, body FROM items i WHERE table_id = ? AND {cond} "
            "AND NOT EXISTS (SELECT 1 FROM h WHERE h.pk = i.pk AND h.sk = i.sk) "
            f"UNION ALL SELECT pk, sk, size, body FROM h WHERE body IS NOT NULL AND {cond} "
            f"ORDER BY pk {order}, sk {order}"
        )
        params: list[Any] = [table_id, self.as_of, table_id, *args, *args]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        cursor = self._conn.execute(sql, params)
        try:
            for row_pk, row_sk, size, body in cursor:
                yield row_pk, row_sk, size, unpack(body)
        finally:
            cursor.close()

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
        where, args = _key_bounds(pk, low, high)
        where.insert(0, "1")
        return self._merged(table_id, where, args, "ASC" if forward else "DESC", limit)

    def scan_from(
        self,
        table_id: int,
        after: tuple[bytes, bytes] | None = None,
        *,
        keep: Callable[[bytes], bool] | None = None,
    ) -> Iterator[tuple[bytes, bytes, int, Item]]:
        where = ["1"] if after is None else ["(pk, sk) > (?, ?)"]
        args: list[Any] = [] if after is None else [after[0], after[1]]
        for row in self._merged(table_id, where, args, "ASC", None):
            if keep is None or keep(row[0]):
                yield row

    def scan_after(
        self, table_id: int, after: tuple[bytes, bytes] | None, limit: int
    ) -> list[tuple[bytes, bytes, int, Item]]:
        where = ["1"] if after is None else ["(pk, sk) > (?, ?)"]
        args: list[Any] = [] if after is None else [after[0], after[1]]
        return list(self._merged(table_id, where, args, "ASC", limit))
