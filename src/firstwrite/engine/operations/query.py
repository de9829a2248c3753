"""Key-ordered reads: Query (one partition) and Scan (the whole table, or one segment of it).

Both read items in key order inside one SQLite snapshot and stop at the first of: ``Limit``
items evaluated, 1 MB of item data read, or the end of the range. The filter runs on the items
read, so ``ScannedCount`` counts what was evaluated and ``Count`` what matched; capacity is
charged on the bytes read, summed and rounded up to 4 KB once per page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, invalid_parameters, validation
from ..expressions import evaluate, key_condition_range
from ..expressions.legacy import COMPARISON_OPERATORS
from ..item_keys import KeySchema, composite_part, encode_key_value, key_bytes, key_parts, successor
from ..storage import Reader
from ..validation import (
    CONSISTENT_READ,
    RETURN_CONSUMED_CAPACITY,
    TABLE_NAME,
    TABLE_NAME_PATTERN,
    F,
    check,
)
from ..values import AttributeValue, Item, compare, describe, value_type
from ._common import check_combination, compile_request, projected
from ._source import Row, Source, open_source
from .tables import require_table

if TYPE_CHECKING:
    from ..context import Context
    from ..expressions import Compiled

# A page stops once the items read would pass 1 MB (a single larger item is still returned).
MAX_PAGE_BYTES = 1024 * 1024

# A legacy condition's operator, reported with the request's other constraints.
_CONDITION = (F("ComparisonOperator", required=True, enum=COMPARISON_OPERATORS),)
_SELECT = F(
    "Select", enum=("SPECIFIC_ATTRIBUTES", "COUNT", "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES")
)
_INDEX_NAME = F("IndexName", min_len=3, max_len=255, pattern=TABLE_NAME_PATTERN)
_ATTRIBUTES_TO_GET = F("AttributesToGet", kind="list", min_len=1, element="str")
_COMMON = (
    TABLE_NAME,
    _INDEX_NAME,
    _SELECT,
    _ATTRIBUTES_TO_GET,
    F("Limit", kind="int", min=1),
    CONSISTENT_READ,
)
# Query words its Limit the newer way (``Value at 'Limit' ...``), Scan the older (``Value '0' at
# 'limit' ...``): DynamoDB's answers recorded by the conformance suite (tests/tier3/
# error-messages/query.test.ts and scan.test.ts).
_QUERY_COMMON = (
    TABLE_NAME,
    _INDEX_NAME,
    _SELECT,
    _ATTRIBUTES_TO_GET,
    F("Limit", kind="int", min=1, model_name=True),
    CONSISTENT_READ,
)
_TAIL = (
    F("ExclusiveStartKey", kind="map"),
    RETURN_CONSUMED_CAPACITY,
    F("ProjectionExpression", kind="str"),
    F("FilterExpression", kind="str"),
)
_NAMES_VALUES = (
    F("ExpressionAttributeNames", kind="map", element="str"),
    F("ExpressionAttributeValues", kind="map"),
)
# Member order follows the service model, which is the order AWS lists constraint failures in.
_QUERY = (
    *_QUERY_COMMON,
    F("KeyConditions", kind="map", members=_CONDITION),
    F("QueryFilter", kind="map", members=_CONDITION),
    F("ConditionalOperator", enum=("OR", "AND")),  # DynamoDB prints them in this order
    F("ScanIndexForward", kind="bool"),
    *_TAIL,
    F("KeyConditionExpression", kind="str"),
    *_NAMES_VALUES,
)
_SCAN = (
    *_COMMON,
    F("ScanFilter", kind="map", members=_CONDITION),
    F("ConditionalOperator", enum=("OR", "AND")),  # DynamoDB prints them in this order
    *_TAIL,
    *_NAMES_VALUES,
    F("TotalSegments", kind="int", min=1, max=1_000_000),
    F("Segment", kind="int", min=0, max=999_999),
)


_QUERY_KINDS = ("KeyConditionExpression", "FilterExpression", "ProjectionExpression")
_SCAN_KINDS = ("FilterExpression", "ProjectionExpression")


# --- request checks --------------------------------------------------------------------------


def _check_select(params: Mapping[str, Any], *, query: bool) -> str:
    """The effective Select, after DynamoDB's Select/projection rules (checked before any read)."""
    select = params.get("Select")
    # Query reports these inside the constraint envelope, Scan bare (both verified on AWS).
    prefix = "1 validation error detected: " if query else ""
    for member in ("ProjectionExpression", "AttributesToGet"):
        if params.get(member) is not None and select not in (None, "SPECIFIC_ATTRIBUTES"):
            what = "only the Count" if select == "COUNT" else select
            raise validation(f"{prefix}Cannot specify the {member} when choosing to get {what}")
    if (
        select == "SPECIFIC_ATTRIBUTES"
        and params.get("ProjectionExpression") is None
        and params.get("AttributesToGet") is None
    ):
        raise validation(
            f"{prefix}Must specify the AttributesToGet or ProjectionExpression when choosing to "
            "get SPECIFIC_ATTRIBUTES"
        )
    if select == "ALL_PROJECTED_ATTRIBUTES" and params.get("IndexName") is None:
        raise validation(
            f"{prefix}ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName"
        )
    if select is not None:
        return str(select)
    # Without Select or a projection: everything a table has, or everything an index projects.
    if params.get("ProjectionExpression") is not None or params.get("AttributesToGet") is not None:
        return "SPECIFIC_ATTRIBUTES"
    return "ALL_ATTRIBUTES" if params.get("IndexName") is None else "ALL_PROJECTED_ATTRIBUTES"


