"""TTL's statements: the expiry index of items and the backfill cursors.

The TTL feature (``engine/features/ttl.py``) keeps the index in each item's write transaction
and sweeps it."""

from __future__ import annotations

from .base import Statements

__all__ = ["TTLReads", "TTLWrites"]

# A table's first due entries, earliest first, read off the expiry index; "table_id = :t AND
# (pk, sk) IN" (not "(table_id, pk, sk) IN") makes SQLite look each one up by primary key.
_DUE = (
    "table_id = :t AND (pk, sk) IN (SELECT pk, sk FROM ttl_expiry INDEXED BY ttl_expiry_due "
    "WHERE expires < :before AND expires >= :not_before AND table_id = :t "
    "ORDER BY expires LIMIT :limit)"
)


class TTLReads(Statements):
    """The TTL expiry index and backfill cursors, read."""

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


class TTLWrites(TTLReads):
    """The TTL expiry index and backfill cursors, written."""

    def ttl_set(self, table_id: int, pk: bytes, sk: bytes, expires: float) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO ttl_expiry (table_id, pk, sk, expires) VALUES (?, ?, ?, ?)",
            (table_id, pk, sk, expires),
        )

    def ttl_set_many(self, table_id: int, entries: list[tuple[bytes, bytes, float]]) -> None:
        """:meth:`ttl_set` for many items of one table (``(pk, sk, expires)``), in one call."""
        self._conn.executemany(
            "INSERT OR REPLACE INTO ttl_expiry (table_id, pk, sk, expires) VALUES (?, ?, ?, ?)",
            [(table_id, pk, sk, expires) for pk, sk, expires in entries],
        )

    def ttl_clear(self, table_id: int, pk: bytes, sk: bytes) -> None:
        self._conn.execute(
            "DELETE FROM ttl_expiry WHERE table_id = ? AND pk = ? AND sk = ?", (table_id, pk, sk)
        )

    def ttl_delete_due(
        self, table_id: int, before: float, not_before: float, limit: int
    ) -> list[tuple[bytes, bytes, int, bytes]]:
        """Delete the items of ``table_id``'s first ``limit`` due entries (earliest first) and
        those entries, in two statements; the deleted items' (pk, sk, size, packed body).

        The sweeper's path for a table no other change hook watches: SQLite does the work of a
        slice with the GIL released, where a statement per item hands it back and forth."""
        args = {"t": table_id, "before": before, "not_before": not_before, "limit": limit}
        deleted = self._conn.execute(
            f"DELETE FROM items WHERE {_DUE} RETURNING pk, sk, size, body", args
        ).fetchall()
        # The same entries (the index did not change in between), and any whose item was gone.
        self._conn.execute(f"DELETE FROM ttl_expiry WHERE {_DUE}", args)
        return [(r[0], r[1], r[2], r[3]) for r in deleted]

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
