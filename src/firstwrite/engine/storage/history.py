"""Item history, for stale (eventually consistent) reads by the stale-read fault.

The fault is fault injection's (``engine/features/faults/injector.py``). While it is on, every
write to a table in its scope records the item as it was before the write, stamped with the
write's time (:meth:`HistoryWrites.record_history`). The state of a key at instant ``v`` is then
the first recorded pre-image written after ``v``, or the current item when there is none.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator, Iterator
from typing import Any

from ..values import Item
from .base import Catalog, Statements, pack, unpack
from .core import CoreReads, key_bounds

__all__ = ["AsOfReads", "HistoryWrites"]


class HistoryWrites(Statements):
    """The item history, written."""

    def record_history(
        self,
        table_id: int,
        pk: bytes,
        sk: bytes,
        superseded_at: float,
        old: Item | None,
        old_size: int,
        keep_after: float,
    ) -> None:
        """Remember ``old`` as the key's state until ``superseded_at``; forget what no read
        needs."""
        self._conn.execute(
            "DELETE FROM item_history "
            "WHERE table_id = ? AND pk = ? AND sk = ? AND superseded_at <= ?",
            (table_id, pk, sk, keep_after),
        )
        self._conn.execute(
            "INSERT INTO item_history (table_id, pk, sk, superseded_at, size, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (table_id, pk, sk, superseded_at, old_size, None if old is None else pack(old)),
        )

    def clear_history(self) -> None:
        self._conn.execute("DELETE FROM item_history")


class AsOfReads(CoreReads):
    """Item reads answered as of ``instant`` (see the module notes).

    Only the item reads are time-shifted (``get``, ``range``, ``scan_from``, ``scan_after``);
    the catalog is read as it is now. ``Reader.as_of(instant)`` makes one (access.py).
    """

    def __init__(self, conn: sqlite3.Connection, catalog: Catalog, instant: float) -> None:
        super().__init__(conn, catalog)
        self.instant = instant

    def get(self, table_id: int, pk: bytes, sk: bytes = b"") -> Item | None:
        row = self._conn.execute(
            "SELECT body, 1 FROM item_history WHERE table_id = ? AND pk = ? AND sk = ? "
            "AND superseded_at > ? ORDER BY seq LIMIT 1",
            (table_id, pk, sk, self.instant),
        ).fetchone()
        if row is None:
            return super().get(table_id, pk, sk)
        return None if row[0] is None else unpack(row[0])

    def _merged(
        self, table_id: int, where: list[str], args: list[Any], order: str, limit: int | None
    ) -> Iterator[tuple[bytes, bytes, int, Item]]:
        # Current items not rewritten since the instant, plus the first pre-image recorded after
        # it of every rewritten key (absent when the key did not exist then).
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
        params: list[Any] = [table_id, self.instant, table_id, *args, *args]
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
        where, args = key_bounds(pk, low, high)
        where.insert(0, "1")
        return self._merged(table_id, where, args, "ASC" if forward else "DESC", limit)

    def scan_from(
        self,
        table_id: int,
        after: tuple[bytes, bytes] | None = None,
        *,
        keep: Callable[[bytes], bool] | None = None,
    ) -> Generator[tuple[bytes, bytes, int, Item], None, None]:
        where = ["1"] if after is None else ["(pk, sk) > (?, ?)"]
        args: list[Any] = [] if after is None else [after[0], after[1]]
        for row in self._merged(table_id, where, args, "ASC", None):
            if keep is None or keep(row[0]):
                yield row
