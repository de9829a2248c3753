"""Hypothesis strategies for PartiQL statements, drawn from the engine's grammar, and requests of
the three PartiQL operations that carry them.

One strategy per production of ``src/firstwrite/engine/expressions/partiql.lark`` (``select``,
``insert``, ``update``, ``delete``, ``exists``; ``condition`` down to ``predicate`` and
``operand``; ``path``, ``ident``, ``value``), drawing text the grammar accepts, then what it
does not: reserved words as bare names, unknown functions, bags of mixed types, ``?`` counts that
do not match the parameters. On top of those, :func:`mutated` breaks a statement (truncated,
junk tokens spliced in, slices cut or doubled, wrapped in a thousand parentheses, padded past
DynamoDB's 8,192 characters), and :data:`deep_values` / :data:`deep_conditions` nest past every
limit (32 levels of an item, 300 operators, 400 levels of a condition). Parameters are valid
AttributeValues, nested up to 700 levels, or hostile ones (:data:`hostile.attribute_values`:
wrong tags, junk, lone surrogates).

:func:`requests` draws ``(operation, body)`` for ExecuteStatement, BatchExecuteStatement (1 to 25
statements, and sometimes 0 or 26) and ExecuteTransaction. Statements name :data:`TABLE` (``pk``
S + ``sk`` N, index :data:`INDEX` on ``v``) and keys from :data:`KEYS` often enough that reads
find items and writes change them; the caller creates the table and its items.

Size: one strategy per production of the grammar and per member of the three requests, kept
together as hostile.py keeps its own.
"""

from __future__ import annotations

import base64
import operator
from typing import Any, TypeVar

from hostile import attribute_values as hostile_attribute_values
from hypothesis import strategies as st

T = TypeVar("T")

TABLE = "partiql-fuzz"
HASH_TABLE = "pfuzz"  # pk (S) alone; a bare name the grammar accepts
INDEX = "by_v"  # GSI of TABLE: v (S)
KEYS = (("a", 1), ("a", 2), ("b", 1), ("c", 3))  # items the caller puts in TABLE
MAX_STATEMENT = 8192  # DynamoDB's Statement length limit
OPERATIONS = ("ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction")


def _one_in(draw: st.DrawFn, n: int) -> bool:
    """True about once in ``n`` draws: the rare branch (False is what hypothesis shrinks to)."""
    return draw(st.integers(1, n)) == n


def _weighted(*choices: tuple[int, st.SearchStrategy[T]]) -> st.SearchStrategy[T]:
    """One of ``choices`` (weight, strategy), in proportion to the weights; shrinks to the
    first (and its repr stays short: a batch's strategies are nested deep)."""
    total = sum(weight for weight, _ in choices)

    @st.composite
    def weighted(draw: st.DrawFn) -> T:
        roll = draw(st.integers(0, total - 1))
        for weight, strategy in choices:
            if roll < weight:
                return draw(strategy)
            roll -= weight
        raise AssertionError("unreachable")  # pragma: no cover

    return weighted()


# --- names and values ---------------------------------------------------------------------

_ATTRIBUTES = ("pk", "sk", "v", "n", "m", "l", "s", "b", "nothing")
_RESERVED_AS_NAMES = ("count", "size", "value", "key", "date", "user", "select", "order")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# (Leaves from small pools and alphabets: a batch draws up to 25 statements per example.)
# (No lone surrogates: a body holding one is refused before any PartiQL is read; the junk
# tokens of :func:`mutated` carry one now and then.)
_texts = st.one_of(
    st.sampled_from(["", "a", "b", "x", "\x00", "é", "💥", "?", "'", '"', "a.b", "#n"]),
    st.text(alphabet="ab x'\"?.#:[]{}é💥\x00\U0010ffff", max_size=8),
)
_bare_names = _weighted(
    (12, st.sampled_from(_ATTRIBUTES)),
    (1, st.sampled_from(_RESERVED_AS_NAMES)),  # refused as bare names, names when quoted
    (3, st.builds(operator.add, st.sampled_from("aZ_"), st.text(alphabet="az_$09", max_size=6))),
)
ident = _weighted((4, _bare_names), (2, _bare_names.map(_quote)), (1, _texts.map(_quote)))
_steps = st.one_of(
    ident.map(lambda n: "." + n), st.sampled_from(["[0]", "[1]", "[7]", "[99999999999]"])
)
path = _weighted(
    (3, st.sampled_from(_ATTRIBUTES)),  # most paths name an attribute the items have
    (2, st.builds(lambda head, rest: head + "".join(rest), ident, st.lists(_steps, max_size=3))),
)

