"""The core statements: the catalog, items and transaction tokens.

Catalog rows are cached per process (:meth:`CoreReads.cached_table`). A cached row is only ever
used through the ``*_checked`` item statements, which verify its id and version in the same
statement and raise :class:`StaleTable` when another engine changed the table meanwhile: the
single-item hot paths pay no catalog query, and no cache can outlive a change.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
from collections.abc import Callable, Generator, Iterator
from typing import Any

from ..errors import DynamoDBError
from ..values import Item
from .base import StaleTable, Statements, TableRow, pack, unpack

__all__ = ["CoreReads", "CoreWrites", "column_bounds", "key_bounds"]

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

# The hot statements bind their blobs as bytearray: Python's sqlite3 binds one as it is, where it
# runs bytes through its adapter lookup first (a failed attribute lookup that formats an
# AttributeError, dearer than the copy). Stored alike.
_blob = bytearray


class _Savepoint:
    """``CoreWrites.guarded``: a savepoint released on success, rolled back on a refusal."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> object:
        self._conn.execute("SAVEPOINT guarded")
        return self

    def __exit__(self, kind: type[BaseException] | None, error: object, tb: object) -> None:
        if kind is not None and issubclass(kind, DynamoDBError):
            self._conn.execute("ROLLBACK TO guarded")
        self._conn.execute("RELEASE guarded")


_UNGUARDED = contextlib.nullcontext()


def column_bounds(
    column: str, low: tuple[bytes, bool] | None, high: tuple[bytes, bool] | None
) -> tuple[list[str], list[Any]]:
    """SQL conditions and arguments bounding ``column`` by ``(bytes, inclusive)`` ends."""
    where: list[str] = []
    args: list[Any] = []
    if low is not None:
        where.append(f"{column} {'>=' if low[1] else '>'} ?")
        args.append(low[0])
    if high is not None:
        where.append(f"{column} {'<=' if high[1] else '<'} ?")
        args.append(high[0])
    return where, args


def key_bounds(
    pk: bytes | None, low: tuple[bytes, bool] | None, high: tuple[bytes, bool] | None
) -> tuple[list[str], list[Any]]:
    """SQL conditions and arguments for :meth:`CoreReads.range`'s partition and key bounds."""
    if pk is None:
        return column_bounds("pk", low, high)
    where, args = column_bounds("sk", low, high)
    where.insert(0, "pk = ?")
    args.insert(0, pk)
    return where, args


