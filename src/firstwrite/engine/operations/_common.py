"""Pieces shared by the item operations: expression compilation, return values, capacity."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import validation
from ..expressions import (
    Compiled,
    attribute_updates,
    attributes_projection,
    compile_expressions,
    expected_condition,
    filter_condition,
    key_condition,
    project,
)
from ..values import Item, check_name

# Legacy (pre-expression) parameters and expression parameters, in the order DynamoDB lists
# them in its "Can not use both" message (verified on AWS).
_LEGACY = (
    "AttributeUpdates",
    "AttributesToGet",
    "Expected",
    "QueryFilter",
    "ScanFilter",
    "ConditionalOperator",
    "KeyConditions",
)
_EXPRESSIONS = (
    "UpdateExpression",
    "ProjectionExpression",
    "ConditionExpression",
    "FilterExpression",
    "KeyConditionExpression",
)


def _legacy_members(kinds: tuple[str, ...]) -> frozenset[str]:
    """The legacy parameters of an operation accepting the expression ``kinds``."""
    members: set[str] = set()
    if "UpdateExpression" in kinds:
        members.add("AttributeUpdates")
    if "ProjectionExpression" in kinds:
        members.add("AttributesToGet")
    if "ConditionExpression" in kinds:
        members |= {"Expected", "ConditionalOperator"}
    if "KeyConditionExpression" in kinds:
        members |= {"KeyConditions", "QueryFilter", "ConditionalOperator"}
    elif "FilterExpression" in kinds:
        members |= {"ScanFilter", "ConditionalOperator"}
    return frozenset(members)


@functools.lru_cache(maxsize=64)
def _plan(kinds: tuple[str, ...], legacy: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(legacy members to look for, expression members to look for), in DynamoDB's order."""
    members = _legacy_members(kinds) if legacy else frozenset(_LEGACY)
    return (
        tuple(k for k in _LEGACY if k in members),
        tuple(k for k in _EXPRESSIONS if k in kinds),
    )


# compile_expressions' argument for each expression member.
_ARGUMENTS = {
    "UpdateExpression": "update",
    "ProjectionExpression": "projection",
    "ConditionExpression": "condition",
    "FilterExpression": "filter",
    "KeyConditionExpression": "key_condition",
}


