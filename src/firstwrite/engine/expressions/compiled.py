"""compile_expressions: one request's expressions, names and values -> ready-to-run objects.

The work that depends only on the expression text and the name map is cached
(:func:`_prepare`); per request only the values are validated and the value-type checks run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NoReturn

from ..errors import DynamoDBError, validation
from ..values import AttributeValue, Item, parse_value
from . import ast
from .evaluate import Predicate, Values, compile_condition
from .keycondition import KeyMatch, KeyTerm, key_terms, match_schema
from .projection import Trie, build_trie, project_item
from .update import Plan, apply, plan
from .validate import ValueCheck, analyse, check_name_map, check_value_keys, resolve

_NO_VALUES: Mapping[str, AttributeValue] = {}
_EMPTY_ITEM: Item = {}  # never written to: evaluation only reads


# Built per request, so not frozen (a frozen dataclass is several times dearer to build); treat
# them as immutable all the same: cached ones are shared between requests.
@dataclass(slots=True)
class Condition:
    """A ConditionExpression or FilterExpression bound to the request's values."""

    text: str
    predicate: Predicate
    values: Values
    top_level_names: frozenset[str]
    tree: ast.Node  # the resolved condition, for callers that inspect its paths
    # The attribute of an ``attribute_not_exists(name)`` condition (a top-level one), and
    # of an ``attribute_not_exists(name) OR ...`` one (or ``absent``): the condition holds
    # whenever ``name`` is missing, whatever the rest says. From :func:`absent_names` of the
    # tree, which the cached preparation computes once per expression; None only costs speed.
    absent: str | None = None
    absent_or: str | None = None


@dataclass(slots=True)
class Update:
    text: str
    plan: Plan
    values: Values

    @property
    def paths(self) -> tuple[ast.Path, ...]:
        """Every document path the update writes (for ReturnValues UPDATED_OLD/NEW)."""
        return self.plan.paths


@dataclass(slots=True)
class Projection:
    text: str
    paths: tuple[ast.Path, ...]
    trie: Trie


@dataclass(slots=True)
class KeyCondition:
    text: str
    terms: tuple[KeyTerm, ...]
    values: Values


@dataclass(slots=True)
class Compiled:
    condition: Condition | None = None
    update: Update | None = None
    projection: Projection | None = None
    filter: Condition | None = None
    key_condition: KeyCondition | None = None


@dataclass(frozen=True, slots=True)
class _Prepared:
    kind: str
    text: str
    checks: tuple[ValueCheck, ...]
    tree: ast.Tree
    runnable: Any  # Predicate, Plan, (paths, trie) or key terms
    top_level_names: frozenset[str]
    names: frozenset[str]  # placeholders the text uses
    values: frozenset[str]
    absent: tuple[str | None, str | None]  # absent_names of a condition's tree


@lru_cache(maxsize=8192)
def _prepare(
    kind: str, text: str, names: tuple[tuple[str, str], ...], value_keys: frozenset[str]
) -> _Prepared:
    resolved = resolve(kind, text, names, value_keys)
    tree = resolved.tree
    runnable: Any
    absent: tuple[str | None, str | None] = (None, None)
    if isinstance(tree, ast.UpdateTree):
        runnable = plan(tree, resolved.extra["paths"])
    elif isinstance(tree, ast.ProjectionTree):
        paths = resolved.extra["paths"]
        runnable = (paths, build_trie(paths))
    elif kind == "KeyConditionExpression":
        try:
            runnable = key_terms(tree)
        except DynamoDBError as error:
            # Its shape is judged after every expression's own checks (an empty FilterExpression
            # is reported first: dynalite's tests of DynamoDB): compile_expressions.
            runnable = error
    else:
        runnable = compile_condition(tree)
        absent = absent_names(tree)
    analysis = analyse(kind, text)
    return _Prepared(
        kind,
        text,
        resolved.checks,
        tree,
        runnable,
        resolved.extra.get("top_level_names", frozenset()),
        analysis.names,
        analysis.values,
        absent,
    )


@lru_cache(maxsize=4096)
def _number(text: str) -> str:
    normalized: str = parse_value({"N": text})["N"]
    return normalized


def _parse_value(raw: Any, wire: bool) -> AttributeValue:
    # Fast path for the common scalar placeholders; everything else goes through values.py.
    if type(raw) is dict and len(raw) == 1:
        ((kind, inner),) = raw.items()
        if type(inner) is str:
            if kind == "S":
                return {"S": inner}
            if kind == "N":
                return {"N": _number(inner)}
    return parse_value(raw, wire=wire)


