"""KeyConditionExpression: its shape (checked at compile time) and the key schema match.

A key condition is parsed by the condition grammar; here it must be one or two terms joined by
AND, each naming one top-level attribute against expression values:
``k = :v``, ``k < :v`` (and ``<= > >=``), ``k BETWEEN :a AND :b`` or ``begins_with(k, :p)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise

from ..errors import DynamoDBError, validation
from ..values import AttributeValue
from . import ast

_PREFIX = "Invalid KeyConditionExpression: "
# The operator of a legacy KeyConditions entry no key can be queried by (NE, IN, NULL, ...).
UNINDEXABLE = "UNINDEXABLE"
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True, slots=True)
class KeyTerm:
    """One key condition: ``attribute operator operands`` with ``:value`` names."""

    attribute: str
    operator: str  # = < <= > >= BETWEEN begins_with
    operands: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RangeCondition:
    """The sort-key condition of a Query, with its AttributeValue operands."""

    operator: str  # = < <= > >= BETWEEN begins_with
    operands: tuple[AttributeValue, ...]


def _invalid(message: str) -> DynamoDBError:
    return validation(_PREFIX + message)


def key_terms(tree: ast.Node) -> tuple[KeyTerm, ...]:
    """Check the shape of a resolved KeyConditionExpression and list its terms."""
    terms: list[KeyTerm] = []
    seen: set[str] = set()
    for node in _conjuncts(tree):
        term = _term(node)
        if term.attribute in seen:
            raise validation("KeyConditionExpressions must only contain one condition per key")
        seen.add(term.attribute)
        terms.append(term)
    return tuple(terms)


def _conjuncts(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.And):
        return [*_conjuncts(node.left), *_conjuncts(node.right)]
    if isinstance(node, ast.Or):
        raise _invalid("Invalid operator used in KeyConditionExpression: OR")
    if isinstance(node, ast.Not):
        raise _invalid("Invalid operator used in KeyConditionExpression: NOT")
    return [node]


def _term(node: ast.Node) -> KeyTerm:
    if isinstance(node, ast.In):
        raise _invalid("Invalid operator used in KeyConditionExpression: IN")
    if isinstance(node, ast.Compare) and node.op == "<>":
        raise _invalid("Invalid operator used in KeyConditionExpression: <>")
    if isinstance(node, ast.Call) and node.name != "begins_with":
        if node.name == "size":  # pragma: no cover - size alone is rejected earlier
            raise _invalid("KeyConditionExpressions cannot contain nested operations")
        raise _invalid(f"Invalid operator used in KeyConditionExpression: {node.name}")
    operands: tuple[ast.Node, ...]
    if isinstance(node, ast.Compare):
        operands = (node.left, node.right)
    elif isinstance(node, ast.Between):
        operands = (node.subject, node.low, node.high)
    else:
        assert isinstance(node, ast.Call)
        operands = node.args
    attribute: str | None = None
    position = 0
    for index, operand in enumerate(operands):
        if isinstance(operand, ast.Call):
            raise _invalid("KeyConditionExpressions cannot contain nested operations")
        if isinstance(operand, ast.PathNode):
            if attribute is not None:
                raise _invalid(
                    "Invalid condition in KeyConditionExpression: "
                    "Multiple attribute names used in one condition"
                )
            if len(operand.parts) > 1:
                raise validation(
                    "KeyConditionExpressions cannot have conditions on nested attributes"
                )
            first = operand.parts[0]
            assert isinstance(first, str)
            attribute, position = first, index
    if attribute is None:
        raise _invalid("Invalid condition in KeyConditionExpression: No key attribute specified")
    values = tuple(o.name for o in operands if isinstance(o, ast.ValueRef))
    if isinstance(node, ast.Compare):
        operator = node.op if position == 0 else _FLIP[node.op]
        return KeyTerm(attribute, operator, values)
    name = "BETWEEN" if isinstance(node, ast.Between) else "begins_with"
    if position != 0:
        raise _invalid(
            f"Invalid condition in KeyConditionExpression: {name} operator must have the key "
            "attribute as its first operand"
        )
    return KeyTerm(attribute, name, values)


@dataclass(frozen=True, slots=True)
class KeyMatch:
    """A key condition matched to a key schema: the partition-key values (in KeySchema order),
    the values of the sort-key attributes compared with ``=`` before the last one used, and the
    condition on that last one (``None``: the sort key is not used)."""

    hash_values: tuple[AttributeValue, ...]
    equal: tuple[AttributeValue, ...]
    condition: RangeCondition | None


def match_schema(
    terms: tuple[KeyTerm, ...],
    values: Mapping[str, AttributeValue],
    hash_keys: tuple[str, ...],
    range_keys: tuple[str, ...],
    *,
    legacy: bool = False,
    counted: int | None = None,
) -> KeyMatch:
    """Match a Query's key conditions to a key schema, with DynamoDB's checks and messages.

    A multi-attribute key (a GSI's, up to four HASH and four RANGE attributes) takes ``=`` on
    every partition-key attribute and conditions on a leading run of its sort-key attributes,
    ``=`` on all but the last (moto's AWS-verified tests, test_dynamodb_multi_attribute_gsi.py).
    ``counted``: how many conditions are too many (default: the key's attributes). An index's
    count takes in its table's key attributes too: a condition on one of those is
    ``Query key condition not supported``, as on any attribute the index key lacks, not a
    count error (ScyllaDB's test_gsi.py, test_faux_range_key_*, run against DynamoDB).
    """
    keys = len(hash_keys) + len(range_keys)
    if legacy and keys <= 2 and len(terms) > 2:
        raise validation("Conditions can be of length 1 or 2 only")
    counted = keys if counted is None else counted
    if len(terms) > counted:
        raise validation(
            f"The number of query conditions ({len(terms)}) exceeds the number of key "
            f"attributes defined in the schema ({counted})"
        )
    by_name = {t.attribute: t for t in terms}
    for name in hash_keys:
        if name not in by_name:
            if len(hash_keys) > 1:
                raise _hash_equality(name)
            raise validation(f"Query condition missed key schema element: {name}")
    if any(by_name[n].operator == UNINDEXABLE for n in (*hash_keys, *range_keys) if n in by_name):
        raise validation("Attempted conditional constraint is not an indexable operation")
    if any(t.attribute not in hash_keys and t.attribute not in range_keys for t in terms):
        missing = next((n for n in range_keys if n not in by_name), None)
        if missing is None:  # every key attribute given, and one more (an index's table key)
            raise validation("Query key condition not supported")
        raise validation(f"Query condition missed key schema element: {missing}")
    for name in hash_keys:
        if by_name[name].operator != "=":
            if len(hash_keys) > 1:
                raise _hash_equality(name)
            raise validation("Query key condition not supported")
    used = [name for name in range_keys if name in by_name]
    for position, name in enumerate(range_keys[: len(used)]):
        if name not in by_name:
            raise _range_equality(name, used[position])
    for name, later in pairwise(used):
        if by_name[name].operator != "=":
            # A range condition before the last attribute used (ScyllaDB's
            # test_gsi_composite_keys.py, checked on DynamoDB to name both attributes).
            raise _range_equality(name, later)
    hash_values = tuple(values[by_name[name].operands[0]] for name in hash_keys)
    equal = tuple(values[by_name[name].operands[0]] for name in used[:-1])
    if not used:
        return KeyMatch(hash_values, equal, None)
    term = by_name[used[-1]]
    condition = RangeCondition(term.operator, tuple(values[n] for n in term.operands))
    return KeyMatch(hash_values, equal, condition)


def _range_equality(name: str, later: str) -> DynamoDBError:
    """A sort-key attribute skipped, or given a range condition, before ``later`` (moto's
    AWS-verified tests: the message names the attribute; ScyllaDB's, run on DynamoDB: both)."""
    return validation(
        f"RANGE key attributes {name} must have equality conditions specified in the query "
        f"because a condition is present on key attribute {later}"
    )


def _hash_equality(name: str) -> DynamoDBError:
    """A partition-key attribute of a multi-attribute key missing or not compared with ``=``.

    ScyllaDB's test_gsi_composite_keys.py (run on DynamoDB) pins "HASH ... equality"; the rest
    of the wording follows DynamoDB's message for the sort-key attributes."""
    return validation(
        f"HASH key attributes {name} must have equality conditions specified in the query"
    )
