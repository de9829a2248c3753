"""PartiQL: ExecuteStatement, BatchExecuteStatement, ExecuteTransaction.

Each statement is parsed (expressions/partiql.py), turned into the equivalent item request
(partiql_plan.py) and run as that operation through
:meth:`Host.execute <firstwrite.engine.context.Host.execute>`, in the call's region and wire
mode: GetItem, Query, Scan, PutItem, UpdateItem, DeleteItem, TransactGetItems or
TransactWriteItems. So a statement takes exactly the path of its
equivalent request, every hook included (interceptors such as fault injection and
throughput see that operation and its table; change hooks see its writes: streams, TTL,
indexes, replicas), and answers with its checks and errors. What is PartiQL's own is here:
the request shapes, ``?`` parameters, ``NextToken`` (opaque, tied to the statement and its
parameters), an INSERT's duplicate key (DuplicateItemException), the per-statement results
and errors of a batch, and the read/write rules of batches and transactions.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, validation
from ..expressions.partiql import Exists, Path, Select, Statement, parse
from ..expressions.partiql_shape import parameters_error
from ..validation import CONSISTENT_READ, RETURN_CONSUMED_CAPACITY, RETURN_VALUES_ON_CCF, F, check
from ..values import to_wire
from .partiql_plan import Plan, count_check, plan, table_row
from .transactions import CANCELLED

if TYPE_CHECKING:
    from ..context import Context

__all__ = ["batch_execute_statement", "execute_statement", "execute_transaction"]

DUPLICATE = "Duplicate primary key exists in table"
INVALID_TOKEN = "Invalid NextToken"
TOKEN_MISMATCH = "NextToken does not match request"
EXISTS_OUTSIDE = "EXISTS can only be used in ExecuteTransaction write requests."
BATCH_KEY = "Select statements within BatchExecuteStatement must specify the primary key in the where clause."
BATCH_MIXED = "Read and write requests together in the same batch is not supported"
TRANSACTION_KEY = (
    "Select statements within ExecuteTransaction must specify the primary key in the where clause."
)
TRANSACTION_INDEX = "Reads on indices are not supported within transactions."
TRANSACTION_MIXED = (
    "ExecuteTransaction API does not support both read and write operations in the same request."
)
TRANSACTION_RETURNING = "RETURNING clause is not supported in ExecuteTransaction."

_STATEMENT = F("Statement", required=True, min_len=1, max_len=8192)
_PARAMETERS = F("Parameters", kind="list", min_len=1)
_EXECUTE = (
    _STATEMENT,
    _PARAMETERS,
    CONSISTENT_READ,
    F("NextToken", min_len=1, max_len=32768),
    RETURN_CONSUMED_CAPACITY,
    F("Limit", kind="int", min=1),
    RETURN_VALUES_ON_CCF,
)
_BATCH = (
    F(
        "Statements",
        kind="list",
        required=True,
        min_len=1,
        max_len=25,
        members=(_STATEMENT, _PARAMETERS, CONSISTENT_READ, RETURN_VALUES_ON_CCF),
        shape="BatchStatementRequest",
    ),
    RETURN_CONSUMED_CAPACITY,
)
_TRANSACTION = (
    F(
        "TransactStatements",
        kind="list",
        required=True,
        min_len=1,
        max_len=100,
        members=(_STATEMENT, _PARAMETERS, RETURN_VALUES_ON_CCF),
        shape="ParameterizedStatement",
    ),
    F("ClientRequestToken", min_len=1, max_len=36),
    RETURN_CONSUMED_CAPACITY,
)
# BatchStatementError codes, by the exception DynamoDB raises for a lone statement.
_BATCH_CODES = {
    "ValidationException": "ValidationError",
    "ThrottlingException": "ThrottlingError",
    "InternalServerError": "InternalServerError",
    "RequestLimitExceeded": "RequestLimitExceeded",
}


def _statement(text: str, parameters: Sequence[Any]) -> Statement:
    stmt = parse(text)  # (a statement nested too deep: refused before anything recurses)
    too_deep = parameters_error(parameters)
    if too_deep is not None:
        raise too_deep
    count_check(stmt, parameters)
    return stmt


def _run(ctx: Context, plan_: Plan, capacity: str | None) -> dict[str, Any]:
    """Run the plan's request as its own operation (the engine's full path for it)."""
    request = plan_.request
    if capacity is not None:
        request["ReturnConsumedCapacity"] = capacity
    try:
        return ctx.engine.execute(plan_.operation, request, region=ctx.region, wire=ctx.wire)
    except DynamoDBError as error:
        if plan_.insert and error.code == "ConditionalCheckFailedException":
            raise DynamoDBError("DuplicateItemException", DUPLICATE) from None
        raise key_error(error) from None


def execute_statement(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _EXECUTE)
    text = params["Statement"]
    parameters = params.get("Parameters") or []
    stmt = _statement(text, parameters)
    if isinstance(stmt, Exists):
        raise validation(EXISTS_OUTSIDE)
    row = table_row(ctx.storage, ctx.region, stmt.source.table)
    planned = plan(
        stmt,
        parameters,
        row,
        consistent=bool(params.get("ConsistentRead")),
        limit=params.get("Limit"),
        on_failure=params.get("ReturnValuesOnConditionCheckFailure"),
    )
    token = params.get("NextToken")
    if token is not None:
        start = _start_key(ctx, token, text, parameters)
        if planned.operation in ("Query", "Scan"):
            planned.request["ExclusiveStartKey"] = start
    answer = _run(ctx, planned, params.get("ReturnConsumedCapacity"))
    response: dict[str, Any] = {}
    operation = planned.operation
    if operation == "GetItem":
        item = answer.get("Item")
        response["Items"] = [] if item is None else [flatten(item, planned.projection)]
    elif operation in ("Query", "Scan"):
        response["Items"] = [flatten(i, planned.projection) for i in answer.get("Items", ())]
        last = answer.get("LastEvaluatedKey")
        if last is not None:
            response["NextToken"] = _token(last, text, parameters)
            response["LastEvaluatedKey"] = last
    else:
        attributes = answer.get("Attributes")
        response["Items"] = [attributes] if planned.returning and attributes else []
    if "ConsumedCapacity" in answer:
        response["ConsumedCapacity"] = answer["ConsumedCapacity"]
    return response


def flatten(item: dict[str, Any], projection: tuple[Path, ...] | None) -> dict[str, Any]:
    """A SELECT's item: ``item`` itself for ``*``, else each projected path's value under its
    leaf name (absent paths left out). ``item`` is the projection's answer, in which a list
    keeps only the projected elements, in index order: ``l[3]`` alone is ``l``'s only one."""
    if projection is None:
        return item
    kept: dict[tuple[str | int, ...], set[int]] = {}
    for path in projection:
        for at, part in enumerate(path.parts):
            if isinstance(part, int):
                kept.setdefault(path.parts[:at], set()).add(part)
    out: dict[str, Any] = {}
    for path in projection:
        value: Any = {"M": item}
        for at, part in enumerate(path.parts):
            if isinstance(part, int):
                inner = value.get("L") if isinstance(value, dict) else None
                position = sum(1 for i in kept[path.parts[:at]] if i < part)
                value = inner[position] if inner is not None and position < len(inner) else None
            else:
                inner = value.get("M") if isinstance(value, dict) else None
                value = inner.get(part) if inner is not None else None
            if value is None:
                break
        if value is not None:
            out[path.leaf] = value
    return out