@lru_cache(maxsize=4096)
def _names(items: tuple[tuple[Any, Any], ...]) -> tuple[tuple[str, str], ...]:
    return check_name_map(dict(items))


@lru_cache(maxsize=4096)
def _value_keys(keys: tuple[Any, ...]) -> None:
    check_value_keys(dict.fromkeys(keys))


def _parse_values(values: Mapping[str, Any], wire: bool) -> dict[str, AttributeValue]:
    _value_keys(tuple(values))
    parsed: dict[str, AttributeValue] = {}
    for key, raw in values.items():
        try:
            parsed[key] = _parse_value(raw, wire)
        except DynamoDBError as exc:
            if exc.code != "ValidationException":
                raise
            # AWS appends the key, except to the empty-set message (verified on AWS by moto).
            suffix = (
                ""
                if "may not be empty" in exc.message or "should not be empty" in exc.message
                else f" for key {key}"
            )
            raise validation(
                f"ExpressionAttributeValues contains invalid value: {exc.message}{suffix}"
            ) from None
    return parsed


# DynamoDB's order of checks: Update, Condition, KeyCondition, Filter, Projection.
_ORDER = (
    "UpdateExpression",
    "ConditionExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)


@dataclass(frozen=True, slots=True)
class _Bound:
    """What a request's compilation owes to its texts, names and value keys alone (cached)."""

    prepared: tuple[_Prepared, ...]  # in _ORDER
    unused_names: str | None  # the message, raised after the value checks
    unused_values: frozenset[str] | None  # raised after unused names
    constant: Compiled | None  # the whole result, when the request has no values


@lru_cache(maxsize=4096)
def _bind(
    texts: tuple[str | None, ...],
    name_items: tuple[tuple[str, str], ...],
    names_given: bool,
    value_keys: frozenset[str],
    values_given: bool,
) -> _Bound | None:
    """The cached part of :func:`compile_expressions`; ``None`` if an expression is invalid
    (then the uncached path raises its error in DynamoDB's order)."""
    try:
        prepared = tuple(
            _prepare(kind, text, name_items, value_keys)
            for kind, text in zip(_ORDER, texts, strict=True)
            if text is not None
        )
    except DynamoDBError:
        return None
    used_names: set[str] = set()
    used_values: set[str] = set()
    for item in prepared:
        used_names |= item.names
        used_values |= item.values
    unused_names: str | None = None
    if names_given and len(used_names) != len(name_items):
        keys = [k for k, _ in name_items if k not in used_names]
        unused_names = (
            "Value provided in ExpressionAttributeNames unused in expressions: "
            f"keys: {{{', '.join(keys)}}}"
        )
    unused_values = value_keys - used_values if values_given else None
    if not unused_values:
        unused_values = None
    constant = None
    shaped = not any(isinstance(item.runnable, DynamoDBError) for item in prepared)
    if not values_given and unused_names is None and shaped:
        constant = _assemble(prepared, _NO_VALUES)
    return _Bound(prepared, unused_names, unused_values, constant)


def _assemble(prepared: tuple[_Prepared, ...], values: Mapping[str, AttributeValue]) -> Compiled:
    """The Compiled of prepared expressions bound to the request's parsed values."""
    parts: dict[str, Any] = {}
    for item in prepared:
        kind = item.kind
        if kind == "ConditionExpression" or kind == "FilterExpression":
            assert not isinstance(item.tree, (ast.UpdateTree, ast.ProjectionTree))
            condition = Condition(
                item.text, item.runnable, values, item.top_level_names, item.tree, *item.absent
            )
            parts["condition" if kind == "ConditionExpression" else "filter"] = condition
        elif kind == "UpdateExpression":
            parts["update"] = Update(item.text, item.runnable, values)
        elif kind == "ProjectionExpression":
            parts["projection"] = Projection(item.text, *item.runnable)
        else:
            if isinstance(item.runnable, DynamoDBError):
                raise item.runnable
            parts["key_condition"] = KeyCondition(item.text, item.runnable, values)
    return Compiled(**parts)


# The Compiled of valid expressions that use no names and no values, by their texts.
_CONSTANTS: dict[tuple[str | None, ...], Compiled] = {}


def compile_expressions(
    condition: str | None = None,
    update: str | None = None,
    projection: str | None = None,
    filter: str | None = None,
    key_condition: str | None = None,
    names: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
    wire: bool = False,
) -> Compiled:
    """Validate and compile a request's expressions (DynamoDB's checks and messages)."""
    texts = (update, condition, key_condition, filter, projection)
    if names is None and values is None:
        constant = _CONSTANTS.get(texts)  # e.g. attribute_not_exists(pk): no names, no values
        if constant is not None:
            return constant
    name_items: tuple[tuple[str, str], ...] = () if names is None else _names(tuple(names.items()))
    parsed_values = _NO_VALUES if values is None else _parse_values(values, wire)
    value_keys = frozenset(parsed_values)
    bound = _bind(texts, name_items, names is not None, value_keys, values is not None)
    if bound is None:
        _raise_in_order(texts, name_items, value_keys, parsed_values)
    for item in bound.prepared:
        for check in item.checks:
            error = check(parsed_values)
            if error is not None:
                raise error
    for item in bound.prepared:
        if isinstance(item.runnable, DynamoDBError):  # a KeyConditionExpression's shape
            raise item.runnable
    if bound.constant is not None:
        if names is None and len(_CONSTANTS) < 4096:
            _CONSTANTS[texts] = bound.constant
        return bound.constant
    if bound.unused_names is not None:
        raise validation(bound.unused_names)
    if bound.unused_values is not None:
        # Listed in the request's order, not the cache key's.
        unused = [k for k in parsed_values if k in bound.unused_values]
        raise validation(
            "Value provided in ExpressionAttributeValues unused in expressions: "
            f"keys: {{{', '.join(unused)}}}"
        )
    return _assemble(bound.prepared, parsed_values)


def _raise_in_order(
    texts: tuple[str | None, ...],
    name_items: tuple[tuple[str, str], ...],
    value_keys: frozenset[str],
    parsed_values: Mapping[str, AttributeValue],
) -> NoReturn:
    """Raise the error of a request with an invalid expression, in DynamoDB's order: an earlier
    expression's value checks fail before a later expression's syntax."""
    for kind, text in zip(_ORDER, texts, strict=True):
        if text is not None:
            for check in _prepare(kind, text, name_items, value_keys).checks:
                error = check(parsed_values)
                if error is not None:
                    raise error
    raise AssertionError("no invalid expression")  # pragma: no cover - _bind found one


def absent_names(tree: ast.Node) -> tuple[str | None, str | None]:
    """(``absent``, ``absent_or``) of a condition tree: see :class:`Condition`."""
    absent = _absent_of(tree)
    return absent, absent or _absent_or_of(tree)


def _absent_of(tree: ast.Node | None) -> str | None:
    if isinstance(tree, ast.Call) and tree.name == "attribute_not_exists" and len(tree.args) == 1:
        path = tree.args[0]
        if isinstance(path, ast.PathNode) and len(path.parts) == 1:
            name = path.parts[0]
            if isinstance(name, str):
                return name
    return None


def _absent_or_of(tree: ast.Node | None) -> str | None:
    while isinstance(tree, ast.Paren):
        tree = tree.inner
    if isinstance(tree, ast.Or):
        return _absent_or_of(tree.left) or _absent_or_of(tree.right)
    return _absent_of(tree)


def evaluate(condition: Condition, item: Item | None) -> bool:
    """Whether ``item`` (``None``: no item) satisfies the condition or filter."""
    return condition.predicate(item if item is not None else _EMPTY_ITEM, condition.values)


def apply_update(
    update: Update, item: Item | None, *, key_names: frozenset[str] = frozenset()
) -> Item:
    """The item ``update`` makes of ``item``; a new dict, ``item`` is left untouched."""
    legacy = update.text == "AttributeUpdates"
    return apply(update.plan, update.values, item, key_names, legacy=legacy)


def project(item: Item, projection: Projection | Sequence[ast.Path]) -> Item:
    """Keep only the projected document paths of ``item``."""
    if isinstance(projection, Projection):
        return project_item(item, projection.trie)
    return project_item(item, build_trie(projection))


def key_condition_range(
    key_condition: KeyCondition,
    hash_keys: tuple[str, ...],
    range_keys: tuple[str, ...] = (),
    *,
    counted: int | None = None,
) -> KeyMatch:
    """The key values and sort-key condition of a Query, checked against the schema
    (``counted``: :func:`.keycondition.match_schema`'s)."""
    legacy = key_condition.text == "KeyConditions"
    return match_schema(
        key_condition.terms,
        key_condition.values,
        hash_keys,
        range_keys,
        legacy=legacy,
        counted=counted,
    )