def _source(
    ctx: Context, r: Reader, name: str, consistent: bool, compiled: Compiled, tables: list[int]
) -> Source:
    """What a Query or Scan reads: the table or index (``_source.py``) through the call's
    reader (an eventually consistent read goes through the reader hook: faults may serve it
    from the past). The table's id is added to ``tables`` (what the read depends on)."""
    r = ctx.reader(r, consistent=consistent)
    row = require_table(ctx, r, name)
    tables.append(row.id)
    return open_source(ctx, r, row, ctx.params, compiled, consistent=consistent)


# --- the sort-key range of a Query -----------------------------------------------------------


@dataclass(frozen=True)
class SortRange:
    """A sort-key condition as byte bounds over the encoded keys (see :mod:`.item_keys`)."""

    low: tuple[bytes, bool] | None = None
    high: tuple[bytes, bool] | None = None

    def contains(self, sk: bytes) -> bool:
        if self.low is not None and (sk < self.low[0] or (sk == self.low[0] and not self.low[1])):
            return False
        return not (
            self.high is not None
            and (sk > self.high[0] or (sk == self.high[0] and not self.high[1]))
        )

    def after(self, sk: bytes, *, forward: bool) -> SortRange:
        """This range narrowed to the keys strictly after ``sk`` in reading order."""
        if forward:
            return SortRange((sk, False), self.high)
        return SortRange(self.low, (sk, False))


def sort_range(operator: str, operands: tuple[AttributeValue, ...]) -> SortRange:
    """Bounds for ``sk <op> :v``, ``sk BETWEEN :a AND :b`` or ``begins_with(sk, :p)``."""
    encoded = [encode_key_value(v) for v in operands]
    if operator == "=":
        return SortRange((encoded[0], True), (encoded[0], True))
    if operator == "<":
        return SortRange(None, (encoded[0], False))
    if operator == "<=":
        return SortRange(None, (encoded[0], True))
    if operator == ">":
        return SortRange((encoded[0], False), None)
    if operator == ">=":
        return SortRange((encoded[0], True), None)
    if operator == "BETWEEN":
        return SortRange((encoded[0], True), (encoded[1], True))
    if operator == "begins_with":
        # S and B keys encode as their own bytes, so a prefix is the half-open byte range
        # [prefix, successor(prefix)).
        upper = successor(encoded[0])
        return SortRange((encoded[0], True), None if upper is None else (upper, False))
    raise AssertionError(f"unexpected sort key operator {operator!r}")


def composite_range(
    prefix: bytes, condition: tuple[str, tuple[AttributeValue, ...]] | None
) -> SortRange:
    """Bounds over a multi-attribute sort key (``keys.composite_part``): the keys that begin
    with ``prefix`` (the attributes given by =) and whose next attribute meets ``condition``."""

    def upper(key: bytes) -> tuple[bytes, bool] | None:
        after = successor(key)  # the first key past every key that begins with ``key``
        return None if after is None else (after, False)

    def starting(key: bytes) -> SortRange:
        return SortRange((key, True) if key else None, upper(key) if key else None)

    if condition is None:
        return starting(prefix)
    operator, operands = condition
    if operator == "begins_with":
        raw = encode_key_value(operands[0])
        return starting(prefix + composite_part(raw, terminated=False))
    keys = [prefix + composite_part(encode_key_value(v)) for v in operands]
    whole = starting(prefix)
    if operator == "=":
        return starting(keys[0])
    if operator == "<":
        return SortRange(whole.low, (keys[0], False))
    if operator == "<=":
        return SortRange(whole.low, upper(keys[0]))
    if operator == ">":
        past = upper(keys[0])
        return SortRange(None if past is None else (past[0], True), whole.high)
    if operator == ">=":
        return SortRange((keys[0], True), whole.high)
    if operator == "BETWEEN":
        return SortRange((keys[0], True), upper(keys[1]))
    raise AssertionError(f"unexpected sort key operator {operator!r}")


