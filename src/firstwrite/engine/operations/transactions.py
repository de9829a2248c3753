"""TransactWriteItems and TransactGetItems.

A write transaction is one storage write (one ``BEGIN IMMEDIATE`` transaction): it reads every
item, evaluates every condition and update, and writes only when all of them pass, so it is
all-or-nothing and serializable against every other write, in this process or another.
DynamoDB reports problems in three ways, so the work runs in three phases:

1. Checks needing no table (shapes, expressions, values, the 4 MB payload): ValidationException.
2. Table and key resolution inside the write: unknown tables, empty key values, oversized Put
   items and two actions on one item are top-level errors; a key that does not match the schema
   is a per-action ``ValidationError``.
3. Conditions and updates: ``TransactionCanceledException`` with one reason per action. Every
   condition is evaluated (no short-circuit); a per-action validation failure wins over failed
   conditions and only the first one is reported.

ClientRequestToken: a *successful* transaction stores its token and request fingerprint with
its writes; within the window a repeat is answered without re-applying it, a different request
is an IdempotentParameterMismatchException. Cancelled or rejected requests store nothing
(DynamoDB documents the replay for a successful call only; a retry wants re-evaluating).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack

from .. import consumed
from ..errors import ITEM_TOO_LARGE, DynamoDBError, resource_not_found, validation
from ..expressions import Compiled
from ..item_keys import (
    KeySchema,
    check_attribute_names,
    check_index_keys,
    item_key,
    key_of,
    parse_key,
)
from ..storage import Reader, TableRow, Writer
from ..validation import RETURN_CONSUMED_CAPACITY, RETURN_ITEM_COLLECTION_METRICS, F, check
from ..values import MAX_ITEM_SIZE, Item, item_size, parse_item, parse_value, to_wire
from ._common import compile_request, projected
from .items import check_condition, updated_item
from .tables import require_table

if TYPE_CHECKING:
    from ..context import Context

TOKEN_WINDOW_SECONDS = 600.0
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
MAX_ACTIONS = 100

CANCELLED = "Transaction cancelled, please refer cancellation reasons for specific reasons"
ONE_KIND = "TransactItems can only contain one of Check, Put, Update or Delete"
SAME_ITEM = "Transaction request cannot include multiple operations on one item"
TOO_LARGE = "Transaction size cannot exceed 4 MB"  # exact AWS text unverified
MISMATCH = (
    "Request parameters do not match the parameters of an earlier request that used the same "
    "ClientRequestToken"  # exact AWS text unverified
)
_EMPTY_KEY = "cannot contain an empty string value"

# TableName in transaction actions is the TableArn shape: a name or a table ARN.
_TABLE_REF = F("TableName", required=True, min_len=1, max_len=1024)
_MAPS = (
    F("ExpressionAttributeNames", kind="map", element="str"),
    F("ExpressionAttributeValues", kind="map"),
)
_ON_FAILURE = F("ReturnValuesOnConditionCheckFailure", enum=("ALL_OLD", "NONE"))
_KEY = F("Key", kind="map", required=True)
_CONDITION = F("ConditionExpression", kind="str")
_CHECK = (_KEY, _TABLE_REF, F("ConditionExpression", required=True), *_MAPS, _ON_FAILURE)
_PUT = (F("Item", kind="map", required=True), _TABLE_REF, _CONDITION, *_MAPS, _ON_FAILURE)
_DELETE = (_KEY, _TABLE_REF, _CONDITION, *_MAPS, _ON_FAILURE)
_UPDATE = (
    _KEY,
    F("UpdateExpression", required=True),
    _TABLE_REF,
    _CONDITION,
    *_MAPS,
    _ON_FAILURE,
)
_WRITE_KINDS = ("ConditionCheck", "Put", "Delete", "Update")
_TRANSACT_WRITE = (
    F(
        "TransactItems",
        kind="list",
        required=True,
        min_len=1,
        max_len=MAX_ACTIONS,
        members=(
            F("ConditionCheck", kind="struct", members=_CHECK),
            F("Put", kind="struct", members=_PUT),
            F("Delete", kind="struct", members=_DELETE),
            F("Update", kind="struct", members=_UPDATE),
        ),
    ),
    RETURN_CONSUMED_CAPACITY,
    RETURN_ITEM_COLLECTION_METRICS,
    F("ClientRequestToken", min_len=1, max_len=36),
)
_GET = (_KEY, _TABLE_REF, F("ProjectionExpression", kind="str"), _MAPS[0])
_TRANSACT_GET = (
    F(
        "TransactItems",
        kind="list",
        required=True,
        min_len=1,
        max_len=MAX_ACTIONS,
        members=(F("Get", kind="struct", required=True, members=_GET),),
    ),
    RETURN_CONSUMED_CAPACITY,
)
_EXPRESSION_KINDS = {
    "ConditionCheck": ("ConditionExpression",),
    "Put": ("ConditionExpression",),
    "Delete": ("ConditionExpression",),
    "Update": ("UpdateExpression", "ConditionExpression"),
    "Get": ("ProjectionExpression",),
}


@dataclass
class _Action:
    """One action of a transaction, as phase 1 leaves it."""

    kind: str
    params: Mapping[str, Any]
    compiled: Compiled
    item: Item | None = None  # Put
    size: int = 0  # Put: the item's size
    # Filled in by phase 2.
    row: TableRow | None = None
    schema: KeySchema | None = None
    key: Item = field(default_factory=dict)
    pk: bytes = b""
    sk: bytes = b""


@dataclass
class _Outcome:
    """What a committed (or replayed) write transaction reports: units per table, in order."""

    units: dict[str, float]
    replayed: bool = False


def _cancelled(reasons: list[dict[str, Any]]) -> DynamoDBError:
    codes = ", ".join(reason["Code"] for reason in reasons)
    return DynamoDBError(
        "TransactionCanceledException", f"{CANCELLED} [{codes}]", CancellationReasons=reasons
    )


def _table_name(ctx: Context, ref: str) -> str:
    """A table name from a TableName member that may be a table ARN of this account/region."""
    if not ref.startswith("arn:"):
        return ref
    prefix = f"arn:aws:dynamodb:{ctx.region}:{ctx.engine.account_id}:table/"
    if not ref.startswith(prefix) or "/" in ref[len(prefix) :]:
        raise resource_not_found()
    return ref[len(prefix) :]


def _parse_action(ctx: Context, kind: str, params: Mapping[str, Any]) -> tuple[_Action, int]:
    """Phase 1 for one action: the checks that need no table. Returns it and its payload size."""
    compiled = compile_request(params, wire=ctx.wire, kinds=_EXPRESSION_KINDS[kind], legacy=False)
    action = _Action(kind, params, compiled)
    if kind == "Put":
        action.item = parse_item(params["Item"], wire=ctx.wire)
        action.size = item_size(action.item)
        check_attribute_names(action.item, action.size)
        payload = action.size
    else:
        key = params["Key"]
        payload = item_size(
            {name: parse_value(value, wire=ctx.wire) for name, value in key.items()}
        )
    for value in (params.get("ExpressionAttributeValues") or {}).values():
        payload += item_size({"": parse_value(value, wire=ctx.wire)})
    return action, payload


def _parse_actions(ctx: Context, elements: list[Any], kinds: tuple[str, ...]) -> list[_Action]:
    actions: list[_Action] = []
    payload = 0
    for element in elements:
        present = [kind for kind in kinds if element.get(kind) is not None]
        if len(present) != 1:
            raise validation(ONE_KIND)
        action, size = _parse_action(ctx, present[0], element[present[0]])
        actions.append(action)
        payload += size
    if payload > MAX_TRANSACTION_BYTES:
        raise validation(TOO_LARGE)
    return actions


def _resolve(
    ctx: Context, reader: Reader, actions: list[_Action], *, distinct: bool = True
) -> list[str | None]:
    """Phase 2: tables and storage keys. Raises top-level errors; returns per-action ones.

    ``distinct``: two actions on one item are an error (TransactWriteItems).
    """
    rows: dict[str, TableRow] = {}
    for action in actions:
        name = _table_name(ctx, action.params["TableName"])
        row = rows.get(name)
        if row is None:
            row = rows[name] = require_table(ctx, reader, name)
        action.row = row
        action.schema = row.key_schema
    invalid: list[str | None] = [None] * len(actions)
    seen: set[tuple[int, bytes, bytes]] = set()
    for index, action in enumerate(actions):
        assert action.row is not None and action.schema is not None
        try:
            if action.item is not None:
                action.pk, action.sk = item_key(action.schema, action.item)
                action.key = key_of(action.schema, action.item)
                if action.row.indexes:
                    check_index_keys(action.row.indexes, action.item)
            else:
                action.key, action.pk, action.sk = parse_key(
                    action.schema, action.params["Key"], wire=ctx.wire
                )
        except DynamoDBError as exc:
            if exc.code != "ValidationException" or _EMPTY_KEY in exc.message:
                raise
            invalid[index] = exc.message
            continue
        if action.item is not None and action.size > MAX_ITEM_SIZE:
            raise validation(ITEM_TOO_LARGE)
        identity = (action.row.id, action.pk, action.sk)
        if distinct and identity in seen:
            raise validation(SAME_ITEM)
        seen.add(identity)
    return invalid


def _cancel_if_invalid(invalid: list[str | None]) -> None:
    """Cancel with a ValidationError for the first invalid action, and None for all others."""
    first = next((i for i, message in enumerate(invalid) if message is not None), None)
    if first is not None:
        reasons: list[dict[str, Any]] = [{"Code": "None"} for _ in invalid]
        reasons[first] = {"Code": "ValidationError", "Message": invalid[first]}
        raise _cancelled(reasons)


def _fingerprint(params: Mapping[str, Any]) -> str:
    """The request, minus its token, as canonical JSON: key order and B encoding don't matter."""
    body = {k: v for k, v in params.items() if k != "ClientRequestToken"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=to_wire)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _replay(reader: Reader, region: str, stored: bytes) -> _Outcome:
    """A repeat of a completed request: DynamoDB reports it as a transactional read of each
    item as it is now (2 RCU per 4 KB), not as the first call's writes relabelled."""
    units: dict[str, float] = {}
    for name, keys in msgpack.unpackb(stored, raw=False):
        row = reader.table(region, name)
        total = 0.0
        for pk, sk in keys:
            item = reader.get(row.id, pk, sk) if row is not None else None
            total += consumed.read_units(item_size(item), consistent=True, transactional=True)
        units[name] = total
    return _Outcome(units, replayed=True)


