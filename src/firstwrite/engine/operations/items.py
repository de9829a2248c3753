"""Single-item operations: PutItem, GetItem, UpdateItem, DeleteItem.

Each write is one short transaction: read the current item, evaluate the condition, write.
Under SQLite's write lock that sequence is linearizable (storage/database.py). Two shortcuts,
both linearizable too: a condition that already fails may be answered from one read, without
the lock (failed_already); and insert-if-absent on a table no hook watches is one statement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .. import consumed
from ..errors import (
    ITEM_TOO_LARGE,
    DynamoDBError,
    conditional_check_failed,
    internal_error,
    validation,
)
from ..expressions import Compiled, apply_update, evaluate, project, refuse_key_paths
from ..item_keys import (
    IndexSchema,
    KeySchema,
    check_attribute_names,
    check_index_keys,
    item_key,
    parse_key,
)
from ..storage import Reader, TableRow, Writer
from ..validation import (
    CONSISTENT_READ,
    EXPRESSION_MAPS,
    RETURN_CONSUMED_CAPACITY,
    RETURN_ITEM_COLLECTION_METRICS,
    RETURN_VALUES_ON_CCF,
    TABLE_NAME,
    F,
    check,
)
from ..values import MAX_ITEM_SIZE, Item, item_size, parse_item_sized, parse_value
from ._common import check_combination, compile_request, projected, return_values_put_delete
from .tables import with_table
from .write_route import put_route

if TYPE_CHECKING:
    from ..context import Context

T = TypeVar("T")

RETURN_VALUES = F("ReturnValues", enum=("ALL_NEW", "UPDATED_OLD", "ALL_OLD", "NONE", "UPDATED_NEW"))
_WRITE_COMMON = (
    TABLE_NAME,
    F("ConditionExpression", kind="str"),
    RETURN_VALUES,
    RETURN_CONSUMED_CAPACITY,
    RETURN_ITEM_COLLECTION_METRICS,
    RETURN_VALUES_ON_CCF,
    F("ConditionalOperator", enum=("OR", "AND")),  # DynamoDB prints them in this order
    *EXPRESSION_MAPS,
)
_PUT = (F("Item", kind="map", required=True), *_WRITE_COMMON)
_DELETE = (F("Key", kind="map", required=True), *_WRITE_COMMON)
_UPDATE = (F("Key", kind="map", required=True), F("UpdateExpression", kind="str"), *_WRITE_COMMON)
_GET = (
    TABLE_NAME,
    F("Key", kind="map", required=True),
    CONSISTENT_READ,
    RETURN_CONSUMED_CAPACITY,
    F("ProjectionExpression", kind="str"),
    F("AttributesToGet", kind="list", min_len=1),
    F("ExpressionAttributeNames", kind="map", element="str"),
)

UPDATE_TOO_LARGE = "Item size to update has exceeded the maximum allowed size"


def failed_condition(params: Any, old: Item | None) -> DynamoDBError:
    """ConditionalCheckFailedException, carrying the old item when ALL_OLD was asked for."""
    wants_item = params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
    return conditional_check_failed(old if wants_item and old is not None else None)


def check_condition(compiled: Compiled, params: Any, old: Item | None) -> None:
    """Raise ConditionalCheckFailedException unless the request's condition holds on ``old``."""
    if compiled.condition is not None and not evaluate(compiled.condition, old):
        raise failed_condition(params, old)


def updated_item(
    compiled: Compiled,
    schema: KeySchema,
    key: Item,
    old: Item | None,
    indexes: tuple[IndexSchema, ...] = (),
) -> tuple[Item, int] | None:
    """The item an UpdateExpression makes of ``old`` (or of the bare key), and its size;
    refused if the table's ``indexes`` could not hold it.

    ``None`` when there is no item and the update only removes or deletes attributes: as on
    DynamoDB, that creates nothing. An update with no action at all (no UpdateExpression, or
    an empty ``AttributeUpdates``) still creates the item with its key, as DynamoDB's
    UpdateItem "adds a new item to the table if it does not already exist" (API reference).
    """
    if old is None and compiled.update is not None:
        plan = compiled.update.plan
        if not plan.sets and not plan.adds and (plan.removes or plan.deletes):
            refuse_key_paths(plan, schema.names)  # (a key is refused all the same)
            return None
    base = old if old is not None else dict(key)
    new = (
        apply_update(compiled.update, base, key_names=schema.names)
        if compiled.update
        else dict(base)
    )
    size = item_size(new)
    if size > MAX_ITEM_SIZE:
        raise validation(UPDATE_TOO_LARGE)
    check_attribute_names(new, size)
    if indexes:
        check_index_keys(indexes, new, update=True)
    return new, size


