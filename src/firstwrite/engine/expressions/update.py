"""Applying an UpdateExpression to an item.

Every operand is read from the item as it was before the update. SET, ADD and DELETE run
first, in expression order; REMOVE runs last, deepest-and-highest index first, so that list
indexes in one expression all refer to the original list (``REMOVE a[1] SET a[3] = :v`` on
``[2,3,4,5,6,7]`` gives ``[2,4,:v,6,7]``). SET on an index past the end of a list appends,
several such appends in index order. The input item is never mutated: containers on a
modified path are copied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import DynamoDBError, invalid_parameters, validation
from ..values import AttributeValue, Item, number_arithmetic
from . import ast
from .evaluate import Values, lookup

_MISSING = "The provided expression refers to an attribute that does not exist in the item"
_BAD_TYPE = "An operand in the update expression has an incorrect data type"
# The same refusal of a legacy AttributeUpdates ADD or DELETE: dynalite's test/updateItem.js
# (run against DynamoDB), "should return ValidationException if trying to delete NS from SS";
# the API reference lists it among TransactionCanceledException's reasons.
LEGACY_BAD_TYPE = "Type mismatch for attribute to update"
_BAD_PATH = "The document path provided in the update expression is invalid for update"

Operand = Callable[[Item, Values], AttributeValue]


@dataclass(frozen=True, slots=True)
class Plan:
    """A resolved UpdateExpression ready to apply."""

    sets: tuple[tuple[ast.Path, Operand], ...]
    adds: tuple[tuple[ast.Path, str], ...]
    deletes: tuple[tuple[ast.Path, str], ...]
    removes: tuple[ast.Path, ...]
    paths: tuple[ast.Path, ...]  # every path the update writes, in expression order


def plan(tree: ast.UpdateTree, paths: tuple[ast.Path, ...]) -> Plan:
    sets: list[tuple[ast.Path, Operand]] = []
    adds: list[tuple[ast.Path, str]] = []
    deletes: list[tuple[ast.Path, str]] = []
    removes: list[ast.Path] = []
    for clause in tree.clauses:
        for action in clause.actions:
            path = action.path.resolved
            if isinstance(action, ast.SetAction):
                sets.append((path, _operand(action.value)))
            elif isinstance(action, ast.AddAction):
                adds.append((path, action.value.name))
            elif isinstance(action, ast.DeleteAction):
                deletes.append((path, action.value.name))
            else:
                removes.append(path)
    # Deepest / highest index first, so a removal never shifts an index still to be removed.
    removes.sort(key=lambda p: [(1, x) if isinstance(x, int) else (0, x) for x in p], reverse=True)
    return Plan(tuple(sets), tuple(adds), tuple(deletes), tuple(removes), paths)


def _operand(node: ast.Node) -> Operand:
    if isinstance(node, ast.PathNode):
        path = node.resolved

        def read(item: Item, _values: Values) -> AttributeValue:
            value = lookup(item, path)
            if value is None:
                raise validation(_MISSING)
            return value

        return read
    if isinstance(node, ast.ValueRef):
        key = node.name
        return lambda _item, values: values[key]
    if isinstance(node, ast.Arith):
        left, right = _operand(node.left), _operand(node.right)
        subtract = node.op == "-"

        def arith(item: Item, values: Values) -> AttributeValue:
            a, b = left(item, values), right(item, values)
            if "N" not in a or "N" not in b:
                raise validation(_BAD_TYPE)
            return {"N": number_arithmetic(a["N"], b["N"], subtract=subtract)}

        return arith
    if isinstance(node, ast.Call) and node.name == "if_not_exists":
        target = node.args[0]
        # A non-path first argument is rejected by the value checks before this ever runs.
        path = target.resolved if isinstance(target, ast.PathNode) else ("",)
        fallback = _operand(node.args[1])

        def if_not_exists(item: Item, values: Values) -> AttributeValue:
            value = lookup(item, path)
            return value if value is not None else fallback(item, values)

        return if_not_exists
    if isinstance(node, ast.Call) and node.name == "list_append":
        first, second = _operand(node.args[0]), _operand(node.args[1])

        def list_append(item: Item, values: Values) -> AttributeValue:
            a, b = first(item, values), second(item, values)
            if "L" not in a or "L" not in b:
                raise validation(_BAD_TYPE)
            return {"L": [*a["L"], *b["L"]]}

        return list_append
    raise AssertionError(f"unexpected SET operand {node!r}")  # pragma: no cover


def apply(
    update: Plan,
    values: Values,
    item: Item | None,
    key_names: frozenset[str],
    *,
    legacy: bool = False,
) -> Item:
    """The item ``update`` makes of ``item`` (``legacy``: an AttributeUpdates plan, whose type
    mismatches DynamoDB words apart)."""
    if not legacy:
        return _apply(update, values, item, key_names)
    try:
        return _apply(update, values, item, key_names)
    except DynamoDBError as error:
        if error.message != _BAD_TYPE:
            raise
    raise validation(LEGACY_BAD_TYPE)


def refuse_key_paths(update: Plan, key_names: frozenset[str]) -> None:
    """Refuse an update that writes (SET, REMOVE, ADD, DELETE) a key attribute, whether or not
    the item exists."""
    for path in update.paths:
        if path[0] in key_names:
            raise invalid_parameters(
                f"Cannot update attribute {path[0]}. This attribute is part of the key"
            )


def _apply(update: Plan, values: Values, item: Item | None, key_names: frozenset[str]) -> Item:
    old: Item = item or {}
    refuse_key_paths(update, key_names)
    # All operands see the old item; compute them before touching anything.
    computed = [(path, operand(old, values)) for path, operand in update.sets]
    new: Item = dict(old)
    appends: dict[tuple[Any, ...], list[tuple[int, AttributeValue]]] = {}
    for path, value in computed:
        _set(new, path, value, appends)
    for parent_path, pending in appends.items():
        elements = _container(new, parent_path)
        for _index, value in sorted(pending, key=lambda p: p[0]):
            elements.append(value)
    for path, name in update.adds:
        _add(new, path, values[name])
    for path, name in update.deletes:
        _delete(new, path, values[name])
    for path in update.removes:
        if lookup(old, path) is not None:
            _remove(new, path)
        elif item is not None and not _parent_holds(old, path):
            # REMOVE a.c with a missing or not a map (a[0]: not a list) is refused on an item
            # that exists; on a missing item it removes nothing (DynamoDB's answers, quoted in
            # ScyllaDB's test_update_expression.py, test_nested_attribute_update_bad_path_*).
            raise validation(_BAD_PATH)
    return new


def _parent_holds(item: Item, path: ast.Path) -> bool:
    """Whether ``path``'s parent exists in ``item`` and is of the kind its last step needs (a
    map for a name, a list for an index)."""
    if len(path) == 1:
        return True
    parent = lookup(item, path[:-1])
    return parent is not None and ("L" if isinstance(path[-1], int) else "M") in parent


# --- path surgery (copy-on-write) ------------------------------------------------------------


def _writable_parent(item: Item, path: ast.Path) -> tuple[dict[str, Any] | list[Any], Any]:
    """Copy the containers down to ``path``'s parent; return (parent container, last part).

    Raises the "invalid for update" error if an intermediate step is missing or mistyped.
    """
    container: dict[str, Any] | list[Any] = item
    for depth, part in enumerate(path[:-1]):
        child = _child(container, part)
        if child is None:
            raise validation(_BAD_PATH)
        nxt = path[depth + 1]
        wanted = "L" if isinstance(nxt, int) else "M"
        if wanted not in child:
            raise validation(_BAD_PATH)
        copy: dict[str, Any] | list[Any] = list(child["L"]) if wanted == "L" else dict(child["M"])
        _put(container, part, {wanted: copy})
        container = copy
    return container, path[-1]


def _child(container: dict[str, Any] | list[Any], part: Any) -> AttributeValue | None:
    if isinstance(container, list):
        return container[part] if part < len(container) else None
    value: AttributeValue | None = container.get(part)
    return value


def _put(container: dict[str, Any] | list[Any], part: Any, value: AttributeValue) -> None:
    if isinstance(container, list):
        container[part] = value
    else:
        container[part] = value


def _container(item: Item, parent_path: tuple[Any, ...]) -> list[Any]:
    value: Any = {"M": item}
    for part in parent_path:
        value = value["L"][part] if isinstance(part, int) else value["M"][part]
    elements: list[Any] = value["L"]
    return elements


def _set(
    item: Item,
    path: ast.Path,
    value: AttributeValue,
    appends: dict[tuple[Any, ...], list[tuple[int, AttributeValue]]],
) -> None:
    parent, last = _writable_parent(item, path)
    if isinstance(parent, list):
        assert isinstance(last, int)
        if last < len(parent):
            parent[last] = value
        else:
            appends.setdefault(tuple(path[:-1]), []).append((last, value))
    else:
        parent[last] = value


def _add(item: Item, path: ast.Path, operand: AttributeValue) -> None:
    parent, last = _writable_parent(item, path)
    if isinstance(parent, list) and last >= len(parent):
        raise validation(_BAD_PATH)
    current = _child(parent, last)
    ((kind, raw),) = operand.items()
    if current is None:
        result: AttributeValue = {kind: list(raw) if kind != "N" else raw}
    elif kind == "N" and "N" in current:
        result = {"N": number_arithmetic(current["N"], raw)}
    elif kind != "N" and kind in current:
        existing = current[kind]
        seen = set(existing)
        result = {kind: [*existing, *(v for v in raw if v not in seen)]}
    else:
        raise validation(_BAD_TYPE)
    _put(parent, last, result)


def _delete(item: Item, path: ast.Path, operand: AttributeValue) -> None:
    if lookup(item, path) is None:
        return
    parent, last = _writable_parent(item, path)
    current = _child(parent, last)
    assert current is not None
    ((kind, raw),) = operand.items()
    if kind not in current:
        raise validation(_BAD_TYPE)
    drop = set(raw)
    remaining = [v for v in current[kind] if v not in drop]
    if remaining:
        _put(parent, last, {kind: remaining})
    elif isinstance(parent, list):
        del parent[last]
    else:
        del parent[last]


def _remove(item: Item, path: ast.Path) -> None:
    try:
        parent, last = _writable_parent(item, path)
    except DynamoDBError:
        return
    if isinstance(parent, list):
        if last < len(parent):
            del parent[last]
    else:
        parent.pop(last, None)
