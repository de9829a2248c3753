"""The semantic pass: everything DynamoDB checks after the grammar accepted the text.

It runs in three phases so the hot path stays cheap:

1. :func:`analyse` (cached per expression text): checks that depend on the text alone --
   bare operands where a condition belongs, limits, redundant parentheses, function names
   and placement, reserved words, operand counts -- and collects the placeholders used.
2. :func:`resolve` (cached per text + the request's name map + its value keys): undefined
   names/values, placeholder substitution, "distinct operand" checks, overlapping paths,
   KeyConditionExpression shape. Produces the resolved tree and the per-call checks.
3. :class:`ValueCheck` callables (per request): checks that look at the values themselves
   (operand types, BETWEEN bounds, ``attribute_type`` names).

Errors are reported in DynamoDB's precedence (as dynalite orders them): syntax, limits,
parentheses, unknown function, misused function, reserved word, undefined placeholder,
operand count, distinct operands, operand types.

Size: one concept, DynamoDB's semantic checks in that one precedence order. The phases share
the walk over the tree and the order itself; split across files, the order would be too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import DynamoDBError, validation
from ..values import SET_TYPES, TYPE_WORDS, AttributeValue, compare, describe
from . import ast
from .parser import MAX_OPERATORS, invalid, parse, syntax_error
from .reserved import is_reserved

MAX_EXPRESSION_BYTES = 4096
MAX_IN_OPERANDS = 100
MAX_PATH_DEPTH = 32
MAX_LIST_INDEX = 2**31 - 1

CONDITION_FUNCTIONS = {
    "attribute_exists": 1,
    "attribute_not_exists": 1,
    "attribute_type": 2,
    "begins_with": 2,
    "contains": 2,
}
UPDATE_FUNCTIONS = {"if_not_exists": 2, "list_append": 2}
ATTRIBUTE_TYPES = ("S", "SS", "N", "NS", "B", "BS", "BOOL", "NULL", "L", "M")
_VALID_TYPES_TEXT = "{B,NULL,SS,BOOL,L,BS,N,NS,S,M}"
_ORDERING = ("<", "<=", ">", ">=")

ValueCheck = Callable[[Mapping[str, AttributeValue]], DynamoDBError | None]

# Error categories, highest precedence first.
_SYNTAX, _LIMIT, _PARENS, _FUNCTION_NAME, _MISUSE, _RESERVED, _OPERANDS = range(7)


@dataclass(frozen=True, slots=True)
class Analysis:
    """Phase 1: what the text alone says."""

    kind: str
    text: str
    tree: ast.Tree
    error: DynamoDBError | None  # highest-precedence static error before undefined refs
    operand_error: DynamoDBError | None  # operand counts: reported after undefined refs
    refs: tuple[str, ...]  # every #name / :value in text order
    names: frozenset[str]
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class Resolved:
    """Phase 2: the tree with placeholders substituted, and what still needs the values."""

    kind: str
    tree: ast.Tree
    checks: tuple[ValueCheck, ...]
    extra: dict[str, Any] = field(default_factory=dict)


# --- phase 1 ---------------------------------------------------------------------------------


def check_size(kind: str, text: str) -> None:
    size = len(text.encode("utf-8"))
    if size > MAX_EXPRESSION_BYTES:
        raise invalid(
            kind,
            f"Expression size has exceeded the maximum allowed size; expression size: {size}",
        )


@lru_cache(maxsize=4096)
def analyse(kind: str, text: str) -> Analysis:
    """Parse and run the text-only checks; raises syntax errors, returns the rest."""
    check_size(kind, text)
    if not text.strip():
        raise invalid(kind, "The expression can not be empty;")
    tree = parse(kind, text)
    static = _Static(kind, text)
    static.walk(tree)
    if static.operators > MAX_OPERATORS:
        # DynamoDB stops counting at the first operator over the limit.
        static.fail(
            _LIMIT,
            f"The expression contains too many operators; operator count: {MAX_OPERATORS + 1}",
        )
    return Analysis(
        kind=kind,
        text=text,
        tree=tree,
        error=static.first_error(),
        operand_error=static.errors.get(_OPERANDS),
        refs=tuple(static.refs),
        names=frozenset(r for r in static.refs if r.startswith("#")),
        values=frozenset(r for r in static.refs if r.startswith(":")),
    )


class _Static:
    def __init__(self, kind: str, text: str) -> None:
        self.kind = kind
        self.text = text
        self.errors: dict[int, DynamoDBError] = {}
        self.refs: list[str] = []
        self.operators = 0

    def fail(self, category: int, message: str) -> None:
        self.errors.setdefault(category, invalid(self.kind, message))

    def fail_syntax_after(self, node: Any) -> None:
        # The token after ``node`` is where DynamoDB's parser gave up.
        position = node.end
        while position < len(self.text) and self.text[position].isspace():
            position += 1
        self.errors.setdefault(_SYNTAX, syntax_error(self.kind, self.text, position))

    def first_error(self) -> DynamoDBError | None:
        for category in sorted(self.errors):
            if category != _OPERANDS:
                return self.errors[category]
        return None

    # -- dispatch --

    def walk(self, tree: ast.Tree) -> None:
        if isinstance(tree, ast.UpdateTree):
            self.update(tree)
        elif isinstance(tree, ast.ProjectionTree):
            for path in tree.paths:
                self.path(path)
        else:
            self.condition(tree)

    # -- conditions --

    def condition(self, node: ast.Node) -> None:
        if isinstance(node, ast.Paren):
            self.paren(node)
            self.condition(node.inner)
        elif isinstance(node, (ast.And, ast.Or)):
            self.condition(node.left)
            self.operators += 1
            self.condition(node.right)
        elif isinstance(node, ast.Not):
            self.operators += 1
            self.condition(node.operand)
        elif isinstance(node, ast.Compare):
            self.operand(node.left)
            self.operators += 1
            self.operand(node.right)
            self.no_function_operands(node.left, node.right)
        elif isinstance(node, ast.Between):
            self.operators += 1
            for part in (node.subject, node.low, node.high):
                self.operand(part)
            self.no_function_operands(node.subject, node.low, node.high)
        elif isinstance(node, ast.In):
            self.operators += 1
            self.operand(node.subject)
            for option in node.options:
                self.operand(option)
            if len(node.options) > MAX_IN_OPERANDS:
                self.fail(
                    _LIMIT,
                    "The IN operator is provided with too many operands; "
                    f"number of operands: {len(node.options)}",
                )
            self.no_function_operands(node.subject, *node.options)
        elif isinstance(node, ast.Call):
            self.call(node, as_condition=True)
        else:  # a bare path or value: DynamoDB's grammar wants more after it
            self.operand(node)
            self.fail_syntax_after(node)

    def no_function_operands(self, *operands: ast.Node) -> None:
        for operand in operands:
            inner = _unwrap(operand)
            if isinstance(inner, ast.Call) and inner.name in CONDITION_FUNCTIONS:
                self.fail(
                    _MISUSE,
                    "The function is not allowed to be used this way in an expression; "
                    f"function: {inner.name}",
                )

    def paren(self, node: ast.Paren) -> None:
        if isinstance(node.inner, ast.Paren):
            self.fail(_PARENS, "The expression has redundant parentheses;")

    def operand(self, node: ast.Node) -> None:
        if isinstance(node, ast.Paren):
            self.paren(node)
            if isinstance(node.inner, ast.CONDITION_NODES):
                self.condition(node.inner)
                self.fail_syntax_after(node)
            else:
                self.operand(node.inner)
        elif isinstance(node, ast.PathNode):
            self.path(node)
        elif isinstance(node, ast.ValueRef):
            self.refs.append(node.name)
        elif isinstance(node, ast.Call):
            self.call(node, as_condition=False)
        else:  # pragma: no cover - the grammar puts no other node in operand position
            self.fail_syntax_after(node)

    def call(self, node: ast.Call, *, as_condition: bool) -> None:
        self.operators += 1
        name = node.name
        if name in CONDITION_FUNCTIONS or name == "size":
            if name == "size" and as_condition:
                self.fail(
                    _MISUSE,
                    "The function is not allowed to be used this way in an expression; "
                    "function: size",
                )
            expected = CONDITION_FUNCTIONS.get(name, 1)
            for arg in node.args:
                self.operand(arg)
            self.no_function_operands(*node.args)
            if len(node.args) != expected:
                self.fail(
                    _OPERANDS,
                    "Incorrect number of operands for operator or function; "
                    f"operator or function: {name}, number of operands: {len(node.args)}",
                )
        elif name in UPDATE_FUNCTIONS:
            for arg in node.args:
                self.operand(arg)
            self.fail(
                _FUNCTION_NAME,
                f"The function is not allowed in a condition expression; function: {name}",
            )
        else:
            for arg in node.args:
                self.operand(arg)
            self.fail(_FUNCTION_NAME, f"Invalid function name; function: {name}")

    # -- paths --

    def path(self, node: ast.PathNode) -> None:
        if len(node.parts) > MAX_PATH_DEPTH:
            self.fail(
                _LIMIT,
                f"The document path has too many nesting levels; nesting levels: {len(node.parts)}",
            )
        for part in node.parts:
            if isinstance(part, ast.NameRef):
                self.refs.append(part.name)
            elif isinstance(part, int):
                if part > MAX_LIST_INDEX:
                    self.fail(
                        _LIMIT, f"List index is not within the allowable range; index: [{part}]"
                    )
            elif is_reserved(part):
                self.fail(
                    _RESERVED, f"Attribute name is a reserved keyword; reserved keyword: {part}"
                )

    # -- UpdateExpression --

    def update(self, tree: ast.UpdateTree) -> None:
        seen: set[str] = set()
        for clause in tree.clauses:
            if clause.keyword in seen:
                self.errors.setdefault(
                    _SYNTAX,
                    validation(
                        "1 validation error detected: Invalid UpdateExpression: "
                        f'The "{clause.keyword}" section can only be used once in an update '
                        "expression;"
                    ),
                )
            seen.add(clause.keyword)
            for action in clause.actions:
                self.path(action.path)
                if isinstance(action, ast.SetAction):
                    self.set_value(action.value)
                elif isinstance(action, (ast.AddAction, ast.DeleteAction)):
                    self.refs.append(action.value.name)

    def set_value(self, node: ast.Node) -> None:
        if isinstance(node, ast.Paren):
            self.paren(node)
            self.set_value(node.inner)
        elif isinstance(node, ast.Arith):
            self.set_value(node.left)
            self.operators += 1
            self.set_value(node.right)
        elif isinstance(node, ast.PathNode):
            self.path(node)
        elif isinstance(node, ast.ValueRef):
            self.refs.append(node.name)
        elif isinstance(node, ast.Call):
            self.operators += 1
            for arg in node.args:
                self.set_value(arg)
            if node.name in UPDATE_FUNCTIONS:
                if len(node.args) != 2:
                    self.fail(
                        _OPERANDS,
                        "Incorrect number of operands for operator or function; "
                        f"operator or function: {node.name}, number of operands: {len(node.args)}",
                    )
                if node.name == "list_append" and any(
                    isinstance(inner := _unwrap(arg), ast.Call) and inner.name == "list_append"
                    for arg in node.args
                ):
                    # list_append(if_not_exists(a, :v), :w) is served, list_append nested in
                    # list_append is not (DynamoDB's answer, quoted in ScyllaDB's
                    # test_update_expression_function_nesting).
                    self.fail(
                        _MISUSE,
                        "The function is not allowed to be used this way in an expression; "
                        "function: list_append",
                    )
            elif node.name in CONDITION_FUNCTIONS or node.name == "size":
                self.fail(
                    _FUNCTION_NAME,
                    f"The function is not allowed in an update expression; function: {node.name}",
                )
            else:
                self.fail(_FUNCTION_NAME, f"Invalid function name; function: {node.name}")
        else:  # pragma: no cover
            self.fail_syntax_after(node)


def _unwrap(node: ast.Node) -> ast.Node:
    while isinstance(node, ast.Paren):
        node = node.inner
    return node


# --- phase 2 ---------------------------------------------------------------------------------


@lru_cache(maxsize=8192)
def resolve(
    kind: str,
    text: str,
    names: tuple[tuple[str, str], ...],
    value_keys: frozenset[str],
) -> Resolved:
    """Substitute ``names`` into the analysed tree and prepare the value checks."""
    analysis = analyse(kind, text)
    if analysis.error is not None:
        raise analysis.error
    name_map = dict(names)
    for ref in analysis.refs:
        if ref.startswith("#"):
            if ref not in name_map:
                raise invalid(
                    kind,
                    "An expression attribute name used in the document path is not defined; "
                    f"attribute name: {ref}",
                )
        elif ref not in value_keys:
            raise invalid(
                kind,
                "An expression attribute value used in expression is not defined; "
                f"attribute value: {ref}",
            )
    if analysis.operand_error is not None:
        raise analysis.operand_error
    resolver = _Resolver(kind, name_map)
    tree = resolver.tree(analysis.tree)
    extra: dict[str, Any] = {}
    if isinstance(tree, ast.UpdateTree):
        paths = tuple(a.path.resolved for c in tree.clauses for a in c.actions)
        check_overlaps(kind, paths, prefix="1 validation error detected: ")
        extra["paths"] = paths
    elif isinstance(tree, ast.ProjectionTree):
        paths = tuple(p.resolved for p in tree.paths)
        check_overlaps(kind, paths)
        extra["paths"] = paths
    else:
        extra["top_level_names"] = frozenset(resolver.top_level)
    return Resolved(kind, tree, tuple(resolver.checks), extra)


def path_text(path: ast.Path) -> str:
    """DynamoDB's rendering of a path inside messages: ``[a, b, [0]]``."""
    return "[" + ", ".join(f"[{p}]" if isinstance(p, int) else p for p in path) + "]"