_numbers = st.one_of(
    st.integers(-1000, 1000).map(str),
    st.sampled_from(
        ["0", "1", "2", "3", ".5", "5.", "007", "1e126", "1e-131", "1E+999", "9" * 39, "9" * 40,
         "1.5e3", "-0", "123456789012345678901234567890.5", "1e", "0x10"]
    ),
)  # fmt: skip
_scalars = st.one_of(
    _texts.map(_string_literal),
    st.sampled_from(["'a'", "'b'", "'x'"]),
    _numbers,
    st.sampled_from(["TRUE", "FALSE", "NULL", "true", "null", "?"]),
)


def _map(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{_string_literal(k)}: {v}" for k, v in pairs) + "}"


def _bag(members: list[str]) -> str:
    return "<<" + ", ".join(members) + ">>"


value = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda vs: "[" + ", ".join(vs) + "]"),
        st.lists(st.tuples(_texts | st.sampled_from(_ATTRIBUTES), inner), max_size=4).map(_map),
        st.lists(_scalars | inner, max_size=4).map(_bag),  # empty and mixed bags too
    ),
    max_leaves=10,
)


def _depths(most: int) -> st.SearchStrategy[int]:
    """A depth up to ``most``: near the limits (32 levels, 300 operators, 400 levels) and far
    past them as often as anywhere (hypothesis alone favours small numbers)."""
    marks = [n for n in (31, 33, 299, 301, 399, 401, 500, 700, 1000) if n <= most] + [most]
    return st.one_of(st.sampled_from(marks), st.integers(20, most))


@st.composite
def deep_values(draw: st.DrawFn, past: bool = False) -> str:
    """A value nested 20 to 700 levels (DynamoDB stops an item at 32): lists, maps, or a
    pattern of both repeated."""
    depth = draw(st.integers(401, 700) if past else _depths(700))
    leaf = draw(_scalars)
    pattern = draw(st.lists(st.sampled_from(["[", "{'m':"]), min_size=1, max_size=3))
    opened = (pattern * depth)[:depth]
    closing = "".join("]" if o == "[" else "}" for o in reversed(opened))
    return "".join(opened) + leaf + closing


# Deep values go where a value stands at the top (an INSERT's attribute, a SET's value, a
# WHERE's comparison), one draw in ten: at every leaf, nearly every statement would hold one.
values = _weighted((9, value), (1, deep_values()))

# --- conditions ----------------------------------------------------------------------------

_FUNCTIONS = (
    "begins_with",
    "contains",
    "attribute_exists",
    "attribute_not_exists",
    "attribute_type",
    "size",
    "EXISTS",
    "no_such_function",
)
_comparators = st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="])


def _call(name: str, args: list[str]) -> str:
    return f"{name}({', '.join(args)})"


operand_leaf = st.one_of(path, value)
operand = st.recursive(
    operand_leaf,
    lambda inner: st.builds(
        _call, st.sampled_from(_FUNCTIONS), st.lists(inner, min_size=1, max_size=3)
    ),
    max_leaves=4,
)


def _in(subject: str, options: list[str], square: bool) -> str:
    return f"{subject} IN " + ("[{}]" if square else "({})").format(", ".join(options))


predicate = st.one_of(
    operand,
    st.builds(lambda a, op, b: f"{a} {op} {b}", operand, _comparators, operand),
    st.builds(lambda a, lo, hi: f"{a} BETWEEN {lo} AND {hi}", operand, operand, operand),
    st.builds(_in, operand, st.lists(operand, min_size=1, max_size=5), st.booleans()),
    st.builds(lambda a: f"{a} IS MISSING", operand),
    st.builds(lambda a: f"{a} IS NOT MISSING", operand),
)
condition = st.recursive(
    predicate,
    lambda inner: st.one_of(
        inner.map(lambda c: f"({c})"),
        inner.map(lambda c: f"NOT {c}"),
        st.lists(inner, min_size=2, max_size=4).map(" AND ".join),
        st.lists(inner, min_size=2, max_size=4).map(" OR ".join),
        st.builds(lambda a, op, c: f"{a} {op} ({c})", operand, _comparators, inner),
    ),
    max_leaves=8,
)