def key_error(error: DynamoDBError) -> DynamoDBError:
    """An expression error of a built request, worded as DynamoDB words it for a statement
    (without the request member's name)."""
    message = error.message
    if error.code == "ValidationException":
        for prefix in (
            "Invalid ConditionExpression: ",
            "Invalid FilterExpression: ",
            "Invalid KeyConditionExpression: ",
            "Invalid UpdateExpression: ",
            "Invalid ProjectionExpression: ",
        ):
            if message.startswith(prefix):
                return DynamoDBError(error.code, message[len(prefix) :], **error.extra)
    return error


# --- NextToken ------------------------------------------------------------------------------


def _fingerprint(text: str, parameters: Sequence[Any]) -> str:
    body = json.dumps([text, parameters], default=to_wire, sort_keys=True)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _token(last: Mapping[str, Any], text: str, parameters: Sequence[Any]) -> str:
    """An opaque NextToken: the page's LastEvaluatedKey, tied to this statement."""
    body = json.dumps({"k": last, "h": _fingerprint(text, parameters)}, default=to_wire)
    return base64.b64encode(body.encode("utf-8", "surrogatepass")).decode("ascii")


def _start_key(ctx: Context, token: str, text: str, parameters: Sequence[Any]) -> dict[str, Any]:
    try:
        decoded = json.loads(base64.b64decode(token.encode("ascii"), validate=True))
    except (binascii.Error, ValueError, UnicodeError):
        raise validation(INVALID_TOKEN) from None
    if (
        not isinstance(decoded, dict)
        or not isinstance(decoded.get("k"), dict)
        or not isinstance(decoded.get("h"), str)
    ):
        raise validation(INVALID_TOKEN)
    if decoded["h"] != _fingerprint(text, parameters):
        raise validation(TOKEN_MISMATCH)
    key: dict[str, Any] = decoded["k"]
    if not ctx.wire:  # B values travel as base64 text in the token, as bytes in process
        for name, value in key.items():
            if isinstance(value, dict) and isinstance(value.get("B"), str):
                try:
                    key[name] = {"B": base64.b64decode(value["B"], validate=True)}
                except (binascii.Error, ValueError):
                    raise validation(INVALID_TOKEN) from None
    return key


