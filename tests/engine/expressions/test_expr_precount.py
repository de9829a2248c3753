"""The operator pre-count (issue 15): an expression over DynamoDB's 300 operators is refused
from its text when the text allows, with the answer the full parse gives, and nothing the
parser accepts is refused by it.

Property-tested against lark itself: for generated expressions (valid ones, keywords used as
names, NOT chains, token soup), the floor is at most the parse tree's real operator count, the
reduced text is accepted exactly when the text is, and :func:`parse` answers exactly as the
plain parse (:func:`parse_text`) does, refusals included.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Tree
from lark.exceptions import UnexpectedInput

from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.expressions import parser
from firstwrite.engine.expressions.parser import MAX_OPERATORS, START, parse, parse_text
from firstwrite.engine.expressions.precount import operator_floor, reduced
from hypothesis_budget import examples

CONDITIONS = ("ConditionExpression", "FilterExpression", "KeyConditionExpression")
KINDS = (*CONDITIONS, "UpdateExpression", "ProjectionExpression")
TOO_MANY = "The expression contains too many operators; operator count: 301"

# Names include keyword spellings: lark takes them as names where the keyword cannot stand.
_names = st.sampled_from(["a", "b", "not", "NOT", "and", "or", "in", "between", "Not_", "notx"])
_paths = st.builds(
    lambda head, rest: head + "".join(rest),
    _names | st.sampled_from(["#n", "#not"]),
    st.lists(st.sampled_from([".not", ".a", "[0]", ".#n", ".in"]), max_size=2),
)
_operands = st.one_of(
    _paths,
    st.sampled_from([":v", ":not", ":w"]),
    st.builds("size({})".format, _paths),
    st.builds("not({})".format, _paths),  # a function named not: an operand, not NOT
)
_comparisons = st.one_of(
    st.builds(
        "{} {} {}".format, _operands, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), _operands
    ),
    st.builds("{} BETWEEN {} AND {}".format, _operands, _operands, _operands),
    st.builds("{} IN ({}, {})".format, _operands, _operands, _operands),
    st.builds("{} in({})".format, _operands, _operands),
    st.builds("attribute_exists({})".format, _paths),
    st.builds("contains({}, {})".format, _paths, _operands),
)
conditions = st.recursive(
    _comparisons,
    lambda inner: st.one_of(
        st.builds("{} AND {}".format, inner, inner),
        st.builds("{} or {}".format, inner, inner),
        st.builds("{}{}".format, st.integers(1, 400).map(lambda n: "NOT " * n), inner),
        st.builds("not\t{}".format, inner),
        st.builds("({})".format, inner),
        st.builds("{} OR ({})".format, inner, inner),
    ),
    max_leaves=12,
)
_set_values = st.one_of(
    _operands,
    st.builds("{} + {}".format, _operands, _operands),
    st.builds("{}-{}".format, _operands, _operands),
    st.builds("if_not_exists({}, {})".format, _paths, _operands),
    st.builds("list_append({}, {})".format, _operands, _operands),
)
updates = st.builds(
    lambda sets, removes: (
        " ".join(
            (["SET " + ", ".join(sets)] if sets else [])
            + (["REMOVE " + removes] if removes else [])
        )
        or "REMOVE a"
    ),
    st.lists(st.builds("{} = {}".format, _paths, _set_values), max_size=4),
    st.one_of(st.none(), _paths),
)
projections = st.lists(_paths, min_size=1, max_size=4).map(", ".join)
_soup = st.lists(
    st.sampled_from(
        [
            "NOT",
            "not",
            "NOT",
            "AND",
            "OR",
            "BETWEEN",
            "IN",
            "(",
            ")",
            "=",
            "<",
            ",",
            "a",
            ":v",
            "#n",
            "size",
            "SET",
            "+",
            "-",
            ".",
            "[0]",
            "x(",
            "not(",
            "\t",
            "NOTNOT",
            "1",
        ]
    ),
    max_size=40,
).map(" ".join)
texts = st.one_of(
    st.tuples(st.sampled_from(CONDITIONS), conditions),
    st.tuples(st.just("UpdateExpression"), updates),
    st.tuples(st.just("ProjectionExpression"), projections),
    st.tuples(st.sampled_from(KINDS), _soup),
    st.tuples(st.sampled_from(KINDS), st.builds("{}{}".format, _soup, conditions)),
)


def _lark(kind: str, text: str) -> Tree[Any] | None:
    try:
        return parser._LARK.parse(text, start=START[kind])
    except UnexpectedInput:
        return None


def _operators(tree: Tree[Any]) -> int:
    return sum(1 for node in tree.iter_subtrees() if node.data in parser._OPERATOR_NODES)


def _answer(call: Any, kind: str, text: str) -> str:
    try:
        call(kind, text)
    except DynamoDBError as error:
        return f"{error.code}: {error.message}"
    return "accepted"


@settings(max_examples=examples(600), deadline=None)
@given(texts)
def test_the_floor_never_exceeds_the_count_of_what_lark_accepts(case: tuple[str, str]) -> None:
    kind, text = case
    tree = _lark(kind, text)
    if tree is not None:
        assert operator_floor(kind, text) <= _operators(tree), text


@settings(max_examples=examples(600), deadline=None)
@given(texts)
def test_the_reduced_text_is_accepted_exactly_when_the_text_is(case: tuple[str, str]) -> None:
    kind, text = case
    assert (_lark(kind, reduced(text)) is None) == (_lark(kind, text) is None), text


@settings(max_examples=examples(600), deadline=None)
@given(texts)
def test_parse_answers_as_the_plain_parse(case: tuple[str, str]) -> None:
    kind, text = case
    expected = _answer(parse_text, kind, text)
    parse.cache_clear()
    assert _answer(parse, kind, text) == expected, text
    assert _answer(parse, kind, text) == expected, text  # (from the caches, the second time)


def test_a_chain_of_a_thousand_nots_is_refused_before_it_is_parsed(monkeypatch: Any) -> None:
    parsed: list[str] = []
    real = parser._LARK.parse

    def spy(text: str, start: str) -> Any:
        parsed.append(text)
        return real(text, start=start)

    monkeypatch.setattr(parser._LARK, "parse", spy)
    chain = "NOT " * 1000 + "a = :v"
    assert len(chain) < 4096
    assert _answer(parse, "ConditionExpression", chain) == (
        f"ValidationException: Invalid ConditionExpression: {TOO_MANY}"
    )
    assert parsed == ["NOT NOT a = :v"]  # only the reduced text, a few tokens
    # With a syntax error too, the syntax error comes first, as DynamoDB reports it.
    broken = "NOT " * 1000 + "a = "
    assert _answer(parse, "ConditionExpression", broken) == (
        'ValidationException: Invalid ConditionExpression: Syntax error; token: "<EOF>", near: "= "'
    )
    # A refusal is remembered: the same text again is not parsed again.
    parsed.clear()
    for text in (chain, broken):
        assert _answer(parse, "ConditionExpression", text).startswith("ValidationException")
    assert parsed == []


def test_at_the_limit_it_is_the_count_that_decides() -> None:
    for nots, verdict in ((299, "accepted"), (300, TOO_MANY)):
        text = "NOT " * nots + "a = :v"  # nots + 1 operators
        assert operator_floor("ConditionExpression", text) == nots + 1
        answer = _answer(parse, "ConditionExpression", text)
        assert answer == verdict or answer.endswith(verdict), (nots, answer)
    assert MAX_OPERATORS == 300