def failed_already(
    ctx: Context, compiled: Compiled, params: Any, row: TableRow, pk: bytes, sk: bytes
) -> DynamoDBError | None:
    """The ConditionalCheckFailedException of a condition that already fails, found without
    the lock, or None: then :func:`conditional_write` decides.

    A failed condition writes nothing, so one consistent read is all it needs: the failure
    takes effect at that read, inside the call, which keeps it linearizable (the write
    evaluates the condition again under the lock in any case). That read is wasted on a write
    that goes through, so it is only made when the last write with the same condition on the
    same table failed: duplicates of a create-if-absent keep failing, optimistic-lock updates
    keep succeeding. The hint only ever changes the cost of a call, never its answer.

    The error is returned, for the operation to raise at its top: an exception costs every
    frame it leaves a traceback entry and a frame object, and a duplicate request is a hot
    path of its own.
    """
    condition = compiled.condition
    if condition is None or not ctx.engine.route_hints.failed_last(row.id, condition.text):
        return None
    old = ctx.engine.storage.get_checked(row, pk, sk)
    if evaluate(condition, old):
        return None
    return failed_condition(params, old)


def conditional_write(
    ctx: Context,
    compiled: Compiled,
    params: Any,
    row: TableRow,
    pk: bytes,
    sk: bytes,
    write: Callable[[Writer], T],
    *,
    autocommit: bool = False,
) -> T:
    """``storage.write(write, autocommit=...)``, keeping the hint :func:`failed_already`
    reads: whether the last write with this condition on this table failed it."""
    condition = compiled.condition
    engine = ctx.engine
    if condition is None:
        return engine.storage.write(write, autocommit=autocommit)
    hints = engine.route_hints
    try:
        result = engine.storage.write(write, autocommit=autocommit)
    except DynamoDBError as error:
        if error.code == "ConditionalCheckFailedException":
            hints.record(row.id, condition.text, failed=True)
        raise
    hints.record(row.id, condition.text, failed=False)
    return result


def _insert_if_absent(
    w: Writer, row: TableRow, pk: bytes, sk: bytes, size: int, item: Item, params: Any
) -> None:
    """PutItem with ``attribute_not_exists(<key>)`` as one statement: its own transaction in
    autocommit, or part of the caller's (where the retry below never happens)."""
    for _ in range(_VANISHED_RETRIES):
        if w.insert_checked(row, pk, sk, size, item):
            return
        if params.get("ReturnValuesOnConditionCheckFailure") != "ALL_OLD":
            raise failed_condition(params, None)
        old = w.get_checked(row, pk, sk)
        if old is not None:
            raise failed_condition(params, old)
        # Deleted between the two statements (autocommit, another engine): insert again.
    raise internal_error()


_VANISHED_RETRIES = 8


