"""What a Query or Scan reads: a table, or one of its secondary indexes (``IndexName``).

:func:`open_source` resolves the request to a :class:`Source` and applies DynamoDB's rules for
reading an index (found, readable, consistent reads on a GSI, Select and projections against the
index's projection); the Source then reads it the same way whichever it is: partitions and
scans in key order, ExclusiveStartKey positions, LastEvaluatedKey, and the capacity of what was
read. A local secondary index fetches from the table the attributes it does not project.

Messages: dynalite's ``actions/query.js``, ``actions/scan.js`` and their tests (which run against
DynamoDB); "does not project" is DynamoDB's own text (localstack issue #478).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import consumed
from ..errors import DynamoDBError, invalid_parameters, validation
from ..item_keys import IndexEntries, IndexSchema, KeySchema, key_of, parse_key
from ..storage import Reader, TableRow
from ..values import Item, item_size

if TYPE_CHECKING:
    from ..context import Context
    from ..expressions import Compiled

__all__ = ["Row", "Source", "open_source"]

# What reads yield: (base pk, base sk, size read, item).
Row = tuple[bytes, bytes, int, Item]

_START_KEY_INVALID = "The provided starting key is invalid"
_KEY_MISMATCH = "The provided key element does not match the schema"


def _requested(params: Mapping[str, Any], compiled: Compiled) -> set[str] | None:
    """The top-level attributes a request asks for (None: every attribute it can get)."""
    if compiled.projection is None:
        return None
    return {path[0] for path in compiled.projection.paths if isinstance(path[0], str)}


@dataclass
class Source:
    """A table or one of its indexes, read through ``reader`` (see the module notes)."""

    reader: Reader
    row: TableRow
    index: IndexSchema | None = None
    # A local index fetches each item from the table (the request wants what it lacks).
    fetch: bool = False
    fetched_bytes: int = field(default=0, init=False)

    @property
    def key(self) -> KeySchema:
        """The key schema the request's key conditions and segments are about."""
        return self.row.key_schema if self.index is None else self.index.key

    def _view(self) -> IndexEntries:
        assert self.index is not None
        return IndexEntries(self.row.id, self.row.key_schema, self.index)

    # --- ExclusiveStartKey ----------------------------------------------------------------------

    def start(
        self, params: Mapping[str, Any], *, wire: bool, query: bool
    ) -> tuple[bytes, ...] | None:
        """Validate ExclusiveStartKey; its position: ``(pk, sk)`` of a table, ``(ipk, isk,
        pk, sk)`` of an index."""
        raw = params.get("ExclusiveStartKey")
        if raw is None:
            return None
        table = self.row.key_schema
        if self.index is None:
            return _table_position(table, raw, wire=wire, query=query)
        ipk, isk = self.start_index_key(params, wire=wire)
        _, pk, sk = _table_position_parts(table, {n: raw[n] for n in table.names}, wire=wire)
        return ipk, isk, pk, sk

    def start_index_key(self, params: Mapping[str, Any], *, wire: bool) -> tuple[bytes, bytes]:
        """The index part of an index's ExclusiveStartKey, checked before the key condition
        (and the table part after it), in DynamoDB's order: exactly the table's and the
        index's key attributes, then the index key's types."""
        assert self.index is not None
        raw = params["ExclusiveStartKey"]
        index = self.index.key
        if not isinstance(raw, dict) or raw.keys() != self.row.key_schema.names | index.names:
            raise validation(_START_KEY_INVALID)
        try:
            _, ipk, isk = parse_key(index, {n: raw[n] for n in index.names}, wire=wire)
        except DynamoDBError as exc:
            if exc.code == "ValidationException" and exc.message == _KEY_MISMATCH:
                raise
            raise validation(f"{_START_KEY_INVALID}: {exc.message}") from None
        return ipk, isk

    def shaped(self, item: Item, select: str, compiled: Compiled) -> Item:
        """An item as the request gets it: an index fetching from its table for a filter only
        still returns just what it projects (Select ALL_PROJECTED_ATTRIBUTES)."""
        index = self.index
        if (
            index is not None
            and self.fetch
            and index.projected is not None
            and select == "ALL_PROJECTED_ATTRIBUTES"
            and compiled.projection is None
        ):
            return {k: v for k, v in item.items() if k in index.projected}
        return item

    def last_key(self, item: Item) -> Item:
        """LastEvaluatedKey: the table's key, and the index's key too when reading an index."""
        key = key_of(self.row.key_schema, item)
        if self.index is not None:
            key.update(key_of(self.index.key, item))
        return key

    # --- reads -----------------------------------------------------------------------------------

    def partition(
        self,
        pk: bytes,
        low: tuple[bytes, bool] | None,
        high: tuple[bytes, bool] | None,
        *,
        forward: bool,
        limit: int | None,
        start: tuple[bytes, ...] | None,
    ) -> Iterator[Row]:
        """One partition in key order, strictly after ``start`` (an index key range already
        narrowed to it by the caller for tables)."""
        if self.index is None:
            return self.reader.range(
                self.row.id, pk, low=low, high=high, forward=forward, limit=limit
            )
        after = None if start is None else (start[1], start[2], start[3])
        rows = self.reader.index_range(
            self._view(), pk, low=low, high=high, forward=forward, limit=limit, after=after
        )
        return self._fetched(rows)

    def scan(self, start: tuple[bytes, ...] | None, keep: Any = None) -> Iterator[Row]:
        if self.index is None:
            after = None if start is None else (start[0], start[1])
            return self.reader.scan_from(self.row.id, after, keep=keep)
        after4 = None if start is None else (start[0], start[1], start[2], start[3])
        return self._fetched(self.reader.index_scan_from(self._view(), after4, keep=keep))

    def _fetched(self, rows: Iterator[Row]) -> Iterator[Row]:
        if not self.fetch:
            return rows
        return self._fetch(rows)

    def _fetch(self, rows: Iterator[Row]) -> Iterator[Row]:
        try:
            for pk, sk, size, _entry in rows:
                item = self.reader.get(self.row.id, pk, sk)
                if item is None:  # unreachable: an entry and its item are written together
                    continue
                self.fetched_bytes += item_size(item)
                yield pk, sk, size, item
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()

    # --- capacity --------------------------------------------------------------------------------

    def charge(
        self, params: Mapping[str, Any], response: dict[str, Any], size: int, consistent: bool
    ) -> dict[str, Any]:
        """ConsumedCapacity of a page that read ``size`` bytes (of index entries, for an
        index: the table is charged for the items fetched)."""
        if params.get("ReturnConsumedCapacity") not in ("TOTAL", "INDEXES"):
            return response
        if self.index is None:
            units = consumed.read_units(size, consistent=consistent)
            return consumed.attach(response, params, self.row.name, units)
        index_units = consumed.read_units(size, consistent=consistent)
        table_units = 0.0
        if self.fetched_bytes:
            table_units = consumed.read_units(self.fetched_bytes, consistent=consistent)
        indexes = {(self.index.kind, self.index.name): index_units}
        return consumed.attach(response, params, self.row.name, table_units, indexes=indexes)


