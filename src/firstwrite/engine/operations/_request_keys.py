"""What a request names: the tables it touches and the partition keys of its items.

For the throughput buckets and the ``hot_key`` fault, and for contributor insights' counts.

Partition key values are compared as one string each (:func:`key_text`: ``S:abc``, ``N:12``),
the form the throughput buckets and the ``hot_key`` fault key partitions by.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "READ_OPERATIONS",
    "WRITE_OPERATIONS",
    "hot_key_scope",
    "key_text",
    "key_texts",
    "partition_keys",
    "tables_of",
]

# The item reads and writes (the calls throughput is charged for).
WRITE_OPERATIONS = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
)
READ_OPERATIONS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})


def tables_of(operation: str, params: Mapping[str, Any]) -> list[str]:
    """The table names a request touches."""
    name = params.get("TableName")
    if isinstance(name, str):
        return [name]
    items = params.get("RequestItems")
    if isinstance(items, Mapping):
        return [str(t) for t in items]
    transact = params.get("TransactItems")
    names: list[str] = []
    if isinstance(transact, list):
        for element in transact:
            if isinstance(element, Mapping):
                for action in element.values():
                    if isinstance(action, Mapping) and isinstance(action.get("TableName"), str):
                        names.append(action["TableName"])
    return names


def key_text(value: Any) -> str | None:
    """A partition key's AttributeValue as one comparable string (``S:abc``, ``N:12``), or
    ``None`` if it is not one."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    ((kind, inner),) = value.items()
    return f"{kind}:{inner if isinstance(inner, str) else json.dumps(inner, sort_keys=True)}"


def key_texts(key: str | Mapping[str, Any]) -> frozenset[str]:
    """The key texts ``key`` matches: a string matches an ``S`` or ``N`` key of that text, an
    AttributeValue itself only. Raises ValueError for anything else."""
    if isinstance(key, str):
        return frozenset({f"S:{key}", f"N:{key}"})
    text = key_text(key)
    if text is None:
        raise ValueError(f"key must be a string or an AttributeValue, not {key!r}")
    return frozenset({text})


def partition_keys(
    operation: str, params: Mapping[str, Any], table: str, hash_name: str
) -> list[str]:
    """The partition key values (:func:`key_text`) of the items a request names in ``table``,
    once per item: single-item operations, batches and transactions (a Query or Scan names
    none)."""
    found: list[str] = []

    def add(item: Any) -> None:
        if isinstance(item, Mapping):
            text = key_text(item.get(hash_name))
            if text is not None:
                found.append(text)

    if params.get("TableName") == table:
        if operation == "PutItem":
            add(params.get("Item"))
        elif operation in ("GetItem", "UpdateItem", "DeleteItem"):
            add(params.get("Key"))
    requests = params.get("RequestItems")
    if isinstance(requests, Mapping):
        entry = requests.get(table)
        if operation == "BatchWriteItem" and isinstance(entry, list):
            for write in entry:
                if isinstance(write, Mapping):
                    put, delete = write.get("PutRequest"), write.get("DeleteRequest")
                    add(put.get("Item") if isinstance(put, Mapping) else None)
                    add(delete.get("Key") if isinstance(delete, Mapping) else None)
        elif operation == "BatchGetItem" and isinstance(entry, Mapping):
            keys = entry.get("Keys")
            for key in keys if isinstance(keys, list) else ():
                add(key)
    transact = params.get("TransactItems")
    if isinstance(transact, list):
        for element in transact:
            for action in element.values() if isinstance(element, Mapping) else ():
                if isinstance(action, Mapping) and action.get("TableName") == table:
                    add(action.get("Item") if "Item" in action else action.get("Key"))
    return found


def hot_key_scope(
    key: str | Mapping[str, Any] | None, units: float | None, *, counted: bool
) -> tuple[str | dict[str, Any] | None, frozenset[str] | None, float | None]:
    """A ``hot_key`` fault's ``(key as given, its key texts, units)``, checked: a key, a ceiling
    or both; a ceiling (``units``) is never ``counted`` (``count=``, ``rate=``). Raises
    ValueError."""
    if key is None and units is None:
        raise ValueError(
            "hot_key faults need key= (a partition key value), units= (a partition ceiling "
            "per second), or both"
        )
    if units is not None:
        if counted:
            raise ValueError("units= is a ceiling: give it without count= or rate=")
        units = float(units)
        if math.isnan(units) or units < 0:
            raise ValueError(f"units must be a number >= 0, not {units!r}")
    if key is None:
        return None, None, units
    return (key if isinstance(key, str) else dict(key)), key_texts(key), units