# --- BatchExecuteStatement ------------------------------------------------------------------


def _batch_error(error: DynamoDBError) -> dict[str, Any]:
    code = _BATCH_CODES.get(error.code, error.code.removesuffix("Exception"))
    out: dict[str, Any] = {"Code": code, "Message": error.message}
    if "Item" in error.extra:
        out["Item"] = error.extra["Item"]
    return out


def batch_execute_statement(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _BATCH)
    capacity = params.get("ReturnConsumedCapacity")
    statements: list[Mapping[str, Any]] = params["Statements"]
    parsed: list[Statement | DynamoDBError] = []
    for element in statements:
        try:
            parsed.append(_statement(element["Statement"], element.get("Parameters") or []))
        except DynamoDBError as error:
            parsed.append(error)
    if len({isinstance(s, Select) for s in parsed if not isinstance(s, DynamoDBError)}) > 1:
        raise validation(BATCH_MIXED)
    responses: list[dict[str, Any]] = []
    consumed: list[Mapping[str, Any]] = []
    for element, stmt in zip(statements, parsed, strict=True):
        if isinstance(stmt, DynamoDBError):
            responses.append({"Error": _batch_error(stmt)})
            continue
        entry: dict[str, Any] = {}
        try:
            if isinstance(stmt, Exists):
                raise validation(EXISTS_OUTSIDE)
            entry["TableName"] = stmt.source.table
            row = table_row(ctx.storage, ctx.region, stmt.source.table)
            planned = plan(
                stmt,
                element.get("Parameters") or [],
                row,
                consistent=bool(element.get("ConsistentRead")),
                on_failure=element.get("ReturnValuesOnConditionCheckFailure"),
            )
            if isinstance(stmt, Select) and planned.operation != "GetItem":
                raise validation(BATCH_KEY)
            answer = _run(ctx, planned, capacity)
        except DynamoDBError as error:
            entry["Error"] = _batch_error(error)
            responses.append(entry)
            continue
        item = answer.get("Item") if planned.operation == "GetItem" else None
        if item is not None:
            entry["Item"] = flatten(item, planned.projection)
        elif planned.returning and answer.get("Attributes"):
            entry["Item"] = answer["Attributes"]
        responses.append(entry)
        if "ConsumedCapacity" in answer:
            consumed.append(answer["ConsumedCapacity"])
    response: dict[str, Any] = {"Responses": responses}
    if capacity in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = _merged(consumed)
    return response