def put_item(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _PUT)
    return_values = (
        "NONE" if params.get("ReturnValues") is None else return_values_put_delete(params)
    )
    try:
        item, size = parse_item_sized(params["Item"], wire=ctx.wire)
    except DynamoDBError:
        # DynamoDB checks the members' combination before the item's values (dynalite's
        # validations/putItem.js and its tests); only a refused item pays for the check.
        check_combination(params, ("ConditionExpression",))
        raise
    check_attribute_names(item, size)
    compiled = compile_request(params, wire=ctx.wire, kinds=("ConditionExpression",))
    condition = compiled.condition
    absent, absent_or, text = (
        (None, None, "")
        if condition is None
        else (condition.absent, condition.absent_or, condition.text)
    )

    def attempt(row: TableRow) -> Item | DynamoDBError | None:
        schema = row.key_schema
        pk, sk = item_key(schema, item)
        if size > MAX_ITEM_SIZE:
            raise validation(ITEM_TOO_LARGE)
        if row.indexes:
            check_index_keys(row.indexes, item)
        # With the failed-condition hint: a duplicate after a duplicate is one read.
        failed = failed_already(ctx, compiled, params, row, pk, sk)
        if failed is not None:
            return failed
        quiet = ctx.engine.hooks.quiet(row)
        route = put_route(
            absent,
            absent_or,
            text,
            (schema.hash_name, schema.range_name),
            row.id,
            ctx.engine.route_hints,
            quiet,
        )
        if_absent, insert_first = route.if_absent, route.insert_first
        if if_absent and route.autocommit:
            conditional_write(
                ctx,
                compiled,
                params,
                row,
                pk,
                sk,
                lambda w: _insert_if_absent(w, row, pk, sk, size, item, params),
                autocommit=True,
            )
            return None
        if (
            insert_first
            and route.autocommit
            and ctx.storage.write(
                lambda w: w.insert_checked(row, pk, sk, size, item), autocommit=True
            )
        ):
            return None  # else an item is there: the general path below evaluates the rest

        refusing = _refusing(ctx, row)

        def write(w: Writer) -> Item | None:
            with w.guarded(refusing):
                if if_absent:
                    _insert_if_absent(w, row, pk, sk, size, item, params)
                    old = None
                elif insert_first and not quiet and w.insert_checked(row, pk, sk, size, item):
                    old = None
                else:
                    old = w.get_checked(row, pk, sk)
                    check_condition(compiled, params, old)
                    w.put(row.id, pk, sk, size, item)
                if ctx.engine.hooks.change_hooks:
                    ctx.engine.hooks.emit_change(ctx, w, row, old, item)
                return old

        return conditional_write(ctx, compiled, params, row, pk, sk, write)

    def missing() -> None:
        if size > MAX_ITEM_SIZE:  # checked before the table (dynalite's tests of DynamoDB)
            raise validation(ITEM_TOO_LARGE)

    old = with_table(ctx, params["TableName"], attempt, missing)
    if isinstance(old, DynamoDBError):
        try:
            raise old
        finally:
            del old  # the error's traceback holds this frame: no cycle through the local
    return _written(ctx, old if return_values == "ALL_OLD" else None, old, size)


def delete_item(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _DELETE)
    return_values = return_values_put_delete(params)
    compiled = compile_request(params, wire=ctx.wire, kinds=("ConditionExpression",))

    def attempt(row: TableRow) -> Item | DynamoDBError | None:
        _key, pk, sk = parse_key(row.key_schema, params["Key"], wire=ctx.wire)
        failed = failed_already(ctx, compiled, params, row, pk, sk)
        if failed is not None:
            return failed

        def write(w: Writer) -> Item | None:
            old = w.get_checked(row, pk, sk)
            check_condition(compiled, params, old)
            if old is not None:
                w.delete(row.id, pk, sk)
                if ctx.engine.hooks.change_hooks:
                    ctx.engine.hooks.emit_change(ctx, w, row, old, None)
            return old

        return conditional_write(ctx, compiled, params, row, pk, sk, write)

    old = with_table(ctx, params["TableName"], attempt, _key_values(ctx))
    if isinstance(old, DynamoDBError):
        try:
            raise old
        finally:
            del old  # the error's traceback holds this frame: no cycle through the local
    return _written(ctx, old if return_values == "ALL_OLD" else None, old, 0)


