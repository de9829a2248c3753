"""Multi-item operations: BatchGetItem and BatchWriteItem.

BatchGetItem reads every key in one SQLite snapshot. BatchWriteItem validates every request
first, then applies them all in one write transaction: atomic here, which DynamoDB allows (it
promises nothing weaker that a caller could rely on). Neither ever throttles, so UnprocessedKeys /
UnprocessedItems are empty except when BatchGetItem's 16 MB response limit cuts a batch short.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .. import consumed
from ..errors import (
    ITEM_TOO_LARGE,
    constraint,
    constraint_errors,
    resource_not_found,
    serialization,
    validation,
)
from ..item_keys import check_attribute_names, check_index_keys, item_key, parse_key
from ..storage import Reader, TableRow, Writer
from ..validation import (
    RETURN_CONSUMED_CAPACITY,
    RETURN_ITEM_COLLECTION_METRICS,
    TABLE_NAME_PATTERN,
    F,
    _check,
    _check_members,
)
from ..values import MAX_ITEM_SIZE, Item, item_size, parse_item_sized, parse_value
from ._common import compile_request, projected
from .tables import require_table

if TYPE_CHECKING:
    from ..context import Context

MAX_GET_KEYS = 100
MAX_WRITE_REQUESTS = 25
MAX_GET_RESPONSE_BYTES = 16 * 1024 * 1024

_DUPLICATES = "Provided list of item keys contains duplicates"
_TABLE_NAME_RULES = (
    "Map keys must satisfy constraint: [Member must have length less than or equal to 255, "
    "Member must have length greater than or equal to 3, "
    f"Member must satisfy regular expression pattern: {TABLE_NAME_PATTERN}]"
)

_TABLE_NAME = re.compile(TABLE_NAME_PATTERN)

_GET_TOP = (
    F("RequestItems", kind="map", required=True, min_len=1, max_len=100),
    RETURN_CONSUMED_CAPACITY,
)
_KEYS_AND_ATTRIBUTES = (
    F("Keys", kind="list", required=True, min_len=1),  # (its maximum: _check_get_entry)
    F("AttributesToGet", kind="list", min_len=1, element="str"),
    F("ConsistentRead", kind="bool"),
    F("ProjectionExpression", kind="str"),
    F("ExpressionAttributeNames", kind="map", element="str"),
)
_WRITE_TOP = (
    F("RequestItems", kind="map", required=True, min_len=1),
    RETURN_CONSUMED_CAPACITY,
    RETURN_ITEM_COLLECTION_METRICS,
)
_WRITE_REQUESTS = F(
    "WriteRequests",
    kind="list",
    members=(
        F("PutRequest", kind="struct", members=(F("Item", kind="map", required=True),)),
        F("DeleteRequest", kind="struct", members=(F("Key", kind="map", required=True),)),
    ),
)


def _check_request_items(
    params: Mapping[str, Any],
    top: tuple[F, ...],
    check_entry: Callable[[str, Any, list[str]], None],
) -> list[str]:
    """Constraint failures of the top level and of every table's entry, in AWS's one list."""
    errors: list[str] = []
    _check_members(params, top, "", errors)
    request_items = params.get("RequestItems")
    if not isinstance(request_items, dict):
        return errors
    bad_name = False
    for table, entry in request_items.items():
        bad_name = bad_name or not (3 <= len(table) <= 255 and _TABLE_NAME.fullmatch(table))
        check_entry(table, entry, errors)
    if bad_name:
        errors.insert(0, constraint(request_items, "requestItems", _TABLE_NAME_RULES))
    return errors


def _capacity_list(
    params: Mapping[str, Any],
    units: dict[str, float],
    *,
    read: bool | None = None,
    extras: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]] | None:
    mode = params.get("ReturnConsumedCapacity")
    if mode not in ("TOTAL", "INDEXES"):
        return None
    out = []
    for table, total in units.items():
        indexes = None if extras is None else consumed.written_to_indexes(extras, table)
        entry = consumed.capacity(mode, table, total, read=read, indexes=indexes)
        assert entry is not None
        out.append(entry)
    return out


# --- BatchGetItem ----------------------------------------------------------------------------


def _check_get_entry(table: str, entry: Any, errors: list[str]) -> None:
    if not isinstance(entry, dict):
        raise serialization("Start of structure or map found where not expected")
    keys = entry.get("Keys")
    if isinstance(keys, list) and len(keys) > MAX_GET_KEYS:
        # Worded the newer way, the model's names and no value: DynamoDB's answer recorded by
        # the conformance suite (tests/tier3/error-messages/batchGetItem.test.ts).
        errors.append(
            constraint(
                keys,
                f"RequestItems.{table}.member.Keys",
                f"Member must have length less than or equal to {MAX_GET_KEYS}",
                valueless=True,
            )
        )
    _check_members(entry, _KEYS_AND_ATTRIBUTES, f"requestItems.{table}.member.", errors)


def _require_request_items(params: Mapping[str, Any], operation: str) -> None:
    """An empty RequestItems is a missing one, in DynamoDB's words (the conformance suite's
    record, tests/tier3/error-messages/batchGetItem.test.ts and batchWriteItem.test.ts)."""
    if params.get("RequestItems") == {}:
        raise validation(f"The requestItems parameter is required for {operation}")


def batch_get_item(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    _require_request_items(params, "BatchGetItem")
    errors = _check_request_items(params, _GET_TOP, _check_get_entry)
    if errors:
        raise constraint_errors(errors)
    request_items: dict[str, dict[str, Any]] = params["RequestItems"]
    if sum(len(entry["Keys"]) for entry in request_items.values()) > MAX_GET_KEYS:
        raise validation("Too many items requested for the BatchGetItem call")
    compiled = {
        table: compile_request(entry, wire=ctx.wire, kinds=("ProjectionExpression",))
        for table, entry in request_items.items()
    }

    tables: list[int] = []  # (filled by read: with durability full, what it waits for)

    def read(r: Reader) -> tuple[dict[str, list[Item]], dict[str, Any], dict[str, float]]:
        # Validate every table and key before reading anything, as DynamoDB does.
        plans: list[tuple[str, TableRow, list[tuple[Item, bytes, bytes]]]] = []
        for table, entry in request_items.items():
            row = r.table(ctx.region, table)
            if row is None:
                # Key values, and keys repeated, are checked before the table is looked for
                # (dynalite's tests of DynamoDB).
                seen: set[str] = set()
                for key in entry["Keys"]:
                    for value in key.values() if isinstance(key, dict) else ():
                        parse_value(value, wire=ctx.wire)
                    text = json.dumps(key, sort_keys=True, default=str)
                    if text in seen:
                        raise validation(_DUPLICATES)
                    seen.add(text)
                raise resource_not_found()
            schema = row.key_schema
            keys = [parse_key(schema, key, wire=ctx.wire) for key in entry["Keys"]]
            if len({(pk, sk) for _key, pk, sk in keys}) != len(keys):
                raise validation(_DUPLICATES)
            plans.append((table, row, keys))
            tables.append(row.id)
        responses: dict[str, list[Item]] = {}
        unprocessed: dict[str, Any] = {}
        units: dict[str, float] = {}
        budget = MAX_GET_RESPONSE_BYTES
        for table, row, keys in plans:
            entry = request_items[table]
            consistent = bool(entry.get("ConsistentRead", False))
            found = responses.setdefault(table, [])
            for index, (_key, pk, sk) in enumerate(keys):
                item = r.get(row.id, pk, sk)
                size = item_size(item)
                if size > budget:
                    # The rest of this table's keys (and of later tables) come back unprocessed.
                    rest = {k: v for k, v in entry.items() if k != "Keys"}
                    rest["Keys"] = [key for key, _pk, _sk in keys[index:]]
                    unprocessed[table] = rest
                    budget = -1
                    break
                budget -= size
                units[table] = units.get(table, 0.0) + consumed.read_units(
                    size, consistent=consistent
                )
                if item is not None:
                    found.append(projected(item, compiled[table]))
        return responses, unprocessed, units

    responses, unprocessed, units = ctx.storage.snapshot(read, tables=tables)
    response: dict[str, Any] = {"Responses": responses, "UnprocessedKeys": unprocessed}
    capacity = _capacity_list(params, units)
    if capacity is not None:
        response["ConsumedCapacity"] = capacity
    return response


# --- BatchWriteItem --------------------------------------------------------------------------


def _check_write_entry(table: str, entry: Any, errors: list[str]) -> None:
    path = f"requestItems.{table}.member"
    if not isinstance(entry, list):
        raise serialization("Start of structure or map found where not expected")
    if not 1 <= len(entry) <= MAX_WRITE_REQUESTS:
        errors.append(
            constraint(
                {table: entry},
                "requestItems",
                "Map value must satisfy constraint: [Member must have length less than or "
                f"equal to {MAX_WRITE_REQUESTS}, Member must have length greater than or equal "
                "to 1]",
            )
        )
    _check(entry, _WRITE_REQUESTS, path, errors)


def _apply(
    ctx: Context, w: Writer, planned: list[tuple[TableRow, Item | None, bytes, bytes, int]]
) -> dict[str, float]:
    units: dict[str, float] = {}
    for row, item, pk, sk, size in planned:
        old = w.get(row.id, pk, sk)
        if item is not None:
            w.put(row.id, pk, sk, size, item)
        elif old is not None:
            w.delete(row.id, pk, sk)
        if ctx.engine.hooks.change_hooks and (item is not None or old is not None):
            ctx.engine.hooks.emit_change(ctx, w, row, old, item)
        units[row.name] = units.get(row.name, 0.0) + consumed.write_units(max(size, item_size(old)))
    return units


def batch_write_item(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    _require_request_items(params, "BatchWriteItem")
    errors = _check_request_items(params, _WRITE_TOP, _check_write_entry)
    if errors:
        raise constraint_errors(errors)
    request_items: dict[str, list[dict[str, Any]]] = params["RequestItems"]
    if sum(len(requests) for requests in request_items.values()) > MAX_WRITE_REQUESTS:
        raise validation("Too many items requested for the BatchWriteItem call")
    # Parse everything that does not need the schema outside the write lock.
    parsed: list[tuple[str, list[tuple[Item | None, Any]]]] = []
    for table, requests in request_items.items():
        entries: list[tuple[Item | None, Any]] = []
        for request in requests:
            put, delete = request.get("PutRequest"), request.get("DeleteRequest")
            if (put is None) == (delete is None):
                # DynamoDB's (odd) wording for a WriteRequest with zero or two operations.
                raise validation(
                    "Supplied AttributeValue has more than one datatypes set, must contain "
                    "exactly one of the supported datatypes"
                )
            if put is not None:
                item, size = parse_item_sized(put["Item"], wire=ctx.wire)
                check_attribute_names(item, size)
                entries.append((item, None))
            elif delete is not None:
                entries.append((None, delete["Key"]))
        parsed.append((table, entries))

    def write(w: Writer) -> dict[str, float]:
        # Validate the whole batch before the first change (storage/database.py: a write
        # function may raise only before it writes).
        planned: list[tuple[TableRow, Item | None, bytes, bytes, int]] = []
        seen: set[tuple[int, bytes, bytes]] = set()
        for table, entries in parsed:
            row = require_table(ctx, w, table)
            schema = row.key_schema
            for item, key in entries:
                if item is not None:
                    pk, sk = item_key(schema, item)
                    size = item_size(item)
                    if size > MAX_ITEM_SIZE:
                        raise validation(ITEM_TOO_LARGE)
                    if row.indexes:
                        check_index_keys(row.indexes, item)
                else:
                    _key, pk, sk = parse_key(schema, key, wire=ctx.wire)
                    size = 0
                if (row.id, pk, sk) in seen:
                    raise validation(_DUPLICATES)
                seen.add((row.id, pk, sk))
                planned.append((row, item, pk, sk, size))
        # A change hook may refuse a write to a table with a local secondary index after it
        # was made (the item collection limit): then the whole batch is undone.
        with w.guarded(ctx.engine.hooks.refusing(*{row.id: row for row, *_ in planned}.values())):
            return _apply(ctx, w, planned)

    units = ctx.storage.write(write)
    response: dict[str, Any] = {"UnprocessedItems": {}}
    capacity = _capacity_list(params, units, extras=ctx.extras)
    if capacity is not None:
        response["ConsumedCapacity"] = capacity
    if params.get("ReturnItemCollectionMetrics") == "SIZE":
        metrics = ctx.extras.get(consumed.COLLECTIONS)
        if metrics:
            response["ItemCollectionMetrics"] = metrics
    return response