def check_overlaps(kind: str, paths: tuple[ast.Path, ...], *, prefix: str = "") -> None:
    for i, first in enumerate(paths):
        for second in paths[i + 1 :]:
            for a, b in zip(first, second, strict=False):
                if a == b and type(a) is type(b):
                    continue
                if isinstance(a, int) != isinstance(b, int):
                    raise validation(
                        f"{prefix}Invalid {kind}: Two document paths conflict with each other; "
                        "must remove or rewrite one of these paths; "
                        f"path one: {path_text(first)}, path two: {path_text(second)}"
                    )
                break
            else:
                raise validation(
                    f"{prefix}Invalid {kind}: Two document paths overlap with each other; "
                    "must remove or rewrite one of these paths; "
                    f"path one: {path_text(first)}, path two: {path_text(second)}"
                )


class _Resolver:
    """Rebuilds the tree with names substituted; gathers distinct and value checks."""

    def __init__(self, kind: str, names: Mapping[str, str]) -> None:
        self.kind = kind
        self.names = names
        self.checks: list[ValueCheck] = []
        self.top_level: set[str] = set()
        self.distinct_error: DynamoDBError | None = None

    def tree(self, tree: ast.Tree) -> ast.Tree:
        if isinstance(tree, ast.UpdateTree):
            result: ast.Tree = ast.UpdateTree(tuple(self.clause(c) for c in tree.clauses))
        elif isinstance(tree, ast.ProjectionTree):
            result = ast.ProjectionTree(tuple(self.path(p) for p in tree.paths))
        else:
            result = self.node(tree)
        if self.distinct_error is not None:
            raise self.distinct_error
        return result

    def path(self, node: ast.PathNode) -> ast.PathNode:
        parts = tuple(self.names[p.name] if isinstance(p, ast.NameRef) else p for p in node.parts)
        first = parts[0]
        assert isinstance(first, str)
        self.top_level.add(first)
        return ast.PathNode(parts, node.start, node.end)

    def node(self, node: ast.Node) -> ast.Node:
        if isinstance(node, ast.PathNode):
            return self.path(node)
        if isinstance(node, ast.ValueRef):
            return node
        if isinstance(node, ast.Paren):
            return self.node(node.inner)  # parentheses only matter to the static checks
        if isinstance(node, ast.And):
            return ast.And(self.node(node.left), self.node(node.right), node.start, node.end)
        if isinstance(node, ast.Or):
            return ast.Or(self.node(node.left), self.node(node.right), node.start, node.end)
        if isinstance(node, ast.Not):
            return ast.Not(self.node(node.operand), node.start, node.end)
        if isinstance(node, ast.Compare):
            left, right = self.node(node.left), self.node(node.right)
            self.distinct(node.op, left, right)
            if node.op in _ORDERING:
                self.scalar_operands(node.op, left, right)
            return ast.Compare(node.op, left, right, node.start, node.end)
        if isinstance(node, ast.Between):
            subject, low, high = self.node(node.subject), self.node(node.low), self.node(node.high)
            self.scalar_operands("BETWEEN", subject, low, high)
            if isinstance(low, ast.ValueRef) and isinstance(high, ast.ValueRef):
                self.checks.append(_between_bounds(self.kind, low.name, high.name))
            return ast.Between(subject, low, high, node.start, node.end)
        if isinstance(node, ast.In):
            return ast.In(
                self.node(node.subject),
                tuple(self.node(o) for o in node.options),
                node.start,
                node.end,
            )
        if isinstance(node, ast.Arith):
            left, right = self.node(node.left), self.node(node.right)
            for operand in (left, right):
                self.operand_type(node.op, operand, ("N",))
            return ast.Arith(node.op, left, right, node.start, node.end)
        if isinstance(node, ast.Call):
            args = tuple(self.node(a) for a in node.args)
            self.call_checks(node.name, args)
            return ast.Call(node.name, args, node.start, node.end)
        raise AssertionError(f"unexpected node {node!r}")  # pragma: no cover

    def clause(self, clause: ast.Clause) -> ast.Clause:
        actions: list[ast.Action] = []
        for action in clause.actions:
            path = self.path(action.path)
            if isinstance(action, ast.SetAction):
                actions.append(ast.SetAction(path, self.node(action.value)))
            elif isinstance(action, ast.RemoveAction):
                actions.append(ast.RemoveAction(path))
            elif isinstance(action, ast.AddAction):
                self.checks.append(_update_operand("ADD", action.value.name, add=True))
                actions.append(ast.AddAction(path, action.value))
            else:
                self.checks.append(_update_operand("DELETE", action.value.name, add=False))
                actions.append(ast.DeleteAction(path, action.value))
        return ast.Clause(clause.keyword, tuple(actions), clause.start)

    # -- checks --

    def distinct(self, operator: str, first: ast.Node, second: ast.Node) -> None:
        if (
            self.distinct_error is None
            and isinstance(first, ast.PathNode)
            and isinstance(second, ast.PathNode)
            and first.parts == second.parts
        ):
            self.distinct_error = invalid(
                self.kind,
                "The first operand must be distinct from the remaining operands for this "
                f"operator or function; operator: {operator}, "
                f"first operand: {path_text(first.resolved)}",
            )

    def call_checks(self, name: str, args: tuple[ast.Node, ...]) -> None:
        if name in ("attribute_exists", "attribute_not_exists", "if_not_exists"):
            if not isinstance(args[0], ast.PathNode):
                self.checks.append(
                    _constant(
                        invalid(
                            self.kind,
                            "Operator or function requires a document path; "
                            f"operator or function: {name}",
                        )
                    )
                )
        elif name == "begins_with":
            self.distinct(name, *args)
            for arg in args:
                self.operand_type(name, arg, ("S", "B"))
        elif name == "contains":
            self.distinct(name, *args)
        elif name == "attribute_type":
            self.distinct(name, *args)
            self.checks.append(_attribute_type(self.kind, args[1]))
        elif name == "size":
            self.operand_type(name, args[0], None, refuse=("N", "BOOL", "NULL"))
        elif name == "list_append":
            for arg in args:
                self.operand_type(name, arg, ("L",))

    def scalar_operands(self, operator: str, *operands: ast.Node) -> None:
        for operand in operands:
            self.operand_type(operator, operand, ("N", "S", "B"))

    def operand_type(
        self,
        operator: str,
        operand: ast.Node,
        allowed: tuple[str, ...] | None,
        refuse: tuple[str, ...] = (),
    ) -> None:
        """Queue a check that a literal operand (``:v`` or ``size()``) has an allowed type."""
        kind = self.kind
        if isinstance(operand, ast.Call):
            static = {"size": "N", "list_append": "L"}.get(operand.name)
            if static is not None and (
                (allowed is not None and static not in allowed) or static in refuse
            ):
                self.checks.append(_constant(_operand_type_error(kind, operator, static)))
            return
        if not isinstance(operand, ast.ValueRef):
            return
        name = operand.name

        def check(values: Mapping[str, AttributeValue]) -> DynamoDBError | None:
            found = next(iter(values[name]))
            if (allowed is not None and found not in allowed) or found in refuse:
                return _operand_type_error(kind, operator, found)
            return None

        self.checks.append(check)