def update_item(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _UPDATE)
    return_values = params.get("ReturnValues") or "NONE"
    compiled = compile_request(
        params, wire=ctx.wire, kinds=("UpdateExpression", "ConditionExpression")
    )

    def attempt(row: TableRow) -> tuple[Item | None, Item | None, int] | DynamoDBError:
        schema = row.key_schema
        key, pk, sk = parse_key(schema, params["Key"], wire=ctx.wire)
        failed = failed_already(ctx, compiled, params, row, pk, sk)
        if failed is not None:
            return failed

        refusing = _refusing(ctx, row)

        def write(w: Writer) -> tuple[Item | None, Item | None, int]:
            old = w.get_checked(row, pk, sk)
            check_condition(compiled, params, old)
            updated = updated_item(compiled, schema, key, old, row.indexes)
            if updated is None:
                return None, None, 0  # nothing to remove from: nothing is created
            new, size = updated
            with w.guarded(refusing):
                w.put(row.id, pk, sk, size, new)
                if ctx.engine.hooks.change_hooks:
                    ctx.engine.hooks.emit_change(ctx, w, row, old, new)
            return old, new, size

        return conditional_write(ctx, compiled, params, row, pk, sk, write)

    outcome = with_table(ctx, params["TableName"], attempt, _key_values(ctx))
    if isinstance(outcome, DynamoDBError):
        try:
            raise outcome
        finally:
            del outcome  # the error's traceback holds this frame: no cycle through the local
    old, new, new_size = outcome
    attributes: Item | None = None
    if return_values == "ALL_OLD":
        attributes = old
    elif return_values == "ALL_NEW":
        attributes = new
    elif return_values in ("UPDATED_OLD", "UPDATED_NEW") and compiled.update is not None:
        source = old if return_values == "UPDATED_OLD" else new
        if source is not None:
            attributes = project(source, compiled.update.paths)
    return _written(ctx, attributes, old, new_size)


def _refusing(ctx: Context, row: TableRow) -> bool:
    """Whether a write to ``row`` needs a savepoint (``Writer.guarded``): a change hook may
    refuse it after it was made (the item collection limit of tables with local secondary
    indexes)."""
    return bool(row.indexes) and ctx.engine.hooks.refusing(row)


def _written(
    ctx: Context, attributes: Item | None, old: Item | None, new_size: int
) -> dict[str, Any]:
    """A single-item write's response: ``attributes`` as its Attributes (when there are any),
    the ConsumedCapacity of the larger of the old and the new item (and of each index entry
    written) and the ItemCollectionMetrics, when they were asked for."""
    params = ctx.params
    response: dict[str, Any] = {}
    if attributes:
        response["Attributes"] = attributes
    name = params["TableName"]
    if params.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):  # sizes only when asked
        units = consumed.write_units(max(item_size(old), new_size))
        indexes = consumed.written_to_indexes(ctx.extras, name)
        consumed.attach(response, params, name, units, indexes=indexes)
    if params.get("ReturnItemCollectionMetrics") == "SIZE":
        metrics = ctx.extras.get(consumed.COLLECTIONS, {}).get(name)
        if metrics:
            response["ItemCollectionMetrics"] = metrics[-1]
    return response


def _key_values(ctx: Context) -> Callable[[], None]:
    """The Key's AttributeValues are checked before the table is looked for (dynalite's tests
    of DynamoDB: a value with two types set is reported for a table that does not exist)."""

    def check_values() -> None:
        key = ctx.params["Key"]
        if isinstance(key, dict):
            for value in key.values():
                parse_value(value, wire=ctx.wire)

    return check_values


def get_item(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _GET)
    compiled = compile_request(params, wire=ctx.wire, kinds=("ProjectionExpression",))
    consistent = bool(params.get("ConsistentRead", False))

    def attempt(row: TableRow) -> Item | None:
        _key, pk, sk = parse_key(row.key_schema, params["Key"], wire=ctx.wire)

        def read(r: Reader) -> Item | None:
            item = r.get_checked(row, pk, sk)  # one statement, no transaction
            if ctx.reader_hook is None or consistent:
                return item
            # An interceptor's view for eventually consistent reads (faults: stale reads).
            return ctx.reader(r, consistent=False).get(row.id, pk, sk)

        return ctx.storage.read(read, tables=(row.id,))

    item = with_table(ctx, params["TableName"], attempt, _key_values(ctx))
    response: dict[str, Any] = {}
    if item is not None:
        response["Item"] = projected(item, compiled)
    if params.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
        units = consumed.read_units(item_size(item), consistent=consistent)
        consumed.attach(response, params, params["TableName"], units)
    return response
