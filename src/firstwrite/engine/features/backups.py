"""Point-in-time recovery's history, and the SYSTEM backup of a deleted table.

* A change hook records, for every write to a table with point-in-time recovery on, the item as
  it was before the write, stamped with the write's time (the engine clock), in the write's own
  transaction (``storage/backups.py``): a restore to any instant of the recovery window sees
  exactly the writes committed up to it, before or after a crash. Tables without recovery are
  not watched and keep the single-statement fast paths.
* A table hook makes the SYSTEM backup DynamoDB keeps of a table deleted with recovery on, in
  DeleteTable's transaction, and drops the table's history.
* A sweep hook drops history older than each table's recovery period, and SYSTEM backups past
  their expiry time.

The operations are ``operations/backups.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..context import Context, Feature
from ..item_keys import item_key
from ..operations.backups import DAY_S, system_backup
from ..storage import TableRow, Writer
from ..values import Item, item_size

if TYPE_CHECKING:
    from ..context import Host

__all__ = ["Backups"]


def _recorded(row: TableRow) -> bool:
    return "_pitr" in row.definition


def _on_change(ctx: Context, w: Writer, row: TableRow, old: Item | None, new: Item | None) -> None:
    if "_pitr" not in row.definition:
        return
    item = new if new is not None else old
    if item is None:
        return
    pk, sk = item_key(row.key_schema, item)
    w.pitr_record(row.id, pk, sk, ctx.now(), old, 0 if old is None else item_size(old))


def _on_table(
    ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
) -> TableRow:
    if action == "delete" and "_pitr" in row.definition:
        system_backup(ctx, w, row)
        w.pitr_forget(row.id)
    return row


class Backups(Feature):
    """``engine.backups``: point-in-time recovery's history and the backups' upkeep."""

    _engine: Host  # set by install()

    def install(self, engine: Host) -> None:
        self._engine = engine
        engine.hooks.add_change_hook(_on_change, _recorded)
        engine.hooks.add_table_hook(_on_table)
        engine.hooks.add_sweep_hook(self.purge)

    def purge(self, now: float) -> None:
        """Drop what no restore can need any more: each table's changes older than its
        recovery period, and backups past their expiry time. Reads first: an idle purge
        takes no write lock."""
        storage = self._engine.storage
        oldest = storage.read(lambda r: r.pitr_oldest())
        stale = oldest is not None and oldest < now - DAY_S  # the shortest period is a day
        if stale or storage.read(lambda r: r.backups_expiring(now)):
            storage.write(lambda w: self._purge(w, now))

    def _purge(self, w: Writer, now: float) -> None:
        for row in w.tables():
            pitr = row.definition.get("_pitr")
            if pitr is not None:
                w.pitr_trim(row.id, now - pitr["days"] * DAY_S)
        w.backups_expire(now)