def _range_condition(range_condition: Any) -> tuple[str, tuple[AttributeValue, ...]] | None:
    """The expressions package's range condition as ``(operator, operands)``."""
    if range_condition is None:
        return None
    operator = range_condition.operator
    return str(operator), tuple(range_condition.operands)


# --- paging ----------------------------------------------------------------------------------


@dataclass
class _Page:
    items: list[Item]
    scanned: int
    size: int
    last: Item | None  # the item to resume after, when the page stopped early


def _read_page(rows: Iterator[Row], limit: int | None, compiled: Compiled) -> _Page:
    items: list[Item] = []
    scanned = size = 0
    last: Item | None = None
    try:
        for _pk, _sk, item_bytes, item in rows:
            if scanned and size + item_bytes > MAX_PAGE_BYTES:
                return _Page(items, scanned, size, last)
            scanned += 1
            size += item_bytes
            last = item
            if compiled.filter is None or evaluate(compiled.filter, item):
                items.append(item)
            # DynamoDB does not look ahead: reaching Limit always yields a LastEvaluatedKey.
            if limit is not None and scanned >= limit:
                return _Page(items, scanned, size, last)
        return _Page(items, scanned, size, None)
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


def _response(
    ctx: Context, source: Source, page: _Page, compiled: Compiled, select: str, consistent: bool
) -> dict[str, Any]:
    response: dict[str, Any] = {}
    if select != "COUNT":
        response["Items"] = [
            projected(source.shaped(item, select, compiled), compiled) for item in page.items
        ]
    response["Count"] = len(page.items)
    response["ScannedCount"] = page.scanned
    if page.last is not None:
        response["LastEvaluatedKey"] = source.last_key(page.last)
    return source.charge(ctx.params, response, page.size, consistent)


def _filter_on_key(compiled: Compiled, schema: KeySchema) -> None:
    """Query filters may not name key attributes (Scan filters may)."""
    if compiled.filter is None:
        return
    for name in sorted(compiled.filter.top_level_names):
        if name in schema.names:
            # DynamoDB names the parameter the filter came from.
            label = "QueryFilter" if compiled.filter.text == "QueryFilter" else "Filter Expression"
            raise validation(
                f"{label} can only contain non-primary key attributes: "
                f"Primary key attribute: {name}"
            )


# --- Query -----------------------------------------------------------------------------------


def query(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _QUERY)
    select = _check_select(params, query=True)
    if params.get("KeyConditionExpression") is None and params.get("KeyConditions") is None:
        check_combination(params, _QUERY_KINDS)  # DynamoDB's order (dynalite validations)
        raise validation(
            "Either the KeyConditions or KeyConditionExpression parameter must be specified in "
            "the request."
        )
    compiled = compile_request(params, wire=ctx.wire, kinds=_QUERY_KINDS)
    name = params["TableName"]
    limit = params.get("Limit")
    forward = params.get("ScanIndexForward", True) is not False
    consistent = bool(params.get("ConsistentRead", False))

    tables: list[int] = []  # (filled by read: with durability full, what it waits for)

    def read(r: Reader) -> dict[str, Any]:
        source = _source(ctx, r, name, consistent, compiled, tables)
        schema = source.key
        if source.index is not None and params.get("ExclusiveStartKey") is not None:
            source.start_index_key(params, wire=ctx.wire)  # before the key condition
        assert compiled.key_condition is not None  # KeyConditionExpression is required above
        hash_keys = tuple(n for n, _ in schema.hash_attributes)
        range_attributes = schema.range_attributes
        range_keys = tuple(n for n, _ in range_attributes)
        counted = None  # an index's count takes in its table's key attributes (match_schema)
        if source.index is not None:
            counted = len({*hash_keys, *range_keys, *source.row.key_schema.names})
        match = key_condition_range(compiled.key_condition, hash_keys, range_keys, counted=counted)
        condition = _range_condition(match.condition)
        # The attribute the condition is on: the one after the sort-key attributes given by =.
        range_type = range_attributes[len(match.equal)][1] if condition is not None else None
        if condition is not None and condition[0] == "begins_with" and range_type == "N":
            raise validation(
                "Invalid KeyConditionExpression: Incorrect operand type for operator or function; "
                "operator or function: begins_with, operand type: N"
            )
        given = (*match.hash_values, *match.equal)
        kinds = [kind for _, kind in (*schema.hash_attributes, *range_attributes)]
        if any(value_type(v) != kind for v, kind in zip(given, kinds, strict=False)) or (
            condition is not None and any(value_type(v) != range_type for v in condition[1])
        ):
            raise invalid_parameters("Condition parameter type does not match schema type")
        if condition is not None and condition[0] == "BETWEEN":
            low, high = condition[1]
            if (compare(low, high) or 0) > 0:
                raise validation(
                    "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to "
                    "be greater than or equal to lower bound; lower bound operand: AttributeValue: "
                    f"{describe(low)}, upper bound operand: AttributeValue: {describe(high)}"
                )
        _filter_on_key(compiled, schema)
        # key_bytes applies the key checks (empty value, size limit) to the values given.
        pk = key_bytes(
            schema.hash_attributes,
            dict(zip(hash_keys, match.hash_values, strict=True)),
            is_hash=True,
        )
        if len(range_attributes) > 1:
            # The attributes given by = as the start of every stored key they match.
            equal = dict(zip((n for n, _ in range_attributes), match.equal, strict=False))
            parts = key_parts(range_attributes[: len(equal)], equal, is_hash=False)
            bounds = composite_range(b"".join(map(composite_part, parts)), condition)
        else:
            bounds = SortRange() if condition is None else sort_range(*condition)
        start = source.start(params, wire=ctx.wire, query=True)
        if start is not None:
            start_pk, start_sk = start[0], start[1]
            if start_pk != pk:
                raise validation(
                    "The provided starting key is outside query boundaries based on provided "
                    "condition"
                )
            if condition is not None and not bounds.contains(start_sk):
                raise validation("The provided starting key does not match the range key predicate")
            if source.index is None:
                bounds = bounds.after(start_sk, forward=forward)
        rows = source.partition(
            pk, bounds.low, bounds.high, forward=forward, limit=limit, start=start
        )
        page = _read_page(rows, limit, compiled)
        return _response(ctx, source, page, compiled, select, consistent)

    return ctx.storage.snapshot(read, tables=tables)


