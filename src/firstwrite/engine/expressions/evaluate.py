"""Conditions and filters: a resolved tree compiled once into nested closures.

Semantics (reference section 4.2): a missing attribute makes ``=`` false and ``<>`` true;
ordering comparisons, BETWEEN and functions on missing attributes or mismatched types are
false, never errors. A missing item behaves as an item with no attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..values import AttributeValue, Item, compare, equal
from . import ast

Values = Mapping[str, AttributeValue]
Getter = Callable[[Item, Values], AttributeValue | None]
Predicate = Callable[[Item, Values], bool]


def lookup(item: Mapping[str, AttributeValue], path: ast.Path) -> AttributeValue | None:
    """The value at ``path`` in ``item``, or ``None`` if any step is missing or mistyped."""
    first = path[0]
    assert isinstance(first, str)
    value = item.get(first)
    for part in path[1:]:
        if value is None:
            return None
        if isinstance(part, int):
            elements = value.get("L")
            if elements is None or part >= len(elements):
                return None
            value = elements[part]
        else:
            members = value.get("M")
            if members is None:
                return None
            value = members.get(part)
    return value


def compile_getter(node: ast.Node) -> Getter:
    """An operand: ``(item, values) -> AttributeValue | None``."""
    if isinstance(node, ast.PathNode):
        path = node.resolved
        if len(path) == 1:
            name = str(path[0])
            return lambda item, _values: item.get(name)
        return lambda item, _values: lookup(item, path)
    if isinstance(node, ast.ValueRef):
        key = node.name
        return lambda _item, values: values[key]
    if isinstance(node, ast.Call) and node.name == "size":
        inner = compile_getter(node.args[0])
        return lambda item, values: _size(inner(item, values))
    raise AssertionError(f"not an operand: {node!r}")  # pragma: no cover


def _size(value: AttributeValue | None) -> AttributeValue | None:
    if value is None:
        return None
    ((kind, raw),) = value.items()
    if kind in ("N", "BOOL", "NULL"):
        return None
    # Strings count characters (code points), as moto does; binary counts bytes.
    return {"N": str(len(raw))}


def compile_condition(node: ast.Node) -> Predicate:
    if isinstance(node, ast.And):
        left, right = compile_condition(node.left), compile_condition(node.right)
        return lambda item, values: left(item, values) and right(item, values)
    if isinstance(node, ast.Or):
        left, right = compile_condition(node.left), compile_condition(node.right)
        return lambda item, values: left(item, values) or right(item, values)
    if isinstance(node, ast.Not):
        inner = compile_condition(node.operand)
        return lambda item, values: not inner(item, values)
    if isinstance(node, ast.Compare):
        return _compile_compare(node)
    if isinstance(node, ast.Between):
        subject, low, high = (compile_getter(n) for n in (node.subject, node.low, node.high))

        def between(item: Item, values: Values) -> bool:
            value = subject(item, values)
            if value is None:
                return False
            above = compare(value, low(item, values) or {"NULL": True})
            if above is None or above < 0:
                return False
            below = compare(value, high(item, values) or {"NULL": True})
            return below is not None and below <= 0

        return between
    if isinstance(node, ast.In):
        subject = compile_getter(node.subject)
        options = tuple(compile_getter(o) for o in node.options)

        def in_(item: Item, values: Values) -> bool:
            value = subject(item, values)
            return value is not None and any(equal(value, o(item, values)) for o in options)

        return in_
    if isinstance(node, ast.Call):
        return _compile_function(node)
    raise AssertionError(f"not a condition: {node!r}")  # pragma: no cover


def _compile_compare(node: ast.Compare) -> Predicate:
    left, right = compile_getter(node.left), compile_getter(node.right)
    op = node.op
    if op == "=":
        return lambda item, values: equal(left(item, values), right(item, values))
    if op == "<>":
        return lambda item, values: not equal(left(item, values), right(item, values))

    accept = {"<": (-1,), "<=": (-1, 0), ">": (1,), ">=": (1, 0)}[op]

    def ordered(item: Item, values: Values) -> bool:
        a, b = left(item, values), right(item, values)
        if a is None or b is None:
            return False
        return compare(a, b) in accept

    return ordered


def _compile_function(node: ast.Call) -> Predicate:
    name = node.name
    if name in ("attribute_exists", "attribute_not_exists"):
        target = compile_getter(node.args[0])
        if name == "attribute_exists":
            return lambda item, values: target(item, values) is not None
        return lambda item, values: target(item, values) is None
    first, second = compile_getter(node.args[0]), compile_getter(node.args[1])
    if name == "attribute_type":

        def attribute_type(item: Item, values: Values) -> bool:
            value = first(item, values)
            wanted = second(item, values)
            return value is not None and wanted is not None and wanted.get("S") in value

        return attribute_type
    if name == "begins_with":

        def begins_with(item: Item, values: Values) -> bool:
            value, prefix = first(item, values), second(item, values)
            if value is None or prefix is None:
                return False
            for kind in ("S", "B"):
                if kind in value and kind in prefix:
                    return bool(value[kind].startswith(prefix[kind]))
            return False

        return begins_with
    if name == "contains":
        return lambda item, values: contains(first(item, values), second(item, values))
    raise AssertionError(f"unexpected function {name!r}")  # pragma: no cover


def contains(value: AttributeValue | None, operand: AttributeValue | None) -> bool:
    """``contains``: substring, sub-sequence, set membership or list membership."""
    if value is None or operand is None:
        return False
    ((kind, raw),) = value.items()
    ((operand_kind, operand_raw),) = operand.items()
    if kind in ("S", "B"):
        return operand_kind == kind and operand_raw in raw
    if kind in ("SS", "NS", "BS"):
        return operand_kind == kind[0] and operand_raw in raw
    if kind == "L":
        return any(equal(element, operand) for element in raw)
    return False
