"""PartiQL text -> statement (the nodes below), with DynamoDB's syntax-error messages.

One statement of DynamoDB's dialect (partiql.lark): ``SELECT``, ``INSERT INTO .. VALUE``,
``UPDATE .. SET/REMOVE .. WHERE``, ``DELETE FROM .. WHERE`` and ``EXISTS(SELECT ..)`` (a
condition of ExecuteTransaction). Values are templates: AttributeValues in their JSON form
in which :class:`Param` stands for the n-th ``?``; :func:`bind` fills them in. Parsing is
cached by text, refusals included. Nothing here knows tables: operations/partiql_plan.py
turns a statement into the equivalent GetItem, Query, Scan or write request.

Messages: a statement that does not begin with a DML keyword is ``Statement wasn't well
formed, can't be processed: Expected data manipulation``, a reserved word used as a bare name
``..: Unexpected keyword`` (both as DynamoDB words them); any other syntax error names the
offending token's ``line:column:length`` the way DynamoDB positions its other statement
errors (``Unexpected token at 1:27:1``, ``Unexpected end of statement``).

Size: the statement builder is one pass over the grammar's tree, a rule per production.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path as FilePath
from typing import Any, TypeAlias

from lark import Lark, Token
from lark import Tree as LarkTree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import DynamoDBError, invalid_parameters, validation
from .partiql_shape import tree_error

__all__ = [
    "Between",
    "Call",
    "Compare",
    "Condition",
    "Delete",
    "Exists",
    "In",
    "Insert",
    "Logical",
    "Missing",
    "Not",
    "Operand",
    "Param",
    "Path",
    "Select",
    "Source",
    "Statement",
    "Update",
    "bind",
    "malformed",
    "parse",
]

WELL_FORMED = "Statement wasn't well formed, can't be processed: "
BAG_PARAMETER = (
    "Unsupported data type in Bag. DynamoDB only supports either numbers or strings in bags"
)
EMPTY_BAG = "Empty bags are not supported"
DUPLICATE_NAME = "Attribute Name is duplicated: {}"
PARAMETER_COUNT = "Number of parameters in request and statement don't match."

_GRAMMAR = (FilePath(__file__).parent / "partiql.lark").read_text(encoding="utf-8")
_LARK = Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True)
_DML = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "EXISTS"})

# PartiQL's reserved words (SQL-92's and its own): a bare name spelling one is refused, a
# double-quoted one is a name ("count").
RESERVED: frozenset[str] = frozenset(
    """
    ABSOLUTE ACTION ADD ALL ALLOCATE ALTER AND ANY ARE AS ASC ASSERTION AT AUTHORIZATION AVG
    BAG BEGIN BETWEEN BIT BIT_LENGTH BLOB BOOL BOOLEAN BOTH BY CASCADE CASCADED CASE CAST
    CATALOG CHAR CHARACTER CHARACTER_LENGTH CHAR_LENGTH CHECK CLOB CLOSE COALESCE COLLATE
    COLLATION COLUMN COMMIT CONNECT CONNECTION CONSTRAINT CONSTRAINTS CONTINUE CONVERT
    CORRESPONDING COUNT CREATE CROSS CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP
    CURRENT_USER CURSOR DATE DATE_ADD DATE_DIFF DAY DEALLOCATE DEC DECIMAL DECLARE DEFAULT
    DEFERRABLE DEFERRED DELETE DESC DESCRIBE DESCRIPTOR DIAGNOSTICS DISCONNECT DISTINCT DOMAIN
    DOUBLE DROP ELSE END END-EXEC ESCAPE EXCEPT EXCEPTION EXEC EXECUTE EXISTS EXTERNAL EXTRACT
    FALSE FETCH FIRST FLOAT FOR FOREIGN FOUND FROM FULL GET GLOBAL GO GOTO GRANT GROUP HAVING
    HOUR IDENTITY IMMEDIATE IN INDEX INDICATOR INITIALLY INNER INPUT INSENSITIVE INSERT INT
    INTEGER INTERSECT INTERVAL INTO IS ISOLATION JOIN KEY LANGUAGE LAST LEADING LEFT LET LEVEL
    LIKE LIMIT LIST LOCAL LOWER MATCH MAX MIN MINUTE MISSING MODULE MONTH NAMES NATIONAL
    NATURAL NCHAR NEXT NO NOT NULL NULLIF NUMERIC OCTET_LENGTH OF ON ONLY OPEN OPTION OR ORDER
    OUTER OUTPUT OVERLAPS PAD PARTIAL PIVOT POSITION PRECISION PREPARE PRESERVE PRIMARY PRIOR
    PRIVILEGES PROCEDURE PUBLIC READ REAL REFERENCES RELATIVE REMOVE RESTRICT REVOKE RIGHT
    ROLLBACK ROWS SCHEMA SCROLL SECOND SECTION SELECT SESSION SESSION_USER SET SEXP SIZE
    SMALLINT SOME SPACE SQL SQLCODE SQLERROR SQLSTATE STRING STRUCT SUBSTRING SUM SYMBOL
    SYSTEM_USER TABLE TEMPORARY THEN TIME TIMESTAMP TIMEZONE_HOUR TIMEZONE_MINUTE TO
    TO_STRING TO_TIMESTAMP TRAILING TRANSACTION TRANSLATE TRANSLATION TRIM TRUE TUPLE
    TXN_ID UNION UNIQUE UNKNOWN UNPIVOT UPDATE UPPER USAGE USER USING VALUE VALUES VARCHAR
    VARYING VIEW WHEN WHENEVER WHERE WITH WORK WRITE YEAR ZONE
    """.split()  # noqa: SIM905
)


@dataclass(frozen=True, slots=True)
class Param:
    """The ``index``-th ``?`` of the statement (from 0)."""

    index: int


@dataclass(frozen=True, slots=True)
class Path:
    """A document path: names (``str``) and list indexes (``int``); ``leaf`` is how a
    SELECT names the value it projects (the last name with its indexes, ``k[1]``)."""

    parts: tuple[str | int, ...]
    leaf: str

    @property
    def top(self) -> str | None:
        """The attribute name when the path is just one top-level name, else None."""
        if len(self.parts) == 1 and isinstance(self.parts[0], str):
            return self.parts[0]
        return None


@dataclass(frozen=True, slots=True)
class Value:
    """An AttributeValue template (JSON form, :class:`Param` where a ``?`` stands)."""

    template: Any


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple[Operand, ...]


Operand: TypeAlias = "Path | Value | Call | Condition"


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True, slots=True)
class Between:
    subject: Operand
    low: Operand
    high: Operand


@dataclass(frozen=True, slots=True)
class In:
    subject: Operand
    options: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Missing:
    subject: Operand
    negated: bool


@dataclass(frozen=True, slots=True)
class Logical:
    op: str  # AND | OR
    items: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Not:
    item: Condition


Condition: TypeAlias = "Compare | Between | In | Missing | Logical | Not | Call | Path | Value"


@dataclass(frozen=True, slots=True)
class Source:
    table: str
    index: str | None = None


@dataclass(frozen=True, slots=True)
class Select:
    source: Source
    projection: tuple[Path, ...] | None  # None: *
    where: Condition | None
    order: tuple[Path, bool] | None = None  # (path, descending)
    params: int = 0


@dataclass(frozen=True, slots=True)
class Insert:
    source: Source
    item: Value
    params: int = 0


@dataclass(frozen=True, slots=True)
class Update:
    source: Source
    sets: tuple[tuple[Path, Operand], ...]
    removes: tuple[Path, ...]
    where: Condition
    returning: str | None = None  # ALL_OLD | ALL_NEW | UPDATED_OLD | UPDATED_NEW
    params: int = 0
    set_calls: tuple[tuple[str, Path, Operand], ...] = field(default=())  # set_add/set_delete


@dataclass(frozen=True, slots=True)
class Delete:
    source: Source
    where: Condition
    returning: str | None = None
    params: int = 0


@dataclass(frozen=True, slots=True)
class Exists:
    select: Select
    params: int = 0


Statement: TypeAlias = Select | Insert | Update | Delete | Exists


def malformed(detail: str) -> DynamoDBError:
    """DynamoDB's syntax error: ``Statement wasn't well formed, can't be processed: ..``."""
    return validation(WELL_FORMED + detail)


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Statement | DynamoDBError:
    try:
        tree = _LARK.parse(text)
    except UnexpectedInput as exc:
        return _syntax_error(text, exc)
    too_deep = tree_error(tree)  # before the builder recurses over the tree
    if too_deep is not None:
        return too_deep
    try:
        return _Builder().statement(tree)
    except DynamoDBError as error:
        return error


