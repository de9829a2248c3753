"""Pieces shared by the item operations: expression compilation, return values, capacity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import validation
from ..expressions import Compiled, compile_expressions, project
from ..values import Item

# Legacy (pre-expression) parameters and the expression parameters that replace them.
_LEGACY = (
    "Expected",
    "AttributeUpdates",
    "AttributesToGet",
    "KeyConditions",
    "QueryFilter",
    "ScanFilter",
    "ConditionalOperator",
)
_EXPRESSIONS = (
    "ConditionExpression",
    "UpdateExpression",
    "ProjectionExpression",
    "KeyConditionExpression",
    "FilterExpression",
)


def compile_request(params: Mapping[str, Any], *, wire: bool, kinds: Iterable[str]) -> Compiled:
    """Compile the expressions an operation accepts (``kinds``, e.g. ``("ConditionExpression",)``)."""
    kinds = tuple(kinds)
    legacy = [k for k in _LEGACY if params.get(k) is not None]
    used = [k for k in _EXPRESSIONS if k in kinds and params.get(k) is not None]
    if legacy and used:
        raise validation(
            "Can not use both expression and non-expression parameters in the same request: "
            f"Non-expression parameters: {{{', '.join(legacy)}}} "
            f"Expression parameters: {{{', '.join(used)}}}"
        )
    if legacy:
        raise validation(
            f"The legacy parameter {legacy[0]} is not supported by the firstwrite local engine; "
            "use the equivalent expression parameter"
        )
    names = params.get("ExpressionAttributeNames")
    values = params.get("ExpressionAttributeValues")
    if not used:
        if names is not None:
            raise validation(
                "ExpressionAttributeNames can only be specified when using expressions"
            )
        if values is not None:
            nulls = [
                k
                for k in kinds
                if k
                in (
                    "UpdateExpression",
                    "ConditionExpression",
                    "KeyConditionExpression",
                    "FilterExpression",
                )
            ]
            described = " and ".join(nulls)
            verb = "is" if len(nulls) == 1 else "are"
            raise validation(
                f"ExpressionAttributeValues can only be specified when using expressions: {described} {verb} null"
            )
    return compile_expressions(
        condition=params.get("ConditionExpression") if "ConditionExpression" in kinds else None,
        update=params.get("UpdateExpression") if "UpdateExpression" in kinds else None,
        projection=params.get("ProjectionExpression") if "ProjectionExpression" in kinds else None,
        filter=params.get("FilterExpression") if "FilterExpression" in kinds else None,
        key_condition=params.get("KeyConditionExpression")
        if "KeyConditionExpression" in kinds
        else None,
        names=names,
        values=values,
        wire=wire,
    )


def projected(item: Item, compiled: Compiled) -> Item:
    if compiled.projection is None:
        return item
    return project(item, compiled.projection)


def return_values_put_delete(params: Mapping[str, Any]) -> str:
    value = params.get("ReturnValues") or "NONE"
    if value not in ("NONE", "ALL_OLD"):
        raise validation("ReturnValues can only be ALL_OLD or NONE")
    return str(value)