def transact_write(ctx: Context, *, token_window: float = TOKEN_WINDOW_SECONDS) -> dict[str, Any]:
    """TransactWriteItems; ``token_window`` is how long a ClientRequestToken is remembered."""
    params = ctx.params
    check(params, _TRANSACT_WRITE)
    actions = _parse_actions(ctx, params["TransactItems"], _WRITE_KINDS)
    token: str | None = params.get("ClientRequestToken")
    fingerprint = _fingerprint(params) if token is not None else ""

    def write(w: Writer) -> _Outcome:
        now = ctx.now()
        if token is not None:
            previous = w.token(ctx.region, token)
            if previous is not None and previous[1] >= now - token_window:
                if previous[0] != fingerprint:
                    raise DynamoDBError("IdempotentParameterMismatchException", MISMATCH)
                return _replay(w, ctx.region, previous[2])
        invalid = _resolve(ctx, w, actions)
        olds = [
            w.get(a.row.id, a.pk, a.sk) if a.row is not None and invalid[i] is None else None
            for i, a in enumerate(actions)
        ]
        reasons: list[dict[str, Any]] = [{"Code": "None"} for _ in actions]
        news: list[tuple[Item, int] | None] = [None] * len(actions)
        for index, action in enumerate(actions):
            if invalid[index] is not None:
                continue
            old = olds[index]
            try:
                check_condition(action.compiled, action.params, old)
                if action.kind == "Update":
                    assert action.schema is not None
                    assert action.row is not None
                    news[index] = updated_item(
                        action.compiled, action.schema, action.key, old, action.row.indexes
                    )
            except DynamoDBError as exc:
                if exc.code == "ConditionalCheckFailedException":
                    reasons[index] = {"Code": "ConditionalCheckFailed", "Message": exc.message}
                    reasons[index].update(exc.extra)
                elif exc.code == "ValidationException":
                    invalid[index] = exc.message
                else:
                    raise
        _cancel_if_invalid(invalid)
        if any(reason["Code"] != "None" for reason in reasons):
            raise _cancelled(reasons)
        # Every check passed: from here on only a change hook may raise a DynamoDBError (the
        # item collection limit), and then the whole transaction is undone.
        refusing = ctx.engine.hooks.refusing(*{a.row.id: a.row for a in actions if a.row}.values())
        with w.guarded(refusing):
            units, keys = _apply(ctx, w, actions, olds, news)
        if token is not None:
            stored = msgpack.packb(list(keys.items()), use_bin_type=True)
            w.save_token(ctx.region, token, fingerprint, now, stored)
        w.purge_tokens(now - token_window)
        return _Outcome(units)

    outcome = ctx.storage.write(write)
    response: dict[str, Any] = {}
    mode = params.get("ReturnConsumedCapacity")
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = [
            consumed.capacity(
                mode,
                name,
                units,
                read=outcome.replayed,
                indexes=None
                if outcome.replayed
                else consumed.written_to_indexes(ctx.extras, name, transactional=True),
            )
            for name, units in outcome.units.items()
        ]
    if params.get("ReturnItemCollectionMetrics") == "SIZE" and not outcome.replayed:
        metrics = ctx.extras.get(consumed.COLLECTIONS)
        if metrics:
            response["ItemCollectionMetrics"] = metrics
    return response


