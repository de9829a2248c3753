"""Backups and point-in-time recovery's history: their statements.

They serve ``operations/backups.py``, ``operations/pitr.py`` and ``features/backups.py``.

* An on-demand backup (:meth:`BackupWrites.backup_create`) is a row of ``backups`` and a copy of
  the table's items in ``backup_items``, made by one ``INSERT ... SELECT`` in the caller's
  transaction: a consistent snapshot, and no item passes through Python.
* Point-in-time recovery keeps, per table, the pre-image of every change made while it is on
  (:meth:`BackupWrites.pitr_record`, called by a change hook in the write's own transaction).
  The table as of instant ``t`` is its items now, with every key changed after ``t`` put back to
  the first pre-image recorded after ``t`` (absent when that pre-image is ``NULL``). What this
  costs grows with the changes, never with the table: nothing is copied when recovery is
  switched on, and a restore reads only the changes made after its instant.
* A restore (:meth:`BackupWrites.backup_restore_items`, :meth:`BackupWrites.pitr_restore_items`)
  fills a new table's items the same way, in SQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..values import Item
from .base import Statements, pack, unpack

__all__ = ["BackupReads", "BackupRow", "BackupWrites"]


@dataclass(frozen=True, slots=True)
class BackupRow:
    """One backup: its storage id, where it comes from and what DescribeBackup shows of it
    (``description``: the stored BackupDetails and source table definition)."""

    id: int
    arn: str
    region: str
    table_name: str
    kind: str
    created_at: float
    expires_at: float | None
    description: dict[str, Any]


_COLUMNS = "id, arn, region, table_name, kind, created_at, expires_at, description"


def _backup(row: tuple[Any, ...]) -> BackupRow:
    backup_id, arn, region, table_name, kind, created_at, expires_at, description = row
    return BackupRow(
        backup_id, arn, region, table_name, kind, created_at, expires_at, json.loads(description)
    )


class BackupReads(Statements):
    """Backups and point-in-time history, read."""

    def backup(self, arn: str) -> BackupRow | None:
        row = self._conn.execute(f"SELECT {_COLUMNS} FROM backups WHERE arn = ?", (arn,)).fetchone()
        return None if row is None else _backup(row)

    def backups(self, region: str) -> list[BackupRow]:
        """Every backup of ``region``, oldest first (ListBackups' order)."""
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM backups WHERE region = ? ORDER BY created_at, id", (region,)
        ).fetchall()
        return [_backup(row) for row in rows]

    def pitr_oldest(self) -> float | None:
        """The time of the first change still recorded, of any table (``None``: none): the
        oldest one unless the clock was set back meanwhile."""
        row = self._conn.execute(
            "SELECT changed_at FROM pitr_changes ORDER BY seq LIMIT 1"
        ).fetchone()
        return None if row is None else float(row[0])

    def pitr_items(self, table_id: int, instant: float) -> Iterator[Item]:
        """Table ``table_id``'s items as they were at ``instant`` (the rule of the module
        notes), in no particular order, read in one pass: the items no change after
        ``instant`` touched, then the first pre-image of each key changed since (if present)."""
        changed = (
            "SELECT min(seq) FROM pitr_changes WHERE table_id = ? AND changed_at > ? "
            "GROUP BY pk, sk"
        )
        cursor = self._conn.execute(
            "SELECT body FROM items WHERE table_id = ? AND (pk, sk) NOT IN ("
            "SELECT pk, sk FROM pitr_changes WHERE table_id = ? AND changed_at > ?) "
            "UNION ALL "
            f"SELECT body FROM pitr_changes WHERE seq IN ({changed}) AND body IS NOT NULL",
            (table_id, table_id, instant, table_id, instant),
        )
        try:
            for (body,) in cursor:
                yield unpack(body)
        finally:
            cursor.close()

    def backups_expiring(self, now: float) -> bool:
        """Whether a backup has passed its expiry time."""
        return (
            self._conn.execute(
                "SELECT 1 FROM backups WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT 1",
                (now,),
            ).fetchone()
            is not None
        )


