"""All SQL lives here: the engine's SQLite database, one module per concern, one convention.

* ``database.py``: :class:`Storage`, connections, transactions and group commit.
* ``chores.py``: background work (the TTL sweep) carried by the writers leading batches.
* ``schema.py``: every table definition (the whole SQL schema), its version, installed at open.
* ``base.py``: what the statement modules share (base class, catalog row, item body codec).
* ``core.py``: the core reads and writes: catalog, items, transaction tokens.
* ``indexes.py``, ``ttl.py``, ``streams.py``, ``replication.py``, ``history.py``,
  ``backups.py``: one module per feature's statements, each a reads class and a writes class
  over one connection.
* ``access.py``: the :class:`Reader` and :class:`Writer` that ``Storage`` hands out, ``core``
  plus every feature's statements, composed in one place.

A feature adds its tables to ``schema.py`` and its statements in a module of its own, joined to
:class:`Reader`/:class:`Writer` in ``access.py``; nothing outside this package runs SQL.
"""

from __future__ import annotations

from .access import AsOfReader, Reader, Writer
from .backups import BackupRow
from .base import StaleTable, TableRow, pack, unpack
from .database import Storage
from .indexes import IndexEntry, IndexView
from .replication import ReplicationEntry
from .streams import StreamRow

__all__ = [
    "AsOfReader",
    "BackupRow",
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
