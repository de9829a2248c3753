"""The Reader and Writer that ``Storage`` hands out: the core statements plus each feature's.

Each statement module of the package contributes one reads class and one writes class over the
same connection (base.py); they are composed here, and only here, so a caller needs one object
for everything it reads or writes in one snapshot or transaction. A new feature's statements go
in a module of their own beside the others and join the two lists below.
"""

from __future__ import annotations

from .backups import BackupReads, BackupWrites
from .base import TableRow
from .core import CoreReads, CoreWrites
from .history import AsOfReads, HistoryWrites
from .indexes import AsOfIndexReads, IndexReads, IndexWrites
from .replication import ReplicationReads, ReplicationWrites
from .streams import StreamReads, StreamWrites
from .transfers import TransferReads, TransferWrites
from .ttl import TTLReads, TTLWrites

__all__ = ["AsOfReader", "Reader", "Writer"]


class Reader(
    CoreReads, IndexReads, TTLReads, StreamReads, ReplicationReads, BackupReads, TransferReads
):
    """Read access over one connection; every method is one consistent SQLite snapshot, or
    part of the caller's (``Storage.snapshot`` / ``Storage.write``)."""

    def as_of(self, instant: float) -> AsOfReader:
        """This reader with its item reads answered as of ``instant`` (the recorded item
        history, history.py): what a stale-read fault serves eventually consistent reads."""
        return AsOfReader(self._conn, self._catalog, instant)


class Writer(
    CoreWrites,
    IndexWrites,
    TTLWrites,
    StreamWrites,
    ReplicationWrites,
    HistoryWrites,
    BackupWrites,
    TransferWrites,
    Reader,
):
    """Read and write access inside one write transaction (see database.py)."""

    def drop_table(self, row: TableRow) -> None:
        """Drop a table's storage whole: its indexes' entries, then its items and catalog row
        (whoever drops it, DeleteTable or a replica's removal)."""
        self.index_forget_table(row.id)
        super().drop_table(row)


class AsOfReader(AsOfReads, AsOfIndexReads, Reader):
    """A :class:`Reader` whose item and index reads see the past (:class:`~.history.AsOfReads`,
    :class:`~.indexes.AsOfIndexReads`)."""