def parse(text: str) -> Statement:
    """The statement ``text`` holds, or DynamoDB's ValidationException for it."""
    parsed = _parse_cached(text)
    if isinstance(parsed, DynamoDBError):
        raise DynamoDBError(parsed.code, parsed.message)
    return parsed


def bind(template: Any, parameters: Sequence[Any]) -> Any:
    """``template`` with each :class:`Param` replaced by its parameter (AttributeValues)."""
    if isinstance(template, Param):
        return parameters[template.index]
    if isinstance(template, dict):
        ((kind, raw),) = template.items()
        if kind == "M":
            return {"M": {k: bind(v, parameters) for k, v in raw.items()}}
        if kind == "L":
            return {"L": [bind(v, parameters) for v in raw]}
    return template


def _syntax_error(text: str, exc: UnexpectedInput) -> DynamoDBError:
    first = text.lstrip().split(None, 1)
    word = first[0].rstrip("(").upper() if first else ""
    if word not in _DML:
        return malformed("Expected data manipulation")
    if isinstance(exc, UnexpectedEOF) or (
        isinstance(exc, UnexpectedToken) and exc.token.type == "$END"
    ):
        return malformed("Unexpected end of statement")
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        what = "keyword" if str(token).upper() in RESERVED else "token"
        return malformed(f"Unexpected {what} at {token.line}:{token.column}:{len(str(token))}")
    if isinstance(exc, UnexpectedCharacters):
        return malformed(f"Unexpected character at {exc.line}:{exc.column}:1")
    return malformed("Unexpected token")  # pragma: no cover


