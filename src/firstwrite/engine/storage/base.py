"""What every statement module of the storage package shares.

:class:`Statements` is the base of each module's reads and writes classes (``core``, ``ttl``,
``streams``, ``replication``, ``history``): it holds the one connection they all run on and
this process's :class:`Catalog` cache. ``access.py`` composes them into the ``Reader`` and
``Writer`` that ``Storage`` hands out.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

import msgpack

from ..errors import DynamoDBError, internal_error
from ..item_keys import IndexSchema, KeySchema, indexes_of
from ..values import Item

__all__ = ["Catalog", "StaleTable", "Statements", "TableRow", "pack", "unpack"]

_packers = threading.local()  # a Packer is not thread-safe; reusing one skips its setup


def pack(item: Item) -> bytes:
    packer = getattr(_packers, "packer", None)
    if packer is None:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    return packer.pack(item)  # type: ignore[no-any-return]


def unpack(body: bytes) -> Item:
    return msgpack.unpackb(body, raw=False)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class TableRow:
    """A catalog entry at one version: the table's storage id, its definition (DescribeTable's
    source), and the key schema and secondary indexes read from it. Storage builds one per
    (id, version) and reuses it.
    """

    id: int
    region: str
    name: str
    version: int
    definition: dict[str, Any]
    key_schema: KeySchema
    indexes: tuple[IndexSchema, ...] = ()

    @classmethod
    def build(
        cls, table_id: int, region: str, name: str, version: int, definition: dict[str, Any]
    ) -> TableRow:
        key_schema = KeySchema.of(definition)
        indexes = indexes_of(definition, key_schema) if "_index_ids" in definition else ()
        return cls(table_id, region, name, version, definition, key_schema, indexes)

    def index(self, name: str) -> IndexSchema | None:
        """The secondary index called ``name`` (any status), or ``None``."""
        for index in self.indexes:
            if index.name == name:
                return index
        return None


class StaleTable(DynamoDBError):
    """A cached catalog row no longer matches the database: refetch the table and retry.

    Raised by the ``*_checked`` statements before anything is written. Never reaches a client
    (the item operations retry); should it escape, it is an internal error.
    """

    def __init__(self) -> None:
        error = internal_error()
        super().__init__(error.code, error.message)


class Catalog:
    """This process's catalog cache, shared by every connection of one ``Storage``.

    ``rows``: one :class:`TableRow` per (table id, version); ids are never reused and versions
    only grow, so an entry never goes stale. ``current``: the row last seen per (region, name),
    which may be stale: it is only ever used through statements that verify it (core.py).
    """

    __slots__ = ("current", "rows")

    def __init__(self) -> None:
        self.rows: dict[tuple[int, int], TableRow] = {}
        self.current: dict[tuple[str, str], TableRow] = {}

    def forget(self, row: TableRow) -> None:
        """Drop ``row``'s table from :attr:`current` (it changed, or is about to)."""
        self.current.pop((row.region, row.name), None)

    def clear(self) -> None:
        """Forget everything: after a rollback, a row read inside the transaction may name an
        (id, version) that a later transaction reuses for another definition."""
        self.rows.clear()
        self.current.clear()


class Statements:
    """The base of every reads/writes class: one connection and the catalog cache."""

    def __init__(self, conn: sqlite3.Connection, catalog: Catalog) -> None:
        self._conn = conn
        self._catalog = catalog