def _operand_type_error(kind: str, operator: str, found: str) -> DynamoDBError:
    return invalid(
        kind,
        "Incorrect operand type for operator or function; "
        f"operator or function: {operator}, operand type: {found}",
    )


def _constant(error: DynamoDBError) -> ValueCheck:
    return lambda _values: error


def _attribute_type(kind: str, operand: ast.Node) -> ValueCheck:
    def check(values: Mapping[str, AttributeValue]) -> DynamoDBError | None:
        if not isinstance(operand, ast.ValueRef):
            found = "N" if isinstance(operand, ast.Call) and operand.name == "size" else None
            return _operand_type_error(
                kind, "attribute_type", found or "{NS,SS,L,BS,N,M,B,BOOL,NULL,S}"
            )
        value = values[operand.name]
        found = next(iter(value))
        if found != "S":
            return _operand_type_error(kind, "attribute_type", found)
        if value["S"] not in ATTRIBUTE_TYPES:
            return invalid(
                kind,
                f"Invalid attribute type name found; type: {value['S']}, "
                f"valid types: {_VALID_TYPES_TEXT}",
            )
        return None

    return check


def _between_bounds(kind: str, low_name: str, high_name: str) -> ValueCheck:
    def check(values: Mapping[str, AttributeValue]) -> DynamoDBError | None:
        low, high = values[low_name], values[high_name]
        bounds = (
            f"lower bound operand: AttributeValue: {describe(low)}, "
            f"upper bound operand: AttributeValue: {describe(high)}"
        )
        if next(iter(low)) != next(iter(high)):
            return invalid(
                kind,
                f"The BETWEEN operator requires same data type for lower and upper bounds; {bounds}",
            )
        order = compare(low, high)
        if order is not None and order > 0:
            return invalid(
                kind,
                "The BETWEEN operator requires upper bound to be greater than or equal to lower "
                f"bound; {bounds}",
            )
        return None

    return check