@functools.lru_cache(maxsize=64)
def _fast_plan(
    kinds: tuple[str, ...], legacy: bool
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(legacy members to look for, (expression member, compile_expressions argument) pairs)."""
    legacy_members, expression_members = _plan(kinds, legacy)
    return legacy_members, tuple((k, _ARGUMENTS[k]) for k in expression_members)


def compile_request(
    params: Mapping[str, Any], *, wire: bool, kinds: Iterable[str], legacy: bool = True
) -> Compiled:
    """Compile the expressions an operation accepts (``kinds``, e.g. ``("ConditionExpression",)``)
    and the legacy parameters that stand for them.

    ``legacy=False`` (transactions, whose actions have no legacy members) refuses them.
    """
    kinds = tuple(kinds)
    get = params.get
    names = get("ExpressionAttributeNames")
    values = get("ExpressionAttributeValues")
    if names is None and values is None:
        # The common request: no names, no values, and (checked here) no legacy member. None of
        # the checks below can fail on it, and its expressions are all it compiles to.
        legacy_members, arguments = _fast_plan(kinds, legacy)
        for member in legacy_members:
            if get(member) is not None:
                break
        else:
            texts_by_argument: dict[str, Any] = {}
            for member, argument in arguments:
                texts_by_argument[argument] = get(member)
            return compile_expressions(**texts_by_argument, wire=wire)
    present, texts = _members(params, kinds, legacy)
    _check_mixing(legacy, present, texts)
    if type(names) is dict:
        for name in names.values():
            if type(name) is str:
                check_name(name)
    if present:
        _check_legacy_names(params, present)
    if not texts:
        _check_without_expressions(params, kinds)
    compiled = compile_expressions(
        condition=texts.get("ConditionExpression"),
        update=texts.get("UpdateExpression"),
        projection=texts.get("ProjectionExpression"),
        filter=texts.get("FilterExpression"),
        key_condition=texts.get("KeyConditionExpression"),
        names=names,
        values=values,
        wire=wire,
    )
    if not present:
        return compiled
    return _with_legacy(compiled, params, kinds, wire)


def _members(
    params: Mapping[str, Any], kinds: tuple[str, ...], legacy: bool
) -> tuple[list[str], dict[str, str]]:
    """The legacy members present, and the expressions given (by member)."""
    legacy_members, expression_members = _plan(kinds, legacy)
    get = params.get
    # Plain loops: cheaper than comprehensions for these few members, on every item call.
    present: list[str] = []
    for k in legacy_members:
        if get(k) is not None:
            present.append(k)
    texts: dict[str, str] = {}
    for k in expression_members:
        text = get(k)
        if text is not None:
            texts[k] = text
    return present, texts


def _check_mixing(legacy: bool, present: list[str], texts: dict[str, str]) -> None:
    """Expression and legacy members may not come together."""
    if present:  # the checks below concern legacy members only: most requests have none
        used = list(texts)
        # KeyConditions may be combined with the other expressions, only not with its own.
        mixed = [k for k in present if k != "KeyConditions" or "KeyConditionExpression" in used]
        if mixed and used:
            raise validation(
                "Can not use both expression and non-expression parameters in the same request: "
                f"Non-expression parameters: {{{', '.join(mixed)}}} "
                f"Expression parameters: {{{', '.join(used)}}}"
            )
        if not legacy:
            raise validation(
                f"The legacy parameter {present[0]} is not supported in this operation; "
                "use the equivalent expression parameter"
            )


_VALUE_EXPRESSIONS = (
    "UpdateExpression",
    "ConditionExpression",
    "FilterExpression",
    "KeyConditionExpression",
)


def _check_without_expressions(params: Mapping[str, Any], kinds: tuple[str, ...]) -> None:
    """ExpressionAttributeNames and -Values need an expression to be used in."""
    if params.get("ExpressionAttributeNames") is not None:
        raise validation("ExpressionAttributeNames can only be specified when using expressions")
    if params.get("ExpressionAttributeValues") is not None:
        # DynamoDB's order (dynalite's tests): Update, Condition, Filter, KeyCondition.
        nulls = [k for k in _VALUE_EXPRESSIONS if k in kinds]
        described = " and ".join(nulls)
        verb = "is" if len(nulls) == 1 else "are"
        raise validation(
            "ExpressionAttributeValues can only be specified when using expressions: "
            f"{described} {verb} null"
        )


def check_combination(params: Mapping[str, Any], kinds: Iterable[str]) -> None:
    """The member-combination rules of :func:`compile_request` alone: DynamoDB checks them
    before the values of an item (see PutItem)."""
    kinds = tuple(kinds)
    present, texts = _members(params, kinds, True)
    _check_mixing(True, present, texts)
    if not texts:
        _check_without_expressions(params, kinds)


def _check_legacy_names(params: Mapping[str, Any], present: list[str]) -> None:
    """The attribute names legacy parameters carry (map keys, AttributesToGet) are held to
    DynamoDB's name size limit like any other."""
    for member in present:
        value = params[member]  # AttributesToGet: a list of names; the others: maps by name
        for name in value if isinstance(value, list | dict) else ():
            if type(name) is str:
                check_name(name)


def _with_legacy(
    compiled: Compiled, params: Mapping[str, Any], kinds: tuple[str, ...], wire: bool
) -> Compiled:
    """``compiled`` with the parts the request's legacy parameters stand for."""
    changes: dict[str, Any] = {}
    operator = params.get("ConditionalOperator")
    if "UpdateExpression" in kinds and params.get("AttributeUpdates") is not None:
        changes["update"] = attribute_updates(params["AttributeUpdates"], wire=wire)
    if "ConditionExpression" in kinds:
        changes["condition"] = expected_condition(params.get("Expected"), operator, wire=wire)
    if "KeyConditionExpression" in kinds:
        if params.get("KeyConditions") is not None:
            changes["key_condition"] = key_condition(params["KeyConditions"], wire=wire)
        if compiled.filter is None:
            changes["filter"] = filter_condition(
                params.get("QueryFilter"), operator, kind="QueryFilter", wire=wire
            )
    elif "FilterExpression" in kinds and compiled.filter is None:
        changes["filter"] = filter_condition(
            params.get("ScanFilter"), operator, kind="ScanFilter", wire=wire
        )
    if "ProjectionExpression" in kinds and params.get("AttributesToGet") is not None:
        changes["projection"] = attributes_projection(params["AttributesToGet"])
    return replace(compiled, **changes)


def projected(item: Item, compiled: Compiled) -> Item:
    if compiled.projection is None:
        return item
    return project(item, compiled.projection)


def return_values_put_delete(params: Mapping[str, Any]) -> str:
    value = params.get("ReturnValues") or "NONE"
    if value not in ("NONE", "ALL_OLD"):
        raise validation("ReturnValues can only be ALL_OLD or NONE")
    return str(value)
