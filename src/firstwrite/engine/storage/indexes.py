"""Secondary indexes' statements: index entries, their storage ids and the backfill cursors.

An index entry is one row of ``index_items``: the index key ``(ipk, isk)``, the base table key
``(pk, sk)`` and the projected item, keys in the order-preserving encoding (:mod:`.item_keys`). A
Query on an index is therefore the same kind of statement as a Query on a table: one range of
one B-tree, in key order. Entries with equal index keys follow in base key order.

The indexes feature (``engine/features/indexes/maintenance.py``) keeps the entries in each item's own write
transaction and builds a new index from its table in chunks; Query and Scan read them
(``operations/query.py``). ``AsOfIndexReads`` answers index reads as of an instant, from the item
history (``history.py``), so stale-read faults apply to indexes as they do to tables.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Iterator
from typing import Protocol

from ..values import Item
from .base import Statements, pack, unpack
from .core import column_bounds

__all__ = ["AsOfIndexReads", "IndexEntry", "IndexReads", "IndexView", "IndexWrites"]

# (ipk, isk, pk, sk, size, projected item): one index entry.
IndexEntry = tuple[bytes, bytes, bytes, bytes, int, Item]
# What index reads yield, like the items reads: (base pk, base sk, entry size, projected item).
Row = tuple[bytes, bytes, int, Item]


class IndexView(Protocol):
    """An index as its reads need it: its storage id, its table's, and how an item of that
    table becomes an entry (only the as-of reads, which rebuild entries from past items)."""

    @property
    def id(self) -> int: ...

    @property
    def table_id(self) -> int: ...

    def entry(self, item: Item) -> IndexEntry | None: ...


class IndexReads(Statements):
    """Index entries, read; each method is one SQLite statement unless the caller runs it
    inside a transaction."""

    def _partition(
        self,
        index_id: int,
        ipk: bytes,
        low: tuple[bytes, bool] | None,
        high: tuple[bytes, bool] | None,
        forward: bool,
        limit: int | None,
        after: tuple[bytes, bytes, bytes] | None,
    ) -> Iterator[IndexEntry]:
        where, args = column_bounds("isk", low, high)
        where[:0] = ["index_id = ?", "ipk = ?"]
        args[:0] = [index_id, ipk]
        if after is not None:
            where.append(f"(isk, pk, sk) {'>' if forward else '<'} (?, ?, ?)")
            args.extend(after)
        order = "ASC" if forward else "DESC"
        sql = (
            f"SELECT isk, pk, sk, size, body FROM index_items WHERE {' AND '.join(where)} "
            f"ORDER BY isk {order}, pk {order}, sk {order}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        cursor = self._conn.execute(sql, args)
        try:
            for isk, pk, sk, size, body in cursor:
                yield ipk, isk, pk, sk, size, unpack(body)
        finally:
            cursor.close()

    def index_range(
        self,
        index: IndexView,
        ipk: bytes,
        *,
        low: tuple[bytes, bool] | None = None,
        high: tuple[bytes, bool] | None = None,
        forward: bool = True,
        limit: int | None = None,
        after: tuple[bytes, bytes, bytes] | None = None,
    ) -> Iterator[Row]:
        """One index partition in (isk, pk, sk) order (reversed when not ``forward``).

        ``low``/``high`` bound the index sort key as ``(bytes, inclusive)``; ``after`` is an
        ExclusiveStartKey's (isk, pk, sk): only entries strictly after it in reading order.
        The same statement shape, and the same single generator, as ``CoreReads.range``.
        """
        where, args = column_bounds("isk", low, high)
        where[:0] = ["index_id = ?", "ipk = ?"]
        args[:0] = [index.id, ipk]
        if after is not None:
            where.append(f"(isk, pk, sk) {'>' if forward else '<'} (?, ?, ?)")
            args.extend(after)
        order = "ASC" if forward else "DESC"
        sql = (
            f"SELECT pk, sk, size, body FROM index_items WHERE {' AND '.join(where)} "
            f"ORDER BY isk {order}, pk {order}, sk {order}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        for pk, sk, size, body in self._conn.execute(sql, args):
            yield pk, sk, size, unpack(body)

    def _entries(
        self, index_id: int, after: tuple[bytes, bytes, bytes, bytes] | None
    ) -> Iterator[IndexEntry]:
        if after is None:
            cursor = self._conn.execute(
                "SELECT ipk, isk, pk, sk, size, body FROM index_items WHERE index_id = ? "
                "ORDER BY ipk, isk, pk, sk",
                (index_id,),
            )
        else:
            cursor = self._conn.execute(
                "SELECT ipk, isk, pk, sk, size, body FROM index_items WHERE index_id = ? "
                "AND (ipk, isk, pk, sk) > (?, ?, ?, ?) ORDER BY ipk, isk, pk, sk",
                (index_id, *after),
            )
        try:
            for ipk, isk, pk, sk, size, body in cursor:
                yield ipk, isk, pk, sk, size, unpack(body)
        finally:
            cursor.close()

    def index_scan_from(
        self,
        index: IndexView,
        after: tuple[bytes, bytes, bytes, bytes] | None = None,
        *,
        keep: Callable[[bytes], bool] | None = None,
    ) -> Generator[Row, None, None]:
        """An index's entries in (ipk, isk, pk, sk) order, strictly after ``after``, read
        lazily; ``keep(ipk)`` selects a parallel-scan segment."""
        for ipk, _isk, pk, sk, size, item in self._entries(index.id, after):
            if keep is None or keep(ipk):
                yield pk, sk, size, item

    def index_stats(self, index_id: int) -> tuple[int, int]:
        """(entry count, total entry bytes) of an index."""
        count, total = self._conn.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM index_items WHERE index_id = ?",
            (index_id,),
        ).fetchone()
        return int(count), int(total)

    def index_dump(self, index_id: int) -> list[IndexEntry]:
        """Every entry of an index in key order (consistency checks and tests)."""
        return list(self._entries(index_id, None))

    def index_backfills(self) -> list[tuple[int, int, tuple[bytes, bytes] | None]]:
        """Indexes still being built: (index id, table id, base-table scan cursor)."""
        rows = self._conn.execute(
            "SELECT index_id, table_id, after_pk, after_sk FROM index_backfill ORDER BY index_id"
        ).fetchall()
        return [(r[0], r[1], None if r[2] is None else (r[2], r[3])) for r in rows]

    def collection_size(self, table_id: int, index_ids: tuple[int, ...], pk: bytes) -> int:
        """The bytes of an item collection: the table's items with partition key ``pk`` and
        their entries in the given (local secondary) indexes."""
        marks = ", ".join("?" * len(index_ids))
        row = self._conn.execute(
            "SELECT (SELECT coalesce(sum(size), 0) FROM items WHERE table_id = ? AND pk = ?) + "
            f"(SELECT coalesce(sum(size), 0) FROM index_items WHERE index_id IN ({marks}) "
            "AND ipk = ?)",
            (table_id, pk, *index_ids, pk),
        ).fetchone()
        return int(row[0])


class IndexWrites(IndexReads):
    """Index entries, storage ids and backfill cursors, written."""

    def index_allocate(self, table_id: int, name: str) -> int:
        """A new storage id for index ``name`` of a table (never reused)."""
        cursor = self._conn.execute(
            "INSERT INTO index_catalog (table_id, name) VALUES (?, ?)", (table_id, name)
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def index_put(
        self, index_id: int, ipk: bytes, isk: bytes, pk: bytes, sk: bytes, size: int, item: Item
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO index_items (index_id, ipk, isk, pk, sk, size, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (index_id, ipk, isk, pk, sk, size, pack(item)),
        )

    def index_delete(self, index_id: int, ipk: bytes, isk: bytes, pk: bytes, sk: bytes) -> None:
        self._conn.execute(
            "DELETE FROM index_items WHERE index_id = ? AND ipk = ? AND isk = ? AND pk = ? "
            "AND sk = ?",
            (index_id, ipk, isk, pk, sk),
        )

    def index_copy(self, source_id: int, target_id: int) -> None:
        """Give index ``target_id`` every entry of ``source_id`` (a new replica's indexes)."""
        self._conn.execute(
            "INSERT OR REPLACE INTO index_items (index_id, ipk, isk, pk, sk, size, body) "
            "SELECT ?, ipk, isk, pk, sk, size, body FROM index_items WHERE index_id = ?",
            (target_id, source_id),
        )

    def index_drop_chunk(self, index_id: int, limit: int) -> int:
        """Delete up to ``limit`` entries of an index being deleted; returns how many."""
        cursor = self._conn.execute(
            "DELETE FROM index_items WHERE index_id = ?1 AND (ipk, isk, pk, sk) IN ("
            "SELECT ipk, isk, pk, sk FROM index_items WHERE index_id = ?1 LIMIT ?2)",
            (index_id, limit),
        )
        return cursor.rowcount

    def index_forget(self, index_ids: tuple[int, ...] | list[int]) -> None:
        """Drop indexes whole: their entries, storage ids and backfill cursors."""
        for index_id in index_ids:
            self._conn.execute("DELETE FROM index_items WHERE index_id = ?", (index_id,))
            self._conn.execute("DELETE FROM index_backfill WHERE index_id = ?", (index_id,))
            self._conn.execute("DELETE FROM index_catalog WHERE id = ?", (index_id,))

    def index_forget_table(self, table_id: int) -> None:
        """Drop every index of a table (the table is being dropped)."""
        ids = [
            r[0]
            for r in self._conn.execute(
                "SELECT id FROM index_catalog WHERE table_id = ?", (table_id,)
            ).fetchall()
        ]
        self.index_forget(ids)

    def index_backfill_set(
        self, index_id: int, table_id: int, after: tuple[bytes, bytes] | None
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO index_backfill (index_id, table_id, after_pk, after_sk) "
            "VALUES (?, ?, ?, ?)",
            (index_id, table_id, *(after or (None, None))),
        )

    def index_backfill_done(self, index_id: int) -> None:
        self._conn.execute("DELETE FROM index_backfill WHERE index_id = ?", (index_id,))


class AsOfIndexReads(IndexReads):
    """Index reads answered as of ``self.instant`` (set by ``history.AsOfReads``).

    The entries of items not rewritten since the instant are read as stored; the entries of
    rewritten items are rebuilt from their recorded pre-images (``item_history``) by the
    index's own :meth:`IndexView.entry`, then merged in key order.
    """

    instant: float

    def _past_items(self, table_id: int) -> dict[tuple[bytes, bytes], Item | None]:
        rows = self._conn.execute(
            "SELECT pk, sk, body FROM item_history WHERE seq IN ("
            "SELECT min(seq) FROM item_history WHERE table_id = ? AND superseded_at > ? "
            "GROUP BY pk, sk)",
            (table_id, self.instant),
        ).fetchall()
        return {(pk, sk): None if body is None else unpack(body) for pk, sk, body in rows}

    def _past_entries(
        self, index: IndexView, past: dict[tuple[bytes, bytes], Item | None]
    ) -> list[IndexEntry]:
        entries = []
        for item in past.values():
            entry = None if item is None else index.entry(item)
            if entry is not None:
                entries.append(entry)
        return entries

    def index_range(
        self,
        index: IndexView,
        ipk: bytes,
        *,
        low: tuple[bytes, bool] | None = None,
        high: tuple[bytes, bool] | None = None,
        forward: bool = True,
        limit: int | None = None,
        after: tuple[bytes, bytes, bytes] | None = None,
    ) -> Iterator[Row]:
        past = self._past_items(index.table_id)
        if not past:
            return super().index_range(
                index, ipk, low=low, high=high, forward=forward, limit=limit, after=after
            )
        rows = [
            e
            for e in self._partition(index.id, ipk, low, high, forward, None, after)
            if (e[2], e[3]) not in past
        ]
        for entry in self._past_entries(index, past):
            position = entry[1:4]
            if entry[0] != ipk or (low is not None and not _above(entry[1], low)):
                continue
            if high is not None and not _above(high[0], (entry[1], high[1])):
                continue
            if after is not None and not (position > after if forward else position < after):
                continue
            rows.append(entry)
        rows.sort(key=lambda e: e[1:4], reverse=not forward)
        chosen = rows if limit is None else rows[:limit]
        return iter([(e[2], e[3], e[4], e[5]) for e in chosen])

    def index_scan_from(
        self,
        index: IndexView,
        after: tuple[bytes, bytes, bytes, bytes] | None = None,
        *,
        keep: Callable[[bytes], bool] | None = None,
    ) -> Generator[Row, None, None]:
        past = self._past_items(index.table_id)
        current = (e for e in self._entries(index.id, after) if (e[2], e[3]) not in past)
        extra = sorted(
            (e for e in self._past_entries(index, past) if after is None or e[:4] > after),
            key=lambda e: e[:4],
        )
        merged = sorted(itertools.chain(current, extra), key=lambda e: e[:4]) if extra else current
        for ipk, _isk, pk, sk, size, item in merged:
            if keep is None or keep(ipk):
                yield pk, sk, size, item


def _above(value: bytes, bound: tuple[bytes, bool]) -> bool:
    """Whether ``value`` is at or past ``bound`` (``(bytes, inclusive)``) from below."""
    return value > bound[0] or (bound[1] and value == bound[0])
