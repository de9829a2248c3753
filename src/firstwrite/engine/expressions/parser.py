"""Text -> AST with lark's LALR parser, and lark's errors -> DynamoDB's syntax-error messages.

DynamoDB reports a syntax error as ``Syntax error; token: "<tok>", near: "<text>"`` where
``near`` is the offending token with its neighbouring tokens (the previous and the next one,
each with the whitespace between them), or ``token: "<EOF>"`` with the last token(s) when the
text ends too early. Observed examples: ``SET attrName = 3`` -> token ``3`` near ``= 3``;
``numx / :v`` -> token ``/`` near ``numx / :v``; ``foo`` -> ``<EOF>`` near ``foo``.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from pathlib import Path as FilePath

from lark import Lark, Token
from lark import Tree as LarkTree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import DynamoDBError, validation
from . import ast
from .precount import operator_floor, reduced

# Expression parameter name -> grammar start symbol.
START = {
    "ConditionExpression": "condition",
    "FilterExpression": "condition",
    "KeyConditionExpression": "condition",
    "UpdateExpression": "update",
    "ProjectionExpression": "projection",
}

_GRAMMAR = (FilePath(__file__).parent / "grammar.lark").read_text(encoding="utf-8")
_LARK = Lark(
    _GRAMMAR,
    parser="lalr",
    start=["condition", "update", "projection"],
    propagate_positions=True,
    maybe_placeholders=False,
)

# DynamoDB's limit on operators and functions in one expression (validate.py reports it in
# order with the other errors; :func:`parse` enforces it before building the tree).
MAX_OPERATORS = 300
# Deeper than this, a tree with at most MAX_OPERATORS operators must nest parentheses directly
# in parentheses (redundant): refused before the recursive passes could run out of stack.
MAX_NESTING = 2 * MAX_OPERATORS + 100
_OPERATOR_NODES = frozenset({"not_", "and_", "or_", "compare", "between", "in_", "call", "arith"})

# The tokens DynamoDB's lexer sees, for quoting the text near an error.
# (A name starts with a letter: "_" is a token of its own, as in `SET _123`'s error.)
_TOKENS = re.compile(r"\s+|[A-Za-z][A-Za-z0-9_]*|[#:][A-Za-z0-9_]*|[0-9]+|<>|<=|>=|.", re.S)


def invalid(kind: str, message: str) -> DynamoDBError:
    return validation(f"Invalid {kind}: {message}")


def syntax_error(kind: str, text: str, position: int | None) -> DynamoDBError:
    """The syntax error at character ``position`` of ``text`` (``None``: unexpected end)."""
    tokens = [(m.start(), m.group()) for m in _TOKENS.finditer(text)]
    if position is None or position >= len(text):
        index = len(tokens)
        token = "<EOF>"
    else:
        index = next(
            (i for i, (start, tok) in enumerate(tokens) if start <= position < start + len(tok)),
            len(tokens),
        )
        token = tokens[index][1] if index < len(tokens) else "<EOF>"

    def at(i: int) -> str:
        return tokens[i][1] if 0 <= i < len(tokens) else ""

    def blank(i: int) -> bool:
        return 0 <= i < len(tokens) and tokens[i][1].isspace()

    near = "".join(
        (
            at(index - 2) if blank(index - 1) else "",
            at(index - 1),
            at(index) if index < len(tokens) else "",
            at(index + 1),
            at(index + 2) if blank(index + 1) else "",
        )
    )
    return invalid(kind, f'Syntax error; token: "{token}", near: "{near}"')


@lru_cache(maxsize=4096)
def parse(kind: str, text: str) -> ast.Tree:
    """Parse one expression of ``kind`` (e.g. ``"ConditionExpression"``); cached by text, and
    so are its refusals (the last :data:`REFUSALS_KEPT`)."""
    with _refusals_lock:
        refused = _refusals.get((kind, text))
    if refused is not None:
        raise DynamoDBError(*refused)
    try:
        if _too_many_operators(kind, text):
            raise _too_many(kind)
        return parse_text(kind, text)
    except DynamoDBError as error:
        with _refusals_lock:
            _refusals[kind, text] = (error.code, error.message)
            if len(_refusals) > REFUSALS_KEPT:
                del _refusals[next(iter(_refusals))]
        raise


REFUSALS_KEPT = 4096
_refusals: dict[tuple[str, str], tuple[str, str]] = {}  # oldest first
_refusals_lock = threading.Lock()


def parse_text(kind: str, text: str) -> ast.Tree:
    """:func:`parse` without its caches and its pre-count: the text parsed by lark."""
    try:
        tree = _LARK.parse(text, start=START[kind])
    except UnexpectedInput as exc:
        raise _translate(kind, text, exc) from None
    _check_cost(kind, tree)
    return _Builder().build(tree)


def _too_many_operators(kind: str, text: str) -> bool:
    """Whether ``text`` is refused for its operator count, told without parsing all of it: its
    floor (:mod:`.precount`) is over the limit and lark accepts its shorter reduced text (a
    syntax error is reported first). ``False``: parse it to know."""
    if operator_floor(kind, text) <= MAX_OPERATORS:
        return False
    short = reduced(text)
    if len(short) == len(text):
        return False  # nothing to gain: the parse that follows refuses it as surely
    try:
        _LARK.parse(short, start=START[kind])
    except UnexpectedInput:
        return False
    return True


def _too_many(kind: str) -> DynamoDBError:
    # DynamoDB stops counting at the first operator over the limit.
    return invalid(
        kind, f"The expression contains too many operators; operator count: {MAX_OPERATORS + 1}"
    )


def _check_cost(kind: str, tree: LarkTree[Token]) -> None:
    """Refuse a tree whose operator count or depth is beyond DynamoDB's limits, before any
    recursive pass walks it (``NOT NOT ... NOT x`` or ``((((x))))`` a thousand deep)."""
    operators = 0
    deepest = 0
    stack: list[tuple[LarkTree[Token], int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if node.data in _OPERATOR_NODES:
            operators += 1
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, LarkTree))
    if operators > MAX_OPERATORS:
        raise _too_many(kind)
    if deepest > MAX_NESTING:
        raise invalid(kind, "The expression has redundant parentheses;")


def _translate(kind: str, text: str, exc: UnexpectedInput) -> DynamoDBError:
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            return syntax_error(kind, text, None)
        return syntax_error(kind, text, exc.token.start_pos)
    if isinstance(exc, UnexpectedCharacters):
        return syntax_error(kind, text, exc.pos_in_stream)
    if isinstance(exc, UnexpectedEOF):
        return syntax_error(kind, text, None)
    return syntax_error(kind, text, getattr(exc, "pos_in_stream", None))  # pragma: no cover


class _Builder:
    """Lark parse tree -> :mod:`ast` nodes (positions from lark's propagated meta)."""

    def build(self, tree: LarkTree[Token]) -> ast.Tree:
        if tree.data == "update":
            return ast.UpdateTree(tuple(self._clause(c) for c in tree.children))  # type: ignore[arg-type]
        if tree.data == "projection":
            return ast.ProjectionTree(tuple(self._path(p) for p in tree.children))  # type: ignore[arg-type]
        return self.node(tree)

    def node(self, item: LarkTree[Token] | Token) -> ast.Node:
        if isinstance(item, Token):  # only VALUE_REF reaches here bare (ADD/DELETE operands)
            return ast.ValueRef(str(item), item.start_pos or 0, item.end_pos or 0)
        kind = item.data
        start, end = item.meta.start_pos, item.meta.end_pos
        kids = [c for c in item.children if not _is_keyword(c)]
        if kind == "path":
            return self._path(item)
        if kind == "value":
            token = kids[0]
            assert isinstance(token, Token)
            return ast.ValueRef(str(token), start, end)
        if kind == "call":
            name = kids[0]
            assert isinstance(name, Token)
            return ast.Call(str(name), tuple(self.node(k) for k in kids[1:]), start, end)
        if kind == "paren":
            return ast.Paren(self.node(kids[0]), start, end)
        if kind == "compare":
            comparator = kids[1]
            assert isinstance(comparator, LarkTree)
            op = str(comparator.children[0])
            return ast.Compare(op, self.node(kids[0]), self.node(kids[2]), start, end)
        if kind == "between":
            return ast.Between(
                self.node(kids[0]), self.node(kids[1]), self.node(kids[2]), start, end
            )
        if kind == "in_":
            return ast.In(self.node(kids[0]), tuple(self.node(k) for k in kids[1:]), start, end)
        if kind == "and_":
            return ast.And(self.node(kids[0]), self.node(kids[1]), start, end)
        if kind == "or_":
            return ast.Or(self.node(kids[0]), self.node(kids[1]), start, end)
        if kind == "not_":
            return ast.Not(self.node(kids[0]), start, end)
        if kind == "arith":
            op = next(
                str(c)
                for c in item.children
                if isinstance(c, Token) and c.type in ("PLUS", "MINUS")
            )
            operands = [
                c
                for c in item.children
                if not (isinstance(c, Token) and c.type in ("PLUS", "MINUS"))
            ]
            return ast.Arith(op, self.node(operands[0]), self.node(operands[1]), start, end)
        raise AssertionError(f"unexpected parse node {kind!r}")  # pragma: no cover

    def _path(self, tree: LarkTree[Token]) -> ast.PathNode:
        parts: list[ast.PathPart] = []
        for token in tree.children:
            assert isinstance(token, Token)
            if token.type == "NAME":
                parts.append(str(token))
            elif token.type == "NAME_REF":
                parts.append(ast.NameRef(str(token)))
            else:  # INDEX
                parts.append(int(token))
        return ast.PathNode(tuple(parts), tree.meta.start_pos, tree.meta.end_pos)

    def _clause(self, tree: LarkTree[Token]) -> ast.Clause:
        keyword_token = tree.children[0]
        assert isinstance(keyword_token, Token)
        keyword = keyword_token.type  # SET / REMOVE / ADD / DELETE
        rest = tree.children[1:]
        actions: list[ast.Action] = []
        if keyword == "SET":
            for action in rest:
                assert isinstance(action, LarkTree)
                target, _eq, value = action.children
                assert isinstance(target, LarkTree)
                actions.append(ast.SetAction(self._path(target), self.node(value)))
        elif keyword == "REMOVE":
            for target in rest:
                assert isinstance(target, LarkTree)
                actions.append(ast.RemoveAction(self._path(target)))
        else:
            for target, operand in zip(rest[::2], rest[1::2], strict=True):
                assert isinstance(target, LarkTree) and isinstance(operand, Token)
                ref = ast.ValueRef(str(operand), operand.start_pos or 0, operand.end_pos or 0)
                cls = ast.AddAction if keyword == "ADD" else ast.DeleteAction
                actions.append(cls(self._path(target), ref))
        return ast.Clause(keyword, tuple(actions), keyword_token.start_pos or 0)


_KEYWORD_TYPES = frozenset({"OR", "AND", "NOT", "BETWEEN", "IN"})


def _is_keyword(child: object) -> bool:
    return isinstance(child, Token) and child.type in _KEYWORD_TYPES