def _merged(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """ConsumedCapacity entries summed per table (numbers added member by member)."""
    tables: dict[str, dict[str, Any]] = {}
    for entry in entries:
        name = entry.get("TableName")
        if not isinstance(name, str):
            continue
        if name not in tables:
            tables[name] = json.loads(json.dumps(entry))
        else:
            _add(tables[name], entry)
    return list(tables.values())


def _add(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, bool) or key == "TableName":
            continue
        if isinstance(value, (int, float)):
            into[key] = into.get(key, 0) + value
        elif isinstance(value, Mapping):
            _add(into.setdefault(key, {}), value)


# --- ExecuteTransaction ---------------------------------------------------------------------

_GET_MEMBERS = ("TableName", "Key", "ProjectionExpression", "ExpressionAttributeNames")
_ACTION = {"PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete"}


def execute_transaction(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _TRANSACTION)
    capacity = params.get("ReturnConsumedCapacity")
    elements: list[Mapping[str, Any]] = params["TransactStatements"]
    statements = [_statement(e["Statement"], e.get("Parameters") or []) for e in elements]
    reads = [isinstance(s, Select) for s in statements]
    if any(reads) and not all(reads):
        raise validation(TRANSACTION_MIXED)
    plans: list[Plan] = []
    for element, stmt in zip(elements, statements, strict=True):
        if isinstance(stmt, Select) and stmt.source.index is not None:
            raise validation(TRANSACTION_INDEX)
        if not isinstance(stmt, (Select, Exists)) and getattr(stmt, "returning", None):
            raise validation(TRANSACTION_RETURNING)
        table = stmt.select.source.table if isinstance(stmt, Exists) else stmt.source.table
        row = table_row(ctx.storage, ctx.region, table)
        planned = plan(
            stmt,
            element.get("Parameters") or [],
            row,
            on_failure=element.get("ReturnValuesOnConditionCheckFailure"),
        )
        if isinstance(stmt, Select) and planned.operation != "GetItem":
            raise validation(TRANSACTION_KEY)
        plans.append(planned)
    request: dict[str, Any] = {}
    if capacity is not None:
        request["ReturnConsumedCapacity"] = capacity
    if all(reads):
        request["TransactItems"] = [
            {"Get": {k: p.request[k] for k in _GET_MEMBERS if k in p.request}} for p in plans
        ]
        answer = _execute(ctx, "TransactGetItems", request, plans)
        responses = []
        for planned, got in zip(plans, answer.get("Responses", ()), strict=True):
            item = got.get("Item")
            responses.append({} if item is None else {"Item": flatten(item, planned.projection)})
        response: dict[str, Any] = {"Responses": responses}
    else:
        actions = []
        for planned in plans:
            body = {k: v for k, v in planned.request.items() if k != "ReturnValues"}
            actions.append({_ACTION.get(planned.operation, planned.operation): body})
        request["TransactItems"] = actions
        if "ClientRequestToken" in params:
            request["ClientRequestToken"] = params["ClientRequestToken"]
        answer = _execute(ctx, "TransactWriteItems", request, plans)
        response = {}
    if "ConsumedCapacity" in answer:
        response["ConsumedCapacity"] = answer["ConsumedCapacity"]
    return response


def _execute(
    ctx: Context, operation: str, request: dict[str, Any], plans: Sequence[Plan]
) -> dict[str, Any]:
    """Run the transaction; an INSERT's failed condition is its DuplicateItem reason."""
    try:
        return ctx.engine.execute(operation, request, region=ctx.region, wire=ctx.wire)
    except DynamoDBError as error:
        reasons = error.extra.get("CancellationReasons")
        if error.code != "TransactionCanceledException" or not isinstance(reasons, list):
            raise key_error(error) from None
        renamed = []
        for planned, reason in zip(plans, reasons, strict=True):
            if planned.insert and reason.get("Code") == "ConditionalCheckFailed":
                reason = {"Code": "DuplicateItem", "Message": DUPLICATE}
            renamed.append(reason)
        codes = ", ".join(r["Code"] for r in renamed)
        raise DynamoDBError(
            error.code, f"{CANCELLED} [{codes}]", CancellationReasons=renamed
        ) from None