def _update_operand(operator: str, name: str, *, add: bool) -> ValueCheck:
    def check(values: Mapping[str, AttributeValue]) -> DynamoDBError | None:
        found = next(iter(values[name]))
        if found in SET_TYPES or (add and found == "N"):
            return None
        return invalid(
            "UpdateExpression",
            "Incorrect operand type for operator or function; "
            f"operator: {operator}, operand type: {TYPE_WORDS[found]}",
        )

    return check


# --- the maps --------------------------------------------------------------------------------

_NAME_KEY = re.compile(r"#[0-9A-Za-z_]+\Z")
_VALUE_KEY = re.compile(r":[0-9A-Za-z_]+\Z")


def check_name_map(names: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    if not names:
        raise validation("ExpressionAttributeNames must not be empty")
    for key, value in names.items():
        if not isinstance(key, str) or not _NAME_KEY.match(key):
            raise validation(
                f'ExpressionAttributeNames contains invalid key: Syntax error; key: "{key}"'
            )
        if value == "":
            # DynamoDB's words, as applications match them (and ScyllaDB's
            # test_limit_attribute_length_nonkey_empty checks "Empty attribute name").
            raise validation(
                f"ExpressionAttributeNames contains invalid value: Empty attribute name for key {key}"
            )
    return tuple((k, str(v)) for k, v in names.items())


def check_value_keys(values: Mapping[str, Any]) -> None:
    if not values:
        raise validation("ExpressionAttributeValues must not be empty")
    for key in values:
        if not isinstance(key, str) or not _VALUE_KEY.match(key):
            raise validation(
                f'ExpressionAttributeValues contains invalid key: Syntax error; key: "{key}"'
            )
