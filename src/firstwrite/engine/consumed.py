"""ConsumedCapacity, computed from item sizes as DynamoDB computes it.

Reads: ceil(size / 4 KB) units, halved for eventually consistent reads, doubled in transactions;
a missing item still costs one unit (half, eventually). Writes: ceil(size / 1 KB) units of the
larger of the old and new item, at least one, doubled in transactions.

Secondary indexes: a Query or Scan on an index is charged on the index entries it reads (and,
for a local index, on the table items it fetches); a write is charged, per index, for each entry
it puts or deletes (an index key change is a delete and a put), on the entry's size. The
indexes feature records a write's index units in the call's ``extras`` under
:data:`INDEX_UNITS`; the operations report them with :func:`capacity`. ``TOTAL`` sums table and
index units; ``INDEXES`` also lists them under ``Table``, ``GlobalSecondaryIndexes`` and
``LocalSecondaryIndexes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_READ_UNIT = 4096
_WRITE_UNIT = 1024

# Context.extras keys the indexes feature fills during a write (inside its transaction):
# {table name: {(capacity member, index name): write units}} and
# {table name: [ItemCollectionMetrics, ...]} (tables with local secondary indexes).
INDEX_UNITS = "firstwrite.index_units"
COLLECTIONS = "firstwrite.item_collections"

# Context.extras key: the caller did not ask for ConsumedCapacity, but an interceptor needs it
# (throughput buckets, contributor insights): the engine drops it from the answer once every
# finish hook has seen it (:func:`want_capacity`, :func:`hide_unasked`).
HIDE_CAPACITY = "firstwrite.hide_capacity"

# (ConsumedCapacity member, index name) -> units
IndexUnits = Mapping[tuple[str, str], float]


def read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    units = float(max(1, -(-size // _READ_UNIT)))
    if transactional:
        return units * 2
    return units if consistent else units / 2


def write_units(size: int, *, transactional: bool = False) -> float:
    units = float(max(1, -(-size // _WRITE_UNIT)))
    return units * 2 if transactional else units


def _units(units: float, read: bool | None) -> dict[str, float]:
    out = {"CapacityUnits": units}
    if read is True:
        out["ReadCapacityUnits"] = units
    elif read is False:
        out["WriteCapacityUnits"] = units
    return out


def capacity(
    mode: str | None,
    table: str,
    units: float,
    *,
    read: bool | None = None,
    indexes: IndexUnits | None = None,
) -> dict[str, Any] | None:
    """The ConsumedCapacity member for ReturnConsumedCapacity ``mode`` (None for NONE):
    ``units`` are the table's own, ``indexes`` each index's."""
    if mode not in ("TOTAL", "INDEXES"):
        return None
    total = units + sum(indexes.values()) if indexes else units
    out: dict[str, Any] = {"TableName": table, **_units(total, read)}
    if mode == "INDEXES":
        out["Table"] = _units(units, read)
        for (member, name), index_units in (indexes or {}).items():
            out.setdefault(member, {})[name] = _units(index_units, read)
    return out


def attach(
    response: dict[str, Any],
    params: Mapping[str, Any],
    table: str,
    units: float,
    *,
    read: bool | None = None,
    indexes: IndexUnits | None = None,
) -> dict[str, Any]:
    """Add ConsumedCapacity to ``response`` when the request asked for it."""
    mode = params.get("ReturnConsumedCapacity")
    if mode == "TOTAL" or mode == "INDEXES":
        response["ConsumedCapacity"] = capacity(mode, table, units, read=read, indexes=indexes)
    return response


def written_to_indexes(
    extras: Mapping[str, Any], table: str, *, transactional: bool = False
) -> dict[tuple[str, str], float] | None:
    """The index write units a write recorded for ``table`` (doubled in transactions)."""
    recorded = extras.get(INDEX_UNITS)
    if not recorded or table not in recorded:
        return None
    factor = 2.0 if transactional else 1.0
    return {key: units * factor for key, units in recorded[table].items()}


def add_index_units(
    extras: dict[str, Any], table: str, member: str, name: str, units: float
) -> None:
    """Record ``units`` written to index ``name`` of ``table`` by the current call."""
    per_table = extras.setdefault(INDEX_UNITS, {}).setdefault(table, {})
    per_table[(member, name)] = per_table.get((member, name), 0.0) + units


def want_capacity(ctx: Any) -> None:
    """Make this call report its ConsumedCapacity to the finish hooks (``ctx`` is the call's
    Context): asked for as TOTAL when the caller asked for none, and then hidden again from
    the answer by :func:`hide_unasked`, after the last hook."""
    asked = ctx.params.get("ReturnConsumedCapacity")
    if asked not in ("TOTAL", "INDEXES"):
        ctx.extras[HIDE_CAPACITY] = True
        ctx.params = {**ctx.params, "ReturnConsumedCapacity": "TOTAL"}


def hide_unasked(extras: Mapping[str, Any], response: dict[str, Any] | None) -> None:
    """Drop ConsumedCapacity from ``response`` if only an interceptor wanted it."""
    if response is not None and extras.get(HIDE_CAPACITY):
        response.pop("ConsumedCapacity", None)