class CoreReads(Statements):
    """The catalog, items and transaction tokens, read; each method is one SQLite statement
    (one snapshot) unless the caller runs it inside a transaction."""

    # catalog ---------------------------------------------------------------------------------

    def table(self, region: str, name: str) -> TableRow | None:
        row = self._conn.execute(
            "SELECT id, version FROM tables WHERE region = ? AND name = ?", (region, name)
        ).fetchone()
        if row is None:
            return None
        return self._row(row[0], row[1])

    def table_by_id(self, table_id: int) -> TableRow | None:
        row = self._conn.execute("SELECT version FROM tables WHERE id = ?", (table_id,)).fetchone()
        return None if row is None else self._row(table_id, row[0])

    def _row(self, table_id: int, version: int) -> TableRow:
        """The catalog row of ``table_id`` at ``version``, built once per process."""
        key = (table_id, version)
        row = self._catalog.rows.get(key)
        if row is None:
            region, name, text = self._conn.execute(
                "SELECT region, name, definition FROM tables WHERE id = ?", (table_id,)
            ).fetchone()
            row = TableRow.build(table_id, region, name, version, json.loads(text))
            self._catalog.rows[key] = row
        return row

    def cached_table(self, region: str, name: str) -> TableRow | None:
        """The table's catalog row, from this process's cache when it has one.

        The row may be stale: use it only with the ``*_checked`` statements, which verify it.
        """
        cache = self._catalog.current
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
        return [self._row(r[0], r[1]) for r in rows]

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
        found = self._current(
            row, self._conn.execute(_CHECKED_GET, (row.id, _blob(pk), _blob(sk))).fetchone()
        )
        return None if found[1] is None else unpack(found[1])

    def _current(self, row: TableRow, found: tuple[Any, ...] | None) -> tuple[Any, ...]:
        """``found`` (a result row read with ``row.id``'s catalog version first), or
        :class:`StaleTable` when that version shows ``row`` is no longer current."""
        if found is None or found[0] != row.version:
            self._catalog.forget(row)
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
        where, args = key_bounds(pk, low, high)
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

    def scan_from(
        self,
        table_id: int,
        after: tuple[bytes, bytes] | None = None,
        *,
        keep: Callable[[bytes], bool] | None = None,
    ) -> Generator[tuple[bytes, bytes, int, Item], None, None]:
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

    def scan_after(
        self, table_id: int, after: tuple[bytes, bytes] | None, limit: int
    ) -> list[tuple[bytes, bytes, int, Item]]:
        """Up to ``limit`` items of a table in (pk, sk) order, strictly after ``after``."""
        with contextlib.closing(self.scan_from(table_id, after)) as rows:
            return list(itertools.islice(rows, limit))

    # transaction tokens ----------------------------------------------------------------------

    def token(self, region: str, token: str) -> tuple[str, float, bytes] | None:
        row = self._conn.execute(
            "SELECT fingerprint, completed_at, response FROM tokens WHERE region = ? AND token = ?",
            (region, token),
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def setting(self, key: str) -> str | None:
        """The engine's own setting ``key`` from the ``meta`` table (the clock's), or None."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])


class CoreWrites(CoreReads):
    """The catalog, items and transaction tokens, written (inside a write transaction, or as
    one autocommit statement: see ``database.py``).

    With durability ``full``, ``marks`` is the storage's table id -> last commit that wrote the
    table's items: :meth:`put`, :meth:`insert_checked` and :meth:`delete` set it to ``seq``
    *before* their statement runs (a reader that sees the row finds the mark) and count the rows
    they changed in ``attributed``; any other change of the commit makes it one that every read
    waits for (``Storage``, database.py)."""

    marks: dict[int, int] | None = None
    seq = 0
    attributed = 0

    def guarded(self, needed: bool = True) -> contextlib.AbstractContextManager[object]:
        """Undo what the block wrote if it raises a DynamoDBError (a change hook refusing a
        write it has seen): a savepoint inside the caller's write transaction. ``needed=False``
        costs next to nothing (most writes check everything before they write)."""
        return _Savepoint(self._conn) if needed else _UNGUARDED

    def put(self, table_id: int, pk: bytes, sk: bytes, size: int, item: Item) -> None:
        marks = self.marks
        if marks is not None:
            marks[table_id] = self.seq
        cursor = self._conn.execute(
            "INSERT OR REPLACE INTO items (table_id, pk, sk, size, body) VALUES (?, ?, ?, ?, ?)",
            (table_id, _blob(pk), _blob(sk), size, _blob(pack(item))),
        )
        if marks is not None:
            self.attributed += cursor.rowcount

    def insert_checked(self, row: TableRow, pk: bytes, sk: bytes, size: int, item: Item) -> bool:
        """Store ``item`` in the table of a cached ``row`` unless an item is stored under its key,
        in one statement (so it is atomic in autocommit too). False when one is; raises
        :class:`StaleTable` if ``row`` is no longer current."""
        marks = self.marks
        if marks is not None:
            marks[row.id] = self.seq
        cursor = self._conn.execute(
            _CHECKED_INSERT,
            (row.id, _blob(pk), _blob(sk), size, _blob(pack(item)), row.version),
        )
        if cursor.rowcount == 1:
            if marks is not None:
                self.attributed += 1
            return True
        self._current(
            row, self._conn.execute("SELECT version FROM tables WHERE id = ?", (row.id,)).fetchone()
        )
        return False

    def delete(self, table_id: int, pk: bytes, sk: bytes = b"") -> None:
        marks = self.marks
        if marks is not None:
            marks[table_id] = self.seq
        cursor = self._conn.execute(
            "DELETE FROM items WHERE table_id = ? AND pk = ? AND sk = ?", (table_id, pk, sk)
        )
        if marks is not None:
            self.attributed += cursor.rowcount

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
        self._catalog.forget(row)
        return TableRow.build(row.id, row.region, row.name, row.version + 1, definition)

    def drop_table(self, row: TableRow) -> None:
        self._catalog.forget(row)
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

    def save_setting(self, key: str, value: str) -> None:
        """Keep the engine's own setting ``key`` in the ``meta`` table."""
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