@st.composite
def deep_conditions(draw: st.DrawFn, past: bool = False) -> str:
    """A condition nested or chained past the expression grammar's limits (and under them)."""
    inner = draw(predicate)
    n = draw(st.integers(401, 1500) if past else _depths(1500))
    shape = draw(
        st.sampled_from(["parens", "nots", "calls", "and-chain", "or-chain", "mixed", "value"])
    )
    if shape == "parens":
        return "(" * n + inner + ")" * n
    if shape == "nots":
        return "NOT " * n + inner
    if shape == "calls":
        return "size(" * n + "v" + ")" * n + " = 1"
    if shape in ("and-chain", "or-chain"):
        joiner = " AND " if shape == "and-chain" else " OR "
        return joiner.join([inner] * min(n, 600))
    if shape == "value":
        return f"v = {draw(deep_values(past))}"
    pattern = draw(
        st.lists(
            st.sampled_from(["(", "NOT (", "size(", "begins_with(v, "]), min_size=1, max_size=3
        )
    )
    return "".join((pattern * n)[:n]) + "v" + ")" * n


@st.composite
def _key_value(draw: st.DrawFn, kind: str) -> str:
    if _one_in(draw, 10):
        return draw(operand)  # the wrong type, a path, a call, ...
    if _one_in(draw, 3):
        return "?"
    pk, sk = draw(st.sampled_from(KEYS))
    return _string_literal(pk) if kind == "S" else str(sk)


@st.composite
def where(draw: st.DrawFn) -> str:
    """Mostly the whole key by equality (then maybe more), else any condition."""
    choice = draw(st.integers(0, 9))
    if choice < 7:
        conjuncts = [f"pk = {draw(_key_value('S'))}"]
        if not _one_in(draw, 8):
            conjuncts.append(f"sk = {draw(_key_value('N'))}")
        if _one_in(draw, 3):
            conjuncts.append(draw(_weighted((4, condition), (1, deep_conditions()))))
        return " AND ".join(draw(st.permutations(conjuncts)))
    if choice < 9:
        return draw(condition)
    return draw(deep_conditions())


# --- statements ----------------------------------------------------------------------------

source = _weighted(
    (12, st.just(_quote(TABLE))),
    (2, st.just(HASH_TABLE)),
    (1, st.just(f"{_quote(TABLE)}.{_quote(INDEX)}")),
    (1, st.just(f"{_quote(TABLE)}.{INDEX}")),
    (1, st.just(_quote("no-such-table"))),
    (1, st.builds(lambda a, b: f"{a}.{b}" if b else a, ident, st.none() | ident)),
)
projection = _weighted(
    (2, st.just("*")), (1, st.lists(path, min_size=1, max_size=4).map(", ".join))
)
_returning = _weighted(
    (4, st.just("")),
    (1, st.sampled_from([" RETURNING ALL OLD *", " RETURNING ALL NEW *",
                         " RETURNING MODIFIED OLD *", " RETURNING MODIFIED NEW *"])),
)  # fmt: skip


@st.composite
def select(draw: st.DrawFn) -> str:
    text = f"SELECT {draw(projection)} FROM {draw(source)}"
    if not _one_in(draw, 6):
        text += f" WHERE {draw(where())}"
    if _one_in(draw, 6):
        text += f" ORDER BY {draw(path)}" + draw(st.sampled_from(["", " ASC", " DESC"]))
    return text