def _table_position_parts(schema: KeySchema, raw: Any, *, wire: bool) -> tuple[Item, bytes, bytes]:
    try:
        return parse_key(schema, raw, wire=wire)
    except DynamoDBError as exc:
        if exc.code != "ValidationException":
            raise
        raise validation(f"{_START_KEY_INVALID}: {exc.message}") from None


def _table_position(schema: KeySchema, raw: Any, *, wire: bool, query: bool) -> tuple[bytes, bytes]:
    """A table's ExclusiveStartKey: exactly its key attributes, of the schema's types."""
    try:
        _, pk, sk = parse_key(schema, raw, wire=wire)
    except DynamoDBError as exc:
        if exc.code != "ValidationException":
            raise
        if exc.message == _KEY_MISMATCH:
            if not query:  # Scan gives the reason
                raise validation(f"{_START_KEY_INVALID}: {_KEY_MISMATCH}") from None
            if isinstance(raw, dict) and raw.keys() == schema.names:
                # The key's attributes, of other types: DynamoDB's answer quoted in ScyllaDB's
                # test_query_exclusivestartkey_wrong_types (which passes on DynamoDB).
                raise validation(_KEY_MISMATCH) from None
            raise validation(_START_KEY_INVALID) from None
        raise validation(f"{_START_KEY_INVALID}: {exc.message}") from None
    if query and schema.range_name is None:
        # A Query of a table without a sort key reads one item: nothing can follow a start key
        # (DynamoDB's answer quoted in ScyllaDB's test_query_no_sort_key_exclusive_start_key).
        shown = ", ".join(
            f"{name}=AttributeValue: {{{kind}:{value}}}"
            for name, attribute in raw.items()
            for kind, value in attribute.items()
        )
        raise validation(
            f"The provided exclusive start key is invalid: ExclusiveStartKey: {{{shown}}}"
        )
    return pk, sk


def open_source(
    ctx: Context,
    r: Reader,
    row: TableRow,
    params: Mapping[str, Any],
    compiled: Compiled,
    *,
    consistent: bool,
) -> Source:
    """The Source of a Query or Scan on ``row`` (its ``IndexName``, if any), after DynamoDB's
    rules for reading an index. ``r`` is already the call's reader for this consistency."""
    name = params.get("IndexName")
    if name is None:
        return Source(r, row)
    index = row.index(name)
    if index is None or index.status == "DELETING":
        raise validation(f"The table does not have the specified index: {name}")
    if not index.local and consistent:
        raise validation("Consistent reads are not supported on global secondary indexes")
    if index.status == "CREATING":
        # DynamoDB's message, as applications match it while a new GSI backfills.
        raise validation(f"Cannot read from backfilling global secondary index: {name}")
    select = params.get("Select")
    requested = _requested(params, compiled)
    if select == "ALL_ATTRIBUTES" and index.projection != "ALL" and not index.local:
        raise invalid_parameters(
            f"Select type ALL_ATTRIBUTES is not supported for global secondary index {name} "
            "because its projection type is not ALL"
        )
    fetch = False
    if index.projection != "ALL":
        if select == "ALL_ATTRIBUTES":
            fetch = True  # a local index (a global one was refused above)
        elif requested is not None and not index.projects(requested):
            if not index.local:
                assert index.projected is not None
                missing = sorted(requested - index.projected)
                raise invalid_parameters(
                    f"Global secondary index {name} does not project [{', '.join(missing)}]"
                )
            fetch = True
        elif index.local and compiled.filter is not None:
            fetch = not index.projects(set(compiled.filter.top_level_names))
    return Source(r, row, index, fetch=fetch)