# --- Scan ------------------------------------------------------------------------------------

_START_KEY_INVALID = "The provided starting key is invalid"


def segment_of(pk: bytes, total: int) -> int:
    """The parallel-scan segment of a partition: a stable hash of its key, cut into ranges.

    Every item of a partition lands in the same segment and an item never changes segment, so
    the segments of one ``TotalSegments`` are disjoint and together cover the table.
    """
    digest = int.from_bytes(hashlib.blake2b(pk, digest_size=8).digest(), "big")
    return (digest * total) >> 64


def _check_segments(params: Mapping[str, Any]) -> tuple[int, int] | None:
    segment, total = params.get("Segment"), params.get("TotalSegments")
    if segment is not None and total is None:
        raise validation(
            "The TotalSegments parameter is required but was not present in the request when "
            "Segment parameter is present"
        )
    if total is None:
        return None
    if segment is None:
        raise validation(
            "The Segment parameter is required but was not present in the request when "
            "parameter TotalSegments is present"
        )
    if segment >= total:
        raise validation(
            "The Segment parameter is zero-based and must be less than parameter TotalSegments: "
            f"Segment: {segment} is not less than TotalSegments: {total}"
        )
    return int(segment), int(total)


def scan(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _SCAN)
    select = _check_select(params, query=False)
    try:
        segments = _check_segments(params)
    except DynamoDBError:
        check_combination(params, _SCAN_KINDS)  # DynamoDB's order (dynalite validations)
        raise
    compiled = compile_request(params, wire=ctx.wire, kinds=_SCAN_KINDS)
    name = params["TableName"]
    limit = params.get("Limit")
    consistent = bool(params.get("ConsistentRead", False))

    tables: list[int] = []  # (filled by read: with durability full, what it waits for)

    def read(r: Reader) -> dict[str, Any]:
        source = _source(ctx, r, name, consistent, compiled, tables)
        start = source.start(params, wire=ctx.wire, query=False)
        keep = None
        if segments is not None and segments[1] > 1:
            segment, total = segments
            if start is not None and segment_of(start[0], total) != segment:
                # dynalite actions/scan.js (its tests run against DynamoDB).
                raise validation(
                    f"{_START_KEY_INVALID}: Invalid ExclusiveStartKey. Please use "
                    "ExclusiveStartKey with correct Segment. "
                    f"TotalSegments: {total} Segment: {segment}"
                )
            keep = lambda pk: segment_of(pk, total) == segment  # noqa: E731
        page = _read_page(source.scan(start, keep), limit, compiled)
        return _response(ctx, source, page, compiled, select, consistent)

    return ctx.storage.snapshot(read, tables=tables)