@st.composite
def insert(draw: st.DrawFn) -> str:
    if _one_in(draw, 8):
        item = draw(values)  # not a tuple: a list, a string, a ?...
    else:
        pairs = [("pk", draw(_key_value("S")))]
        if not _one_in(draw, 8):
            pairs.append(("sk", "?" if _one_in(draw, 3) else draw(st.integers(0, 99).map(str))))
        pairs += draw(
            st.lists(st.tuples(st.sampled_from(_ATTRIBUTES) | _texts, values), max_size=4)
        )
        item = _map(draw(st.permutations(pairs)))
    return f"INSERT INTO {draw(source)} VALUE {item}"


_SET_FUNCTIONS = ("list_append", "set_add", "set_delete", "if_not_exists", "size", "nope")
set_value = _weighted(
    (
        9,
        st.recursive(
            operand_leaf,
            lambda inner: st.one_of(
                st.builds(
                    _call, st.sampled_from(_SET_FUNCTIONS), st.lists(inner, min_size=1, max_size=3)
                ),
                st.builds(
                    lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(["+", "-"]), inner
                ),
            ),
            max_leaves=4,
        ),
    ),
    (1, deep_values()),
)


@st.composite
def _action(draw: st.DrawFn) -> str:
    if not _one_in(draw, 4):
        assignments = draw(
            st.lists(st.builds(lambda p, v: f"{p} = {v}", path, set_value), min_size=1, max_size=3)
        )
        return "SET " + ", ".join(assignments)
    return "REMOVE " + ", ".join(draw(st.lists(path, min_size=1, max_size=3)))


@st.composite
def update(draw: st.DrawFn) -> str:
    actions = " ".join(draw(st.lists(_action(), min_size=1, max_size=3)))
    return f"UPDATE {draw(source)} {actions} WHERE {draw(where())}{draw(_returning)}"


@st.composite
def delete(draw: st.DrawFn) -> str:
    return f"DELETE FROM {draw(source)} WHERE {draw(where())}{draw(_returning)}"


exists = select().map(lambda s: f"EXISTS({s})")
reads = _weighted((5, select()), (1, exists))
writes = st.one_of(insert(), update(), delete())
statement = st.one_of(reads, writes)


@st.composite
def deep_statement(draw: st.DrawFn) -> str:
    """A statement of the grammar with one part nested past 400 levels (issue 39's shapes: a
    deep VALUE, SET value or WHERE), a few in every short run."""
    table, key = _quote(TABLE), "pk = 'a' AND sk = 1"
    shape = draw(st.sampled_from(["select", "insert", "update", "delete"]))
    if shape == "select":
        return f"SELECT * FROM {table} WHERE {key} AND {draw(deep_conditions(past=True))}"
    if shape == "insert":
        return (
            f"INSERT INTO {table} VALUE {{'pk': 'd', 'sk': 1, 'v': {draw(deep_values(past=True))}}}"
        )
    if shape == "update":
        return f"UPDATE {table} SET v = {draw(deep_values(past=True))} WHERE {key}"
    return f"DELETE FROM {table} WHERE {key} AND ({draw(deep_conditions(past=True))})"