class BackupWrites(BackupReads):
    """Backups and point-in-time history, written (inside a write transaction)."""

    def backup_create(
        self,
        table_id: int,
        arn: str,
        region: str,
        table_name: str,
        kind: str,
        created_at: float,
        expires_at: float | None,
        description: dict[str, Any],
    ) -> int:
        """Record a backup of table ``table_id`` and copy its items, as they are in this
        transaction. Returns the backup's storage id."""
        cursor = self._conn.execute(
            "INSERT INTO backups (arn, region, table_name, kind, created_at, expires_at, "
            "description) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (arn, region, table_name, kind, created_at, expires_at, json.dumps(description)),
        )
        backup_id = cursor.lastrowid
        assert backup_id is not None
        self._conn.execute(
            "INSERT INTO backup_items (backup_id, pk, sk, size, body) "
            "SELECT ?, pk, sk, size, body FROM items WHERE table_id = ?",
            (backup_id, table_id),
        )
        return backup_id

    def backup_delete(self, backup_id: int) -> None:
        self._conn.execute("DELETE FROM backup_items WHERE backup_id = ?", (backup_id,))
        self._conn.execute("DELETE FROM backups WHERE id = ?", (backup_id,))

    def backups_expire(self, now: float) -> None:
        """Delete every backup past its expiry time (SYSTEM backups, after 35 days)."""
        ids = [
            r[0]
            for r in self._conn.execute(
                "SELECT id FROM backups WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
            ).fetchall()
        ]
        for backup_id in ids:
            self.backup_delete(backup_id)

    def backup_restore_items(self, backup_id: int, table_id: int) -> None:
        """Fill the (new, empty) table ``table_id`` with the items of a backup."""
        self._conn.execute(
            "INSERT INTO items (table_id, pk, sk, size, body) "
            "SELECT ?, pk, sk, size, body FROM backup_items WHERE backup_id = ?",
            (table_id, backup_id),
        )

    # point-in-time recovery --------------------------------------------------------------------

    def pitr_record(
        self,
        table_id: int,
        pk: bytes,
        sk: bytes,
        changed_at: float,
        old: Item | None,
        old_size: int,
    ) -> None:
        """Remember ``old`` (``None``: absent) as the key's state until ``changed_at``."""
        self._conn.execute(
            "INSERT INTO pitr_changes (table_id, pk, sk, changed_at, size, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (table_id, pk, sk, changed_at, old_size, None if old is None else pack(old)),
        )

    def pitr_forget(self, table_id: int) -> None:
        """Drop a table's history (recovery switched off, or the table deleted)."""
        self._conn.execute("DELETE FROM pitr_changes WHERE table_id = ?", (table_id,))

    def pitr_trim(self, table_id: int, before: float) -> None:
        """Drop a table's changes made before ``before``: no restore can need them."""
        self._conn.execute(
            "DELETE FROM pitr_changes WHERE table_id = ? AND changed_at < ?", (table_id, before)
        )

    def pitr_restore_items(self, source_id: int, table_id: int, instant: float) -> None:
        """Fill the (new, empty) table ``table_id`` with table ``source_id``'s items as they
        were at ``instant`` (see the module notes). Reads the source's items once and its
        changes made after ``instant``."""
        self._conn.execute(
            "INSERT INTO items (table_id, pk, sk, size, body) "
            "SELECT ?, pk, sk, size, body FROM items WHERE table_id = ?",
            (table_id, source_id),
        )
        changed = (
            "SELECT min(seq) FROM pitr_changes WHERE table_id = ? AND changed_at > ? "
            "GROUP BY pk, sk"
        )
        self._conn.execute(
            "DELETE FROM items WHERE table_id = ? AND (pk, sk) IN ("
            f"SELECT pk, sk FROM pitr_changes WHERE seq IN ({changed}))",
            (table_id, source_id, instant),
        )
        self._conn.execute(
            "INSERT INTO items (table_id, pk, sk, size, body) "
            f"SELECT ?, pk, sk, size, body FROM pitr_changes WHERE seq IN ({changed}) "
            "AND body IS NOT NULL",
            (table_id, source_id, instant),
        )