def _unquote(token: Token) -> str:
    text = str(token)
    if token.type == "QUOTED":
        return text[1:-1].replace('""', '"')
    if token.type == "STRING":
        return text[1:-1].replace("''", "'")
    return text


class _Builder:
    """Lark tree -> the statement nodes; counts the ``?`` in text order."""

    def __init__(self) -> None:
        self.params = 0

    def statement(self, tree: LarkTree[Token]) -> Statement:
        node = tree.children[0]
        assert isinstance(node, LarkTree)
        if node.data == "exists":
            inner = node.children[1]
            assert isinstance(inner, LarkTree)
            return Exists(self.select(inner), self.params)
        if node.data == "select":
            return self.select(node)
        if node.data == "insert":
            _ins, _into, source, _value, value = node.children
            return Insert(self.source(source), Value(self.value(value)), self.params)
        if node.data == "update":
            return self.update(node)
        _delete, _from, source, _where, where, returning = node.children
        condition = self.condition(where)
        return Delete(self.source(source), condition, self.returning(returning), self.params)

    def select(self, node: LarkTree[Token]) -> Select:
        _sel, projection, _from, source, _where, where, _order, _by, order, direction = (
            node.children
        )
        assert isinstance(projection, LarkTree)
        paths: tuple[Path, ...] | None = None
        if projection.data == "paths":
            paths = tuple(self.path(p) for p in projection.children)
        ordering = None
        if order is not None:
            descending = False
            if isinstance(direction, LarkTree):
                descending = str(direction.children[0]).upper() == "DESC"
            ordering = (self.path(order), descending)
        condition = None if where is None else self.condition(where)
        return Select(self.source(source), paths, condition, ordering, self.params)

    def update(self, node: LarkTree[Token]) -> Update:
        children = node.children
        source = self.source(children[1])
        sets: list[tuple[Path, Operand]] = []
        removes: list[Path] = []
        calls: list[tuple[str, Path, Operand]] = []
        where: Condition | None = None
        returning = None
        for child in children[2:]:
            if isinstance(child, LarkTree) and child.data == "set_":
                for assignment in child.children[1:]:
                    assert isinstance(assignment, LarkTree)
                    target, _eq, value = assignment.children
                    path = self.path(target)
                    operand = self.operand(value)
                    if isinstance(operand, Call) and operand.name.lower() in (
                        "set_add",
                        "set_delete",
                    ):
                        if len(operand.args) != 2 or operand.args[0] != path:
                            raise validation(
                                f"The first argument to {operand.name.upper()} must equal the "
                                "assignment value"
                            )
                        calls.append((operand.name.lower(), path, operand.args[1]))
                    else:
                        sets.append((path, operand))
            elif isinstance(child, LarkTree) and child.data == "remove_":
                removes.extend(self.path(p) for p in child.children[1:])
            elif isinstance(child, LarkTree) and child.data == "returning":
                returning = self.returning(child)
            elif child is not None and not isinstance(child, Token):
                where = self.condition(child)
        assert where is not None
        return Update(
            source, tuple(sets), tuple(removes), where, returning, self.params, tuple(calls)
        )

    def returning(self, node: Any) -> str | None:
        if node is None:
            return None
        _ret, scope, age, _star = node.children
        return f"{'ALL' if str(scope).upper() == 'ALL' else 'UPDATED'}_{str(age).upper()}"

    def source(self, node: Any) -> Source:
        names = [_unquote(ident.children[0]) for ident in node.children if ident is not None]
        for ident in node.children:
            if ident is not None:
                self.check_name(ident.children[0])
        return Source(names[0], names[1] if len(names) > 1 else None)

    def check_name(self, token: Token) -> None:
        if token.type == "NAME" and str(token).upper() in RESERVED:
            raise malformed("Unexpected keyword")

    def path(self, node: Any) -> Path:
        parts: list[str | int] = []
        leaf = ""
        for child in node.children:
            if isinstance(child, LarkTree):  # ident
                token = child.children[0]
                assert isinstance(token, Token)
                self.check_name(token)
                name = _unquote(token)
                parts.append(name)
                leaf = name
            else:
                parts.append(int(child))
                leaf += f"[{int(child)}]"
        return Path(tuple(parts), leaf)

    def condition(self, node: Any) -> Condition:
        kind = node.data if isinstance(node, LarkTree) else ""
        if kind in ("and_", "or_"):
            op = "AND" if kind == "and_" else "OR"
            # The chain ((a AND b) AND c) AND d, walked down its left links with a loop
            # (a thousand of them must not take a thousand frames).
            sides = []
            while isinstance(node, LarkTree) and node.data == kind:
                left, _kw, right = node.children
                sides.append(right)
                node = left
            sides.append(node)
            items: list[Condition] = []
            for side in map(self.condition, reversed(sides)):
                if isinstance(side, Logical) and side.op == op:
                    items.extend(side.items)
                else:
                    items.append(side)
            return Logical(op, tuple(items))
        if kind == "not_":
            return Not(self.condition(node.children[1]))
        if kind == "compare":
            left, comparator, right = node.children
            op = str(comparator.children[0])
            return Compare("<>" if op == "!=" else op, self.operand(left), self.operand(right))
        if kind == "between":
            subject, _b, low, _a, high = node.children
            return Between(self.operand(subject), self.operand(low), self.operand(high))
        if kind == "in_":
            subject, _in, *options = node.children
            return In(self.operand(subject), tuple(self.operand(o) for o in options))
        if kind in ("missing", "not_missing"):
            return Missing(self.operand(node.children[0]), kind == "not_missing")
        if kind == "paren":
            return self.condition(node.children[0])
        operand = self.operand(node)
        return operand

    def operand(self, node: Any) -> Operand:
        kind = node.data if isinstance(node, LarkTree) else ""
        if kind == "path":
            return self.path(node)
        if kind == "call":
            name, *args = node.children
            operands = []
            for arg in args:  # (a loop, not a generator: one frame a nested call)
                operands.append(self.operand(arg))
            return Call(str(name), tuple(operands))
        if kind == "arith":
            left, op, right = node.children
            return Call(str(op), (self.operand(left), self.operand(right)))
        if kind == "paren":
            return self.condition(node.children[0])
        if kind in ("compare", "between", "in_", "missing", "not_missing", "and_", "or_"):
            return self.condition(node)
        if kind == "not_":
            return self.condition(node)
        return Value(self.value(node))

    def value(self, node: Any) -> Any:
        kind = node.data
        children = node.children
        if kind == "string":
            return {"S": _unquote(children[0])}
        if kind == "number":
            text = "".join(str(c) for c in children if c is not None)
            return {"N": text}
        if kind == "true":
            return {"BOOL": True}
        if kind == "false":
            return {"BOOL": False}
        if kind == "null":
            return {"NULL": True}
        if kind == "param":
            self.params += 1
            return Param(self.params - 1)
        if kind == "map":
            pairs = [c for c in children if c is not None]
            out: dict[str, Any] = {}
            for pair in pairs:
                key, value = pair.children
                name = _unquote(key)
                if name in out:  # (DynamoDB's wording for a duplicated name: docs/engine.md)
                    raise invalid_parameters(DUPLICATE_NAME.format(name))
                out[name] = self.value(value)
            return {"M": out}
        if kind == "list":
            return {"L": [self.value(c) for c in children if c is not None]}
        # bag: a string set or a number set
        elements = [self.value(c) for c in children if c is not None]
        if not elements:
            raise validation(EMPTY_BAG)
        if any(not isinstance(e, dict) or next(iter(e)) not in ("S", "N") for e in elements):
            raise validation(BAG_PARAMETER)
        kinds = {next(iter(e)) for e in elements}
        if len(kinds) != 1:
            raise validation(BAG_PARAMETER)
        kind_name = kinds.pop()
        return {f"{kind_name}S": [e[kind_name] for e in elements]}
