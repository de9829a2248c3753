"""A model of secondary indexes computed from the base table alone, and the checks that an
engine's indexes agree with it exactly (the property test and the crash test use it).

The model is DynamoDB's definition, written independently of the engine: an item is in an index
when it has every index key attribute with the type AttributeDefinitions gives it (a sparse
index leaves the others out); its entry holds the table's and the index's key attributes and the
projected ones (all of them for ALL); entries order by index partition, then index sort key in
DynamoDB order (numbers numerically, strings and binary by bytes), then table key.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

Item = dict[str, Any]


def order_of(value: dict[str, Any]) -> tuple[int, Any]:
    """A sort key giving DynamoDB's order of one S, N or B key value."""
    ((kind, raw),) = value.items()
    if kind == "N":
        return 0, Decimal(raw)
    if kind == "S":
        return 1, raw.encode("utf-8")
    return 2, bytes(raw)


def _key_names(schema: list[dict[str, str]]) -> tuple[str, str | None]:
    hash_name = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
    range_name = next((k["AttributeName"] for k in schema if k["KeyType"] == "RANGE"), None)
    return hash_name, range_name


def entry_of(table: dict[str, Any], index: dict[str, Any], item: Item) -> Item | None:
    """The entry ``item`` has in ``index`` of ``table`` (a DescribeTable description)."""
    types = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}
    names = [k["AttributeName"] for k in index["KeySchema"]]
    for name in names:
        value = item.get(name)
        if value is None or next(iter(value)) != types[name]:
            return None
    projection = index["Projection"]
    if projection["ProjectionType"] == "ALL":
        return dict(item)
    keep = set(names) | {k["AttributeName"] for k in table["KeySchema"]}
    keep |= set(projection.get("NonKeyAttributes", ()))
    return {k: v for k, v in item.items() if k in keep}


def sort_key(table: dict[str, Any], index: dict[str, Any], entry: Item) -> tuple[Any, ...]:
    """Index partition (every HASH attribute), index sort key (every RANGE attribute, in
    KeySchema order: a multi-attribute key orders attribute by attribute), then table key."""
    index_hashes = [k["AttributeName"] for k in index["KeySchema"] if k["KeyType"] == "HASH"]
    index_ranges = [k["AttributeName"] for k in index["KeySchema"] if k["KeyType"] == "RANGE"]
    table_hash, table_range = _key_names(table["KeySchema"])
    parts = [tuple(order_of(entry[name]) for name in index_hashes)]
    parts.append(tuple(order_of(entry[name]) for name in index_ranges))
    parts.append(order_of(entry[table_hash]))
    parts.append(order_of(entry[table_range]) if table_range else ())
    return tuple(parts)


def model(table: dict[str, Any], index: dict[str, Any], items: list[Item]) -> list[Item]:
    """Every entry of ``index``, in DynamoDB's index order."""
    entries = [e for e in (entry_of(table, index, item) for item in items) if e is not None]
    return sorted(entries, key=lambda e: sort_key(table, index, e))


def canonical(items: list[Item]) -> list[str]:
    return sorted(json.dumps(i, sort_keys=True, default=str) for i in items)


def scan_all(client: Any, table: str, index: str | None = None, **kw: Any) -> list[Item]:
    items: list[Item] = []
    params: dict[str, Any] = {"TableName": table, **kw}
    if index is not None:
        params["IndexName"] = index
    while True:
        page = client.scan(**params)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def indexes_of(description: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    return [(i, False) for i in description.get("GlobalSecondaryIndexes", ())] + [
        (i, True) for i in description.get("LocalSecondaryIndexes", ())
    ]


def assert_indexes_agree(client: Any, table: str) -> int:
    """Every index of ``table`` holds exactly the entries its model computes from the table's
    items (compared whole, projection included), and counts them in DescribeTable. Returns
    how many entries were checked."""
    description = client.describe_table(TableName=table)["Table"]
    items = scan_all(client, table, ConsistentRead=True)
    checked = 0
    for index, local in indexes_of(description):
        name = index["IndexName"]
        expected = model(description, index, items)
        stored = scan_all(client, table, name, **({"ConsistentRead": True} if local else {}))
        assert canonical(stored) == canonical(expected), name
        assert index["ItemCount"] == len(expected), name
        checked += len(expected)
    return checked