def _apply(
    ctx: Context,
    w: Writer,
    actions: list[_Action],
    olds: list[Item | None],
    news: list[tuple[Item, int] | None],
) -> tuple[dict[str, float], dict[str, list[tuple[bytes, bytes]]]]:
    """The writes of a transaction whose every check passed: units and keys per table."""
    units: dict[str, float] = {}
    keys: dict[str, list[tuple[bytes, bytes]]] = {}
    hooks = bool(ctx.engine.hooks.change_hooks)
    for index, action in enumerate(actions):
        row = action.row
        assert row is not None
        old = olds[index]
        new: Item | None = old
        if action.kind == "Put":
            assert action.item is not None
            new, size = action.item, action.size
            w.put(row.id, action.pk, action.sk, size, new)
        elif action.kind == "Update":
            written = news[index]
            if written is None:  # removals from an absent item create nothing
                new, size = None, 0
            else:
                new, size = written
                w.put(row.id, action.pk, action.sk, size, new)
        elif action.kind == "Delete":
            new, size = None, 0
            if old is not None:
                w.delete(row.id, action.pk, action.sk)
        else:
            size = 0
        if hooks and action.kind != "ConditionCheck" and (old is not None or new is not None):
            ctx.engine.hooks.emit_change(ctx, w, row, old, new)
        units[row.name] = units.get(row.name, 0.0) + consumed.write_units(
            max(size, item_size(old)), transactional=True
        )
        keys.setdefault(row.name, []).append((action.pk, action.sk))
    return units, keys


def transact_write_items(ctx: Context) -> dict[str, Any]:
    return transact_write(ctx)


def transact_get_items(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _TRANSACT_GET)
    actions = _parse_actions(ctx, params["TransactItems"], ("Get",))

    def read(r: Reader) -> list[Item | None]:
        _cancel_if_invalid(_resolve(ctx, r, actions))
        return [r.get(a.row.id, a.pk, a.sk) if a.row is not None else None for a in actions]

    # One snapshot: every Get sees the same committed state, never half of a transaction.
    items = ctx.storage.snapshot(read)
    if sum(item_size(item) for item in items) > MAX_TRANSACTION_BYTES:
        raise validation(TOO_LARGE)
    responses: list[dict[str, Any]] = []
    units: dict[str, float] = {}
    for action, item in zip(actions, items, strict=True):
        assert action.row is not None
        responses.append({} if item is None else {"Item": projected(item, action.compiled)})
        name = action.row.name
        units[name] = units.get(name, 0.0) + consumed.read_units(
            item_size(item), consistent=True, transactional=True
        )
    response: dict[str, Any] = {"Responses": responses}
    mode = params.get("ReturnConsumedCapacity")
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = [
            consumed.capacity(mode, name, total, read=True) for name, total in units.items()
        ]
    return response
