"""Global tables' statements: the replication queue and replicated tables' per-item versions.

Written and read by the regions feature (``engine/features/regions.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..values import Item
from .base import Statements, pack, unpack

__all__ = ["ReplicationEntry", "ReplicationReads", "ReplicationWrites"]


@dataclass(frozen=True, slots=True)
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


class ReplicationReads(Statements):
    """The replication queue and item versions, read."""

    def replication_due(
        self, target_region: str | None, up_to: float, limit: int
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
        rows = self._conn.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit)).fetchall()
        return [
            ReplicationEntry(s, t, src, dst, pk, sk, at, q, None if body is None else unpack(body))
            for s, t, src, dst, pk, sk, at, q, body in rows
        ]

    def replication_backlog(self) -> list[tuple[str, str, str, int, float]]:
        """``(table, source region, target region, entries, oldest queue time)`` per queue lane."""
        rows = self._conn.execute(
            "SELECT table_name, source_region, target_region, count(*), min(queued_at) "
            "FROM replication_queue GROUP BY table_name, source_region, target_region "
            "ORDER BY table_name, source_region, target_region"
        ).fetchall()
        return [(t, s, d, int(n), float(at)) for t, s, d, n, at in rows]

    def replication_oldest(self, target_region: str | None = None) -> float | None:
        """The queue time of the oldest queued entry (for one target region), or None."""
        if target_region is None:
            row = self._conn.execute("SELECT min(queued_at) FROM replication_queue").fetchone()
        else:
            row = self._conn.execute(
                "SELECT min(queued_at) FROM replication_queue WHERE target_region = ?",
                (target_region,),
            ).fetchone()
        return None if row[0] is None else float(row[0])

    def global_tables_exist(self) -> bool:
        """Is any table a replica of a global table, or any replication work queued?"""
        queued = self._conn.execute("SELECT 1 FROM replication_queue LIMIT 1").fetchone()
        if queued is not None:
            return True
        replicated = self._conn.execute(
            "SELECT 1 FROM tables WHERE definition LIKE '%\"Replicas\"%' LIMIT 1"
        ).fetchone()
        return replicated is not None

    def item_version(self, table_id: int, pk: bytes, sk: bytes) -> tuple[float, str] | None:
        row = self._conn.execute(
            "SELECT written_at, region FROM item_versions WHERE table_id = ? AND pk = ? AND sk = ?",
            (table_id, pk, sk),
        ).fetchone()
        return None if row is None else (float(row[0]), str(row[1]))


class ReplicationWrites(ReplicationReads):
    """The replication queue and item versions, written."""

    def replication_enqueue(
        self,
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
        self._conn.executemany(
            "INSERT INTO replication_queue "
            "(table_name, source_region, target_region, pk, sk, written_at, queued_at, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (table_name, source_region, t, pk, sk, written_at, queued_at, body)
                for t in target_regions
            ],
        )

    def replication_done(self, seqs: list[int]) -> None:
        self._conn.executemany("DELETE FROM replication_queue WHERE seq = ?", [(s,) for s in seqs])

    def replication_fork(self, table_name: str, from_target: str, to_target: str) -> None:
        """Copy the entries queued for one replica to a new one (writes its seed has not seen)."""
        self._conn.execute(
            "INSERT INTO replication_queue "
            "(table_name, source_region, target_region, pk, sk, written_at, queued_at, body) "
            "SELECT table_name, source_region, ?, pk, sk, written_at, queued_at, body "
            "FROM replication_queue "
            "WHERE table_name = ? AND target_region = ? ORDER BY seq",
            (to_target, table_name, from_target),
        )

    def replication_purge(self, table_name: str, target_region: str) -> None:
        self._conn.execute(
            "DELETE FROM replication_queue WHERE table_name = ? AND target_region = ?",
            (table_name, target_region),
        )

    def set_item_version(
        self, table_id: int, pk: bytes, sk: bytes, written_at: float, region: str
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO item_versions (table_id, pk, sk, written_at, region) "
            "VALUES (?, ?, ?, ?, ?)",
            (table_id, pk, sk, written_at, region),
        )

    def copy_table_items(self, source_id: int, target_id: int) -> None:
        """Seed a new replica: every item of ``source_id`` and its version (one statement each).

        The one statement here on the core ``items`` table: seeding is replication's own."""
        self._conn.execute(
            "INSERT OR REPLACE INTO items (table_id, pk, sk, size, body) "
            "SELECT ?, pk, sk, size, body FROM items WHERE table_id = ?",
            (target_id, source_id),
        )
        self._conn.execute(
            "INSERT OR REPLACE INTO item_versions (table_id, pk, sk, written_at, region) "
            "SELECT ?, pk, sk, written_at, region FROM item_versions WHERE table_id = ?",
            (target_id, source_id),
        )

    def drop_item_versions(self, table_id: int) -> None:
        self._conn.execute("DELETE FROM item_versions WHERE table_id = ?", (table_id,))
