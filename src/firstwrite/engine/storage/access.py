"""The Reader and Writer that ``Storage`` hands out: the core statements plus each feature's.

Each statement module of the package contributes one reads class and one writes class over the
same connection (base.py); they are composed here, and only here, so a caller needs one object
for everything it reads or writes in one snapshot or transaction. A new feature's statements go
in a module of their own beside the others and join the two lists below.
"""

from __future__ import annotations

from .core import CoreReads, CoreWrites
from .history import AsOfReads, HistoryWrites
from .replication import ReplicationReads, ReplicationWrites
from .streams import StreamReads, StreamWrites
from .ttl import TTLReads, TTLWrites

__all__ = ["AsOfReader", "Reader", "Writer"]


class Reader(CoreReads, TTLReads, StreamReads, ReplicationReads):
    """Read access over one connection; every method is one consistent SQLite snapshot, or
    part of the caller's (``Storage.snapshot`` / ``Storage.write``)."""

    def as_of(self, instant: float) -> AsOfReader:
        """This reader with its item reads answered as of ``instant`` (the recorded item
        history, history.py): what a stale-read fault serves eventually consistent reads."""
        return AsOfReader(self._conn, self._catalog, instant)


class Writer(CoreWrites, TTLWrites, StreamWrites, ReplicationWrites, HistoryWrites, Reader):
    """Read and write access inside one write transaction (see database.py)."""


class AsOfReader(AsOfReads, Reader):
    """A :class:`Reader` whose item reads see the past (:class:`~.history.AsOfReads`)."""
