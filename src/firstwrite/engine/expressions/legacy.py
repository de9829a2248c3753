"""The legacy (pre-expression) request parameters, translated into the compiled objects.

``Expected`` + ``ConditionalOperator``, ``QueryFilter`` / ``ScanFilter`` + ``ConditionalOperator``,
``AttributeUpdates``, ``AttributesToGet`` and ``KeyConditions`` become the same resolved AST
nodes the expression parser produces, compiled by the same steps (``compile_condition``,
``plan``, ``build_trie``); nothing here evaluates an item.

Validation follows DynamoDB's own order and wording (DynamoDB Local's ``InputConverter`` and
``LocalDBComparisonOperator``, cross-checked with dynalite and AWS-verified test suites):
per-attribute shape rules first, then the values, then each ComparisonOperator's operand
count and operand types, then ConditionalOperator.

Semantics that differ from the nearest expression are spelled out in the AST: ``NOT_CONTAINS``
is false on a missing attribute (``NOT contains(a, :v)`` would be true), so it becomes
``attribute_exists(a) AND NOT contains(a, :v)``; ``NE`` on a missing attribute is true, as
``<>`` is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import constraint, constraint_errors, serialization, validation
from ..values import SET_TYPES, AttributeValue, compare, parse_value
from . import ast
from .compiled import Condition, KeyCondition, Projection, Update, absent_names
from .evaluate import compile_condition
from .keycondition import UNINDEXABLE, KeyTerm
from .projection import build_trie
from .update import plan

COMPARISON_OPERATORS = (
    "IN",
    "NULL",
    "BETWEEN",
    "LT",
    "NOT_CONTAINS",
    "EQ",
    "GT",
    "NOT_NULL",
    "NE",
    "LE",
    "BEGINS_WITH",
    "GE",
    "CONTAINS",
)  # the service model's order, which is the order AWS lists them in enum errors
ACTIONS = ("ADD", "PUT", "DELETE")

_INVALID = "One or more parameter values were invalid: "
_SORTABLE = frozenset({"S", "N", "B"})
_SCALAR = frozenset({"S", "N", "B", "BOOL", "NULL"})
_ANY: frozenset[str] | None = None  # every type

# operator -> (accepted operand counts as (min, max), accepted operand types or None for any)
_RULES: dict[str, tuple[tuple[int, int], frozenset[str] | None]] = {
    "EQ": ((1, 1), _ANY),
    "NE": ((1, 1), _ANY),
    "LE": ((1, 1), _SORTABLE),
    "LT": ((1, 1), _SORTABLE),
    "GE": ((1, 1), _SORTABLE),
    "GT": ((1, 1), _SORTABLE),
    "IN": ((1, 2**31), _SORTABLE),
    "BETWEEN": ((2, 2), _SORTABLE),
    "NULL": ((0, 0), _ANY),
    "NOT_NULL": ((0, 0), _ANY),
    "CONTAINS": ((1, 1), _SCALAR),
    "NOT_CONTAINS": ((1, 1), _SCALAR),
    "BEGINS_WITH": ((1, 1), frozenset({"S", "B"})),
}
_COMPARE = {"EQ": "=", "NE": "<>", "LE": "<=", "LT": "<", "GE": ">=", "GT": ">"}
_KEY_OPERATORS = {
    "EQ": "=",
    "LE": "<=",
    "LT": "<",
    "GE": ">=",
    "GT": ">",
    "BETWEEN": "BETWEEN",
    "BEGINS_WITH": "begins_with",
}


class _Values:
    """The synthetic ``:v<n>`` placeholders a translation binds its values to."""

    def __init__(self, wire: bool) -> None:
        self.wire = wire
        self.values: dict[str, AttributeValue] = {}

    def parse(self, raw: Any) -> AttributeValue:
        return parse_value(raw, wire=self.wire)

    def bind(self, value: AttributeValue) -> ast.ValueRef:
        name = f":v{len(self.values)}"
        self.values[name] = value
        return ast.ValueRef(name)


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise serialization("Start of structure or map found where not expected")
    return value


def _value_list(raw: Any) -> list[Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise serialization("Expected list or null")
    return raw


def _path(name: str) -> ast.PathNode:
    return ast.PathNode((name,))


def _check_operands(operator: str, operands: Sequence[AttributeValue]) -> None:
    """DynamoDB's checks on a ComparisonOperator's AttributeValueList."""
    (low, high), types = _RULES[operator]
    if not low <= len(operands) <= high:
        raise validation(
            f"{_INVALID}Invalid number of argument(s) for the {operator} ComparisonOperator"
        )
    if not operands:
        return
    first = next(iter(operands[0]))
    for operand in operands:
        kind = next(iter(operand))
        if types is not None and kind not in types:
            raise validation(
                f"{_INVALID}ComparisonOperator {operator} is not valid for {kind} "
                "AttributeValue type"
            )
        if kind != first:
            raise validation(
                f"{_INVALID}AttributeValues inside AttributeValueList must be of same type"
            )
    if operator == "BETWEEN" and (compare(operands[0], operands[1]) or 0) > 0:
        raise validation(
            "The BETWEEN condition was provided a range where the lower bound is greater than "
            "the upper bound"
        )


def _comparison(
    name: str, operator: str, operands: Sequence[AttributeValue], values: _Values
) -> ast.Node:
    """The AST of ``name <operator> operands`` with legacy semantics."""
    path = _path(name)
    refs = tuple(values.bind(v) for v in operands)
    if operator in _COMPARE:
        return ast.Compare(_COMPARE[operator], path, refs[0])
    if operator == "NOT_NULL":
        return ast.Call("attribute_exists", (path,))
    if operator == "NULL":
        return ast.Call("attribute_not_exists", (path,))
    if operator == "CONTAINS":
        return ast.Call("contains", (path, refs[0]))
    if operator == "NOT_CONTAINS":
        # A missing attribute fails NOT_CONTAINS (unlike ``NOT contains(...)``).
        return ast.And(
            ast.Call("attribute_exists", (path,)),
            ast.Not(ast.Call("contains", (path, refs[0]))),
        )
    if operator == "BEGINS_WITH":
        return ast.Call("begins_with", (path, refs[0]))
    if operator == "IN":
        return ast.In(path, refs)
    assert operator == "BETWEEN"
    return ast.Between(path, refs[0], refs[1])


def _operator(raw: Any, member: str) -> str:
    if raw not in COMPARISON_OPERATORS:
        raise constraint_errors(
            [
                constraint(
                    raw,
                    member,
                    "Member must satisfy enum value set: [" + ", ".join(COMPARISON_OPERATORS) + "]",
                )
            ]
        )
    return str(raw)


def _combine(nodes: list[ast.Node], conditional_operator: str | None) -> ast.Node:
    join = ast.Or if conditional_operator == "OR" else ast.And
    tree = nodes[0]
    for node in nodes[1:]:
        tree = join(tree, node)
    return tree


def _check_conditional_operator(conditional_operator: str | None, count: int) -> None:
    if conditional_operator is None:
        return
    if count == 0:
        raise validation("ConditionalOperator cannot be used without Filter or Expected")
    if count == 1:
        raise validation(
            "ConditionalOperator can only be used when Filter or Expected has two or more elements"
        )


def _condition(
    text: str,
    nodes: dict[str, ast.Node],
    conditional_operator: str | None,
    values: _Values,
) -> Condition | None:
    _check_conditional_operator(conditional_operator, len(nodes))
    if not nodes:
        return None
    tree = _combine(list(nodes.values()), conditional_operator)
    return Condition(
        text, compile_condition(tree), values.values, frozenset(nodes), tree, *absent_names(tree)
    )


# --- Expected --------------------------------------------------------------------------------


def expected_condition(
    expected: Any, conditional_operator: str | None, *, wire: bool = False
) -> Condition | None:
    """``Expected`` (+ ``ConditionalOperator``) as a ConditionExpression would compile."""
    values = _Values(wire)
    nodes: dict[str, ast.Node] = {}
    for name, raw in (_mapping(expected) if expected is not None else {}).items():
        nodes[str(name)] = _expected_one(str(name), _mapping(raw), values)
    return _condition("Expected", nodes, conditional_operator, values)


def _expected_one(name: str, entry: Mapping[str, Any], values: _Values) -> ast.Node:
    exists = entry.get("Exists")
    operator = entry.get("ComparisonOperator")
    value = entry.get("Value")
    value_list = _value_list(entry.get("AttributeValueList"))
    if exists is not None and not isinstance(exists, bool):
        raise serialization(f"'{str(exists).upper()}' can not be converted to an Boolean")
    where = f" for Attribute: {name}"
    if exists is not None and operator is not None:
        raise validation(f"{_INVALID}Exists and ComparisonOperator cannot be used together{where}")
    if value is not None and value_list is not None:
        raise validation(f"{_INVALID}Value and AttributeValueList cannot be used together{where}")
    if operator is None and value_list is not None:
        raise validation(
            f"{_INVALID}AttributeValueList can only be used with a ComparisonOperator{where}"
        )
    if exists is False and value is not None:
        raise validation(f"{_INVALID}Value cannot be used when Exists is false{where}")
    if value is None and value_list is None:
        if operator is not None:
            if operator not in ("NULL", "NOT_NULL"):
                raise validation(
                    f"{_INVALID}Value or AttributeValueList must be used with "
                    f"ComparisonOperator: {operator}{where}"
                )
        elif exists is None:
            raise validation(f"{_INVALID}Value must be provided when Exists is null{where}")
        elif exists:
            raise validation(f"{_INVALID}Value must be provided when Exists is true{where}")
    if operator is None:
        # The simple form: Value (Exists true or absent) means EQ, Exists false means NULL.
        if exists is False:
            return _comparison(name, "NULL", (), values)
        return _comparison(name, "EQ", (values.parse(value),), values)
    checked = _operator(operator, f"expected.{name}.member.comparisonOperator")
    operands = [values.parse(v) for v in ([value] if value is not None else value_list or [])]
    _check_operands(checked, operands)
    return _comparison(name, checked, operands, values)


# --- QueryFilter / ScanFilter ----------------------------------------------------------------


def _conditions(
    conditions: Any, member: str, values: _Values
) -> list[tuple[str, str, list[AttributeValue]]]:
    """Validated ``{attr: Condition}`` entries as ``(attr, operator, operands)``."""
    out: list[tuple[str, str, list[AttributeValue]]] = []
    for name, raw in _mapping(conditions).items():
        entry = _mapping(raw)
        operator = entry.get("ComparisonOperator")
        path = f"{member}.{name}.member.comparisonOperator"
        if operator is None:
            raise constraint_errors([constraint(None, path, "Member must not be null")])
        checked = _operator(operator, path)
        operands = [values.parse(v) for v in _value_list(entry.get("AttributeValueList")) or []]
        _check_operands(checked, operands)
        out.append((str(name), checked, operands))
    return out


def filter_condition(
    conditions: Any, conditional_operator: str | None, *, kind: str, wire: bool = False
) -> Condition | None:
    """``QueryFilter`` / ``ScanFilter`` (``kind``) + ``ConditionalOperator`` as a filter."""
    values = _Values(wire)
    member = kind[0].lower() + kind[1:]
    entries = [] if conditions is None else _conditions(conditions, member, values)
    nodes = {name: _comparison(name, op, operands, values) for name, op, operands in entries}
    return _condition(kind, nodes, conditional_operator, values)


# --- KeyConditions ---------------------------------------------------------------------------


def key_condition(conditions: Any, *, wire: bool = False) -> KeyCondition:
    """``KeyConditions`` as the KeyCondition a KeyConditionExpression compiles to."""
    values = _Values(wire)
    entries = _conditions(conditions, "keyConditions", values)
    # A multi-attribute GSI key takes up to eight; the schema decides (match_schema).
    if not 1 <= len(entries) <= 8:
        raise validation("Conditions can be of length 1 or 2 only")
    terms: list[KeyTerm] = []
    for name, operator, operands in entries:
        # An operator no key can take is refused once the schema is known, after the table,
        # the index and a missing key attribute (dynalite actions/query.js): match_schema.
        key_operator = _KEY_OPERATORS.get(operator, UNINDEXABLE)
        refs = tuple(values.bind(v).name for v in operands)
        terms.append(KeyTerm(name, key_operator, refs))
    return KeyCondition("KeyConditions", tuple(terms), values.values)


# --- AttributesToGet -------------------------------------------------------------------------


def attributes_projection(names: Any) -> Projection:
    """``AttributesToGet``: top-level attribute names (a dot is part of the name)."""
    if not isinstance(names, list):
        raise serialization("Expected list or null")
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str):
            raise serialization("Start of structure or map found where not expected")
        if name in seen:
            raise validation(f"{_INVALID}Duplicate value in attribute name: {name}")
        if not name:  # as an item's empty name is worded (values.py)
            raise validation(f"{_INVALID}Empty attribute name")
        seen.add(name)
    paths = tuple((name,) for name in names)
    return Projection("AttributesToGet", paths, build_trie(paths))


# --- AttributeUpdates ------------------------------------------------------------------------

_EMPTY_LIST = ":empty"


def attribute_updates(updates: Any, *, wire: bool = False) -> Update:
    """``AttributeUpdates`` as an UpdateExpression plan (PUT -> SET, DELETE -> REMOVE or
    DELETE, ADD -> ADD, or ``list_append`` for a list, as DynamoDB's legacy ADD appends)."""
    values = _Values(wire)
    actions: list[ast.Action] = []
    for name, raw in _mapping(updates).items():
        if not name:  # as an item's empty name is worded (values.py)
            raise validation(f"{_INVALID}Empty attribute name")
        entry = _mapping(raw)
        action = entry.get("Action")
        if action is None:
            action = "PUT"
        if action not in ACTIONS:
            raise constraint_errors(
                [
                    constraint(
                        action,
                        f"attributeUpdates.{name}.member.action",
                        "Member must satisfy enum value set: [" + ", ".join(ACTIONS) + "]",
                    )
                ]
            )
        raw_value = entry.get("Value")
        value = None if raw_value is None else values.parse(raw_value)
        actions.append(_update_action(str(name), str(action), value, values))
    paths = tuple(a.path.resolved for a in actions)
    tree = ast.UpdateTree((ast.Clause("LEGACY", tuple(actions)),))
    return Update("AttributeUpdates", plan(tree, paths), values.values)


def _update_action(
    name: str, action: str, value: AttributeValue | None, values: _Values
) -> ast.Action:
    path = _path(name)
    if value is None:
        if action != "DELETE":
            raise validation(
                f"{_INVALID}Only DELETE action is allowed when no attribute value is specified"
            )
        return ast.RemoveAction(path)
    kind = next(iter(value))
    if action == "PUT":
        return ast.SetAction(path, values.bind(value))
    if action == "DELETE":
        if kind not in SET_TYPES:
            raise validation(
                f"{_INVALID}DELETE action with value is not supported for the type {kind}"
            )
        return ast.DeleteAction(path, values.bind(value))
    if kind == "L":
        if _EMPTY_LIST not in values.values:
            values.values[_EMPTY_LIST] = {"L": []}
        appended = ast.Call(
            "list_append",
            (
                ast.Call("if_not_exists", (path, ast.ValueRef(_EMPTY_LIST))),
                values.bind(value),
            ),
        )
        return ast.SetAction(path, appended)
    if kind != "N" and kind not in SET_TYPES:
        raise validation(f"{_INVALID}ADD action is not supported for the type {kind}")
    return ast.AddAction(path, values.bind(value))


__all__ = [
    "ACTIONS",
    "COMPARISON_OPERATORS",
    "attribute_updates",
    "attributes_projection",
    "expected_condition",
    "filter_condition",
    "key_condition",
]
