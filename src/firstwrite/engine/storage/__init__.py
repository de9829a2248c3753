"""All SQL lives here: the engine's SQLite database, one module per concern, one convention.

Layout
------
``database.py``
    :class:`Storage`: connections, transactions and group commit; the concurrency model.
``chores.py``
    Background work that the writers leading batches carry in their transactions (the TTL
    sweep).
``schema.py``
    Every table definition (the whole SQL schema) and its version.
``base.py``
    What the statement modules share: their base class (one connection, the catalog cache),
    the catalog row, the item body codec.
``core.py``
    The core reads and writes: catalog, items, transaction tokens.
``indexes.py``, ``ttl.py``, ``streams.py``, ``replication.py``, ``history.py``
    One module per feature's statements (secondary index entries, TTL's expiry index, stream
    records, the replication queue and item versions, the item history behind stale reads),
    each a reads class and a writes class over the same connection, in the same style as
    ``core.py``.
``access.py``
    The :class:`Reader` and :class:`Writer` that ``Storage`` hands out: ``core`` plus every
    feature's statements, composed in one place.

A feature adds its tables to ``schema.py`` and its statements in a module of its own, joined to
:class:`Reader`/:class:`Writer` in ``access.py``; nothing outside this package runs SQL.
"""

from __future__ import annotations

from .access import AsOfReader, Reader, Writer
from .base import StaleTable, TableRow, pack, unpack
from .database import Storage
from .indexes import IndexEntry, IndexView
from .replication import ReplicationEntry
from .streams import StreamRow

__all__ = [
    "AsOfReader",
    "IndexEntry",
    "IndexView",
    "Reader",
    "ReplicationEntry",
    "StaleTable",
    "Storage",
    "StreamRow",
    "TableRow",
    "Writer",
    "pack",
    "unpack",
]