_JUNK_TOKENS = (
    "(", ")", "[", "]", "{", "}", "<<", ">>", "'", '"', "?", ",", ";", ".", "*", "=", "--",
    "/*", "*/", "\x00", "\ud800", "💥", "SELECT", "WHERE", "AND", "NOT", "VALUE", "IS",
    "MISSING", "RETURNING", "EXISTS(", "1e", "-", "+", "\n",
)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[str] = statement) -> str:
    """A statement broken one way or another (the module docstring)."""
    text = draw(base)
    at = draw(st.integers(0, len(text)))
    how = draw(
        _weighted(
            (3, st.sampled_from(["truncate", "junk", "cut", "double", "wrap", "case"])),
            (1, st.sampled_from(["pad", "long"])),  # (in a batch: the whole request refused)
        )
    )
    if how == "truncate":  # by a little, mostly (hypothesis favours small numbers)
        return text[: len(text) - at]
    if how == "junk":
        junk = draw(st.lists(st.sampled_from(_JUNK_TOKENS) | st.text(max_size=3), min_size=1))
        return text[:at] + " ".join(junk) + text[at:]
    if how == "cut":
        return text[:at] + text[at + draw(st.integers(1, 20)) :]
    if how == "double":
        return text[:at] + text[at // 2 : at] + text[at:]
    if how == "wrap":
        n = draw(st.integers(100, 3000))
        return "(" * n + text + ")" * draw(st.sampled_from([0, n, n + 1]))
    if how == "pad":  # around DynamoDB's 8,192 characters, in whitespace or a comment
        target = draw(st.integers(MAX_STATEMENT - 2, MAX_STATEMENT * 2))
        filler = draw(st.sampled_from([" ", "\n", "-- x\n", "/* */"]))
        padding = filler * ((target - len(text)) // len(filler) + 1)
        return text + padding[: max(0, target - len(text))]
    if how == "long":  # one string literal or name past the limit
        size = draw(st.integers(MAX_STATEMENT - 100, MAX_STATEMENT * 3))
        filler = draw(st.sampled_from(["'" + "x" * size + "'", _quote("n" * size), "1" * size]))
        return text[:at] + filler + text[at:]
    return text.lower() if draw(st.booleans()) else text.swapcase()


statements = _weighted(
    (14, statement),
    (4, mutated()),
    (3, deep_statement()),
    (1, st.just("")),
    (1, st.text(max_size=40)),
)

# --- parameters ----------------------------------------------------------------------------

_valid_scalars = st.one_of(
    st.sampled_from(KEYS).map(lambda k: {"S": k[0]}),
    st.sampled_from(KEYS).map(lambda k: {"N": str(k[1])}),
    st.text(max_size=8).map(lambda s: {"S": s}),
    _numbers.map(lambda n: {"N": n}),
    st.binary(max_size=8).map(lambda b: {"B": base64.b64encode(b).decode()}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.lists(st.text(max_size=4), min_size=1, max_size=3, unique=True).map(lambda s: {"SS": s}),
    st.lists(st.integers(0, 99), min_size=1, max_size=3, unique=True).map(
        lambda ns: {"NS": [str(n) for n in ns]}
    ),
)
valid_attribute_values = st.recursive(
    _valid_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda v: {"L": v}),
        st.dictionaries(st.text(max_size=4), inner, max_size=3).map(lambda v: {"M": v}),
    ),
    max_leaves=8,
)


@st.composite
def deep_attribute_values(draw: st.DrawFn) -> dict[str, Any]:
    """An AttributeValue nested 20 to 450 levels of ``L`` and ``M`` (each two levels of JSON:
    this process's JSON encoder stops near 1,000)."""
    node: dict[str, Any] = draw(_valid_scalars)
    pattern = draw(st.lists(st.booleans(), min_size=1, max_size=3))
    for level in range(draw(_depths(450))):
        node = {"L": [node]} if pattern[level % len(pattern)] else {"M": {"a": node}}
    return node


attribute_value = _weighted(
    (14, valid_attribute_values), (1, deep_attribute_values()), (1, hostile_attribute_values)
)


def placeholders(text: str) -> int:
    """How many ``?`` of ``text`` are parameters: outside quotes and comments."""
    count, at, end = 0, 0, len(text)
    while at < end:
        char = text[at]
        if char in "'\"":
            close = text.find(char, at + 1)
            while close != -1 and text[close + 1 : close + 2] == char:  # '' and "" escape
                close = text.find(char, close + 2)
            at = end if close == -1 else close + 1
        elif text.startswith("--", at):
            newline = text.find("\n", at)
            at = end if newline == -1 else newline + 1
        elif text.startswith("/*", at):
            close = text.find("*/", at + 2)
            at = end if close == -1 else close + 2
        else:
            count += char == "?"
            at += 1
    return count


@st.composite
def parameters(draw: st.DrawFn, text: str) -> list[Any] | Any | None:
    """Parameters for ``text``: as many as its ``?`` (mostly), one more or less, none, junk."""
    wanted = placeholders(text)
    if _one_in(draw, 30):
        return draw(st.sampled_from([None, [], {}, "?", 1, [None]]))
    if _one_in(draw, 20):
        wanted = max(0, wanted + draw(st.sampled_from([-1, 1])))
    if wanted == 0:
        return None
    return draw(st.lists(attribute_value, min_size=wanted, max_size=wanted))


@st.composite
def _parameterized(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> dict[str, Any]:
    text = draw(texts)
    element: dict[str, Any] = {"Statement": text}
    params = draw(parameters(text))
    if params is not None:
        element["Parameters"] = params
    return element


_ON_FAILURE = _weighted((11, st.sampled_from(["NONE", "ALL_OLD"])), (1, st.just("nonsense")))
_ON_FAILURE_VALID = st.sampled_from(["NONE", "ALL_OLD"])  # (per statement of a batch)
_CAPACITY = _weighted((11, st.sampled_from(["NONE", "TOTAL", "INDEXES"])), (1, st.just("bad")))


def _optional(body: dict[str, Any], draw: st.DrawFn, name: str, strategy: Any) -> None:
    if _one_in(draw, 5):
        body[name] = draw(strategy)


@st.composite
def execute_statement(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(_parameterized(statements))
    _optional(body, draw, "ConsistentRead", st.booleans())
    _optional(
        body, draw, "Limit", _weighted((11, st.integers(1, 5)), (1, st.sampled_from([0, 2**63])))
    )
    if _one_in(draw, 12):  # (real ones: the test asks for the next page of each answer)
        body["NextToken"] = draw(st.text(max_size=20) | st.just(base64.b64encode(b"{}").decode()))
    _optional(body, draw, "ReturnConsumedCapacity", _CAPACITY)
    _optional(body, draw, "ReturnValuesOnConditionCheckFailure", _ON_FAILURE)
    return body


@st.composite
def _statement_lists(
    draw: st.DrawFn, texts: st.SearchStrategy[str], most: int
) -> list[dict[str, Any]]:
    """1 to ``most`` statements: up to three drawn, repeated in turn (each with its own
    parameters) to the size drawn; drawing 25 statements from the grammar for every example
    would take most of a short run."""
    drawn = draw(st.lists(texts, min_size=1, max_size=3))

    size = draw(st.integers(1, most))
    elements = []
    for text in (drawn * most)[:size]:
        element: dict[str, Any] = {"Statement": text}
        params = draw(parameters(text))
        if params is not None:
            element["Parameters"] = params
        elements.append(element)
    return elements


def _out_of_range(past: int) -> st.SearchStrategy[list[dict[str, Any]]]:
    """No statement, or one more than the operation takes (each a key read)."""
    read = {"Statement": f"SELECT * FROM {_quote(TABLE)} WHERE pk = 'a' AND sk = 1"}
    return st.sampled_from([0, past]).map(lambda n: [read] * n)


@st.composite
def batch_execute_statement(draw: st.DrawFn) -> dict[str, Any]:
    """1 to 25 statements, all reads or all writes (what DynamoDB runs), or any mix; sometimes
    none or 26."""
    kind = draw(st.sampled_from([reads, writes, statements]))
    elements = draw(_weighted((12, _statement_lists(kind, 25)), (1, _out_of_range(26))))
    for element in elements:
        _optional(element, draw, "ConsistentRead", st.booleans())
        _optional(element, draw, "ReturnValuesOnConditionCheckFailure", _ON_FAILURE_VALID)
    body: dict[str, Any] = {"Statements": elements}
    _optional(body, draw, "ReturnConsumedCapacity", _CAPACITY)
    return body


@st.composite
def execute_transaction(draw: st.DrawFn) -> dict[str, Any]:
    """1 to 25 statements (of DynamoDB's 100), reads with ``EXISTS`` or writes, or any mix."""
    kind = draw(st.sampled_from([reads, st.one_of(writes, exists), statements]))
    elements = draw(_weighted((12, _statement_lists(kind, 25)), (1, _out_of_range(101))))
    for element in elements:
        _optional(element, draw, "ReturnValuesOnConditionCheckFailure", _ON_FAILURE_VALID)
    body: dict[str, Any] = {"TransactStatements": elements}
    _optional(body, draw, "ClientRequestToken", st.text(min_size=1, max_size=40))
    _optional(body, draw, "ReturnConsumedCapacity", _CAPACITY)
    return body


REQUESTS = {
    "ExecuteStatement": execute_statement(),
    "BatchExecuteStatement": batch_execute_statement(),
    "ExecuteTransaction": execute_transaction(),
}
