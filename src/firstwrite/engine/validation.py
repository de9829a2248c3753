"""Request-shape validation, declared as tables and checked by one generic function.

Like DynamoDB's front end, it first rejects JSON of the wrong type (SerializationException), then
collects every constraint that fails into one ``N validation errors detected: ...`` message with
AWS's member paths (``tableName``, ``keySchema.1.member.keyType``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import (
    DynamoDBError,
    constraint,
    constraint_errors,
    java_str,
    serialization,
    validation,
)
from .values import json_kind

TABLE_NAME_PATTERN = "[a-zA-Z0-9_.-]+"


@dataclass(frozen=True)
class F:
    """One request member: JSON kind and AWS constraints."""

    name: str
    kind: str = "str"  # str | int | bool | list | map | struct | any
    required: bool = False
    min_len: int | None = None
    max_len: int | None = None
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    min: int | None = None
    max: int | None = None
    long: bool = False  # an int member the model types Long (64 bits), not Integer (32)
    members: tuple[F, ...] = ()  # struct members, or the element struct of a list
    element: str | None = None  # element kind for lists (and map values) of scalars
    # A list of strings whose elements have their own length bounds (the model's member shape:
    # NonKeyAttributes' NonKeyAttributeName, 1 to 255), reported for the whole list.
    element_len: tuple[int, int] | None = None
    shape: str | None = None  # the model's name for the struct elements of a list (messages)
    # Where AWS words a member its newer way: the name as the model spells it (``Limit``, not
    # ``limit``) and no value (``Value at 'Limit' failed ...``): Query's Limit.
    model_name: bool = False
    # An empty string breaks only this minimum, reported alone: the model's own for a member
    # that also takes an ARN (TableName: 1), the name rules (3 to 255, pattern) apply after it.
    empty_min: int | None = None
    _regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    member_path: str = field(init=False, compare=False, repr=False)  # AWS's camelCase name

    def __post_init__(self) -> None:
        object.__setattr__(self, "member_path", self.name if self.model_name else _camel(self.name))

    def regex(self) -> re.Pattern[str] | None:
        if self.pattern is None:
            return None
        return _compiled(self.pattern)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    regex = _PATTERNS.get(pattern)
    if regex is None:
        regex = _PATTERNS[pattern] = re.compile(pattern + r"\Z")
    return regex


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


_KINDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "str": (str, "String"),
    "int": (int, "Long"),
    "bool": (bool, "Boolean"),
    "list": (list, "List"),
    "map": (dict, "Map"),
    "struct": (dict, "Structure"),
}


def _check_type(value: Any, kind: str) -> None:
    if kind == "any" or value is None:
        return
    expected, label = _KINDS[kind]
    ok = isinstance(value, expected)
    if kind == "int" and isinstance(value, bool):
        ok = False
    if kind == "int" and isinstance(value, float) and value.is_integer():
        ok = True
    if not ok:
        raise serialization(f"{json_kind(value)} cannot be converted to {label}")


# What Java's int and long hold: DynamoDB's JSON reader refuses a number past them before any
# constraint is checked (and a Python int past 64 bits cannot reach SQLite at all).
_INTEGER_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)


def _check_range(value: int | float, spec: F) -> None:
    low, high = _LONG_RANGE if spec.long else _INTEGER_RANGE
    if not low <= value <= high:
        shown = java_str(value) if isinstance(value, float) else str(value)
        raise serialization(
            f"Numeric value ({shown}) out of range of {'long' if spec.long else 'int'}"
        )


def _check(value: Any, spec: F, path: str, errors: list[str]) -> None:
    if value is None:
        if spec.required:
            errors.append(constraint(None, path, "Member must not be null"))
        return
    _check_type(value, spec.kind)
    if value == "" and spec.empty_min is not None:
        rule = f"Member must have length greater than or equal to {spec.empty_min}"
        errors.append(constraint(value, path, rule))
        return
    if spec.kind in ("str", "list", "map"):
        length = len(value)
        shown = _structs(value, spec) if spec.shape is not None else None
        if spec.min_len is not None and length < spec.min_len:
            rule = f"Member must have length greater than or equal to {spec.min_len}"
            errors.append(constraint(value, path, rule, shown=shown))
        if spec.max_len is not None and length > spec.max_len:
            rule = f"Member must have length less than or equal to {spec.max_len}"
            errors.append(constraint(value, path, rule, shown=shown))
    if spec.kind == "str":
        regex = spec.regex()
        if regex is not None and not regex.match(value):
            errors.append(
                constraint(
                    value, path, f"Member must satisfy regular expression pattern: {spec.pattern}"
                )
            )
        if spec.enum is not None and value not in spec.enum:
            errors.append(
                constraint(
                    value, path, f"Member must satisfy enum value set: [{', '.join(spec.enum)}]"
                )
            )
    elif spec.kind == "int":
        _check_range(value, spec)
        valueless = spec.model_name
        if spec.min is not None and value < spec.min:
            rule = f"Member must have value greater than or equal to {spec.min}"
            errors.append(constraint(value, path, rule, valueless=valueless))
        if spec.max is not None and value > spec.max:
            rule = f"Member must have value less than or equal to {spec.max}"
            errors.append(constraint(value, path, rule, valueless=valueless))
    elif spec.kind == "struct":
        _check_members(value, spec.members, path + ".", errors)
    elif spec.kind == "map" and spec.element is not None:
        for element in value.values():
            _check_type(element, spec.element)
    elif spec.kind == "map" and spec.members:
        # A map of structures (KeyConditions, QueryFilter, ScanFilter): each value's members
        # at ``<path>.<key>.member.<member>`` (a value of another JSON type is left to the
        # operation, which words it).
        for key, element in value.items():
            if isinstance(element, dict):
                _check_members(element, spec.members, f"{path}.{key}.member.", errors)
    elif spec.kind == "list":
        for index, element in enumerate(value, start=1):
            if element is None:
                errors.append(constraint(None, f"{path}.{index}.member", "Member must not be null"))
            elif spec.members:
                _check_type(element, "struct")
                _check_members(element, spec.members, f"{path}.{index}.member.", errors)
            elif spec.element is not None:
                _check_type(element, spec.element)
        if spec.element_len is not None:
            low, high = spec.element_len
            if any(not low <= len(e) <= high for e in value if isinstance(e, str)):
                # AWS names every constraint of the member shape, the longest bound first.
                rule = (
                    "Member must satisfy constraint: [Member must have length less than or "
                    f"equal to {high}, Member must have length greater than or equal to {low}]"
                )
                errors.append(constraint(value, path, rule))


def _structs(value: list[Any], spec: F) -> str:
    """A list of structures as AWS prints it in a constraint message: Java's toString of each,
    ``KeySchemaElement(attributeName=a, keyType=HASH)`` (every member, ``null`` when absent)."""

    def one(element: Any) -> str:
        if not isinstance(element, dict):
            return "null" if element is None else java_str(element)
        fields = ", ".join(f"{m.member_path}={java_str(element.get(m.name))}" for m in spec.members)
        return f"{spec.shape}({fields})"

    return "[" + ", ".join(one(e) for e in value) + "]"


def _check_members(
    value: Mapping[str, Any], members: tuple[F, ...], prefix: str, errors: list[str]
) -> None:
    for member in members:
        found = value.get(member.name)
        # Most members of a request are absent: skip them without building their path.
        if found is not None or member.required:
            _check(found, member, prefix + member.member_path, errors)


Valid = Callable[[Any], bool]
# Per members tuple (by identity, the tuple kept alive alongside): the required member names,
# and a validity test per member name.
_PLANS: dict[int, tuple[tuple[F, ...], tuple[str, ...], dict[str, Valid]]] = {}


def _valid_test(spec: F) -> Valid:
    """``value -> bool``: whether ``_check`` would accept a non-null ``value`` without error."""
    if spec.kind == "str":
        low = spec.min_len if spec.min_len is not None else 0
        high = spec.max_len if spec.max_len is not None else sys.maxsize
        regex = spec.regex()
        enum = frozenset(spec.enum) if spec.enum is not None else None

        def valid_str(value: Any) -> bool:
            return (
                isinstance(value, str)
                and low <= len(value) <= high
                and (regex is None or regex.match(value) is not None)
                and (enum is None or value in enum)
            )

        # Most string members repeat from call to call (table names, expressions, enums): a
        # string found valid once is known valid. Short ones only, and a bounded number.
        seen: set[str] = set()

        def valid_remembered(value: Any) -> bool:
            if type(value) is str and value in seen:
                return True
            if not valid_str(value):
                return False
            if len(seen) < 1024 and len(value) <= 512:
                seen.add(value)
            return True

        return valid_remembered
    if (
        spec.kind == "map"
        and spec.min_len is None
        and spec.max_len is None
        and not spec.element
        and not spec.members
    ):
        return lambda value: isinstance(value, dict)
    if spec.kind == "bool":
        return lambda value: isinstance(value, bool)
    if spec.kind == "any":
        return lambda value: True

    def valid_other(value: Any) -> bool:
        errors: list[str] = []
        try:
            _check(value, spec, "", errors)
        except DynamoDBError:
            return False
        return not errors

    return valid_other


def _plan(members: tuple[F, ...]) -> tuple[tuple[str, ...], dict[str, Valid]]:
    entry = _PLANS.get(id(members))
    if entry is None or entry[0] is not members:
        required = tuple(m.name for m in members if m.required)
        entry = (members, required, {m.name: _valid_test(m) for m in members})
        if len(_PLANS) < 1024:  # operations pass module constants: a bound, not an eviction
            _PLANS[id(members)] = entry
    return entry[1], entry[2]


def check(
    params: Mapping[str, Any],
    members: tuple[F, ...],
    *,
    prefix: str = "",
    name_first: bool = False,
    name_alone: bool = False,
) -> None:
    """Validate ``params`` against ``members``; raise DynamoDB's error for the first problem kind.

    ``prefix`` is the AWS member path of ``params`` inside a larger request, with its trailing
    dot (e.g. ``"requestItems.T.member."``). ``name_first``: the table operations' TableName
    rule (:func:`_table_name_first`); ``name_alone``: CreateTable's (:func:`_table_name_alone`).
    """
    # Fast path: most requests are valid, and proving it needs no member paths or error list;
    # any doubt goes to the full check below, which builds DynamoDB's exact error.
    entry = _PLANS.get(id(members))
    required, tests = (
        (entry[1], entry[2]) if entry is not None and entry[0] is members else _plan(members)
    )
    valid = True
    for name in required:
        if params.get(name) is None:
            valid = False
            break
    if valid:
        for name, value in params.items():
            if value is not None:
                test = tests.get(name)
                if test is not None and not test(value):
                    valid = False
                    break
        if valid:
            return
    errors: list[str] = []
    _check_members(params, members, prefix, errors)  # a member of the wrong JSON type raises
    if name_first:
        _table_name_first(params)
    if name_alone:
        _table_name_alone(params)
    if errors:
        raise constraint_errors(errors)


def _table_name_first(params: Mapping[str, Any]) -> None:
    """CreateTable, DeleteTable, DescribeTable, UpdateTable and DescribeTimeToLive report a
    missing TableName, or one of the wrong length, in words of their own and before any other
    constraint (dynalite's validations, ``required``/``tableName``, and its tests, which run
    against DynamoDB); its pattern is an ordinary constraint."""
    name = params.get("TableName")
    if name is None:
        raise validation("The parameter 'TableName' is required but was not present in the request")
    if not 3 <= len(name) <= 255:
        raise validation(
            "TableName must be at least 3 characters long and at most 255 characters long"
        )


def _table_name_alone(params: Mapping[str, Any]) -> None:
    """CreateTable reports a missing TableName in words of its own, and a TableName that breaks
    its constraints in the ``N validation errors detected`` form, alone, before any other
    constraint: DynamoDB's answers recorded by the conformance suite (nubo-db/
    dynamodb-conformance, tests/tier3/error-messages/createTable.test.ts and
    validation-ordering/createTable.test.ts), where dynalite's older record had a sentence."""
    name = params.get("TableName")
    if name is None:
        raise validation("The parameter 'TableName' is required but was not present in the request")
    errors: list[str] = []
    _check(name, TABLE_NAME, TABLE_NAME.member_path, errors)
    if errors:
        raise constraint_errors(errors)


# Members shared by many operations. TableName also takes a table's ARN (the model: 1 to 1024
# characters): an empty one breaks that minimum alone (the conformance suite's record of
# PutItem, tests/tier3/error-messages/putItem.test.ts).
TABLE_NAME = F(
    "TableName",
    required=True,
    min_len=3,
    max_len=255,
    pattern=TABLE_NAME_PATTERN,
    empty_min=1,
)
RETURN_CONSUMED_CAPACITY = F("ReturnConsumedCapacity", enum=("INDEXES", "TOTAL", "NONE"))
RETURN_ITEM_COLLECTION_METRICS = F("ReturnItemCollectionMetrics", enum=("SIZE", "NONE"))
RETURN_VALUES_ON_CCF = F("ReturnValuesOnConditionCheckFailure", enum=("ALL_OLD", "NONE"))
EXPRESSION_MAPS = (
    F("ExpressionAttributeNames", kind="map", element="str"),
    F("ExpressionAttributeValues", kind="map"),
)
CONSISTENT_READ = F("ConsistentRead", kind="bool")
