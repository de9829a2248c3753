"""ConditionExpression/FilterExpression: grammar, precedence, functions and 4.2 semantics."""

from __future__ import annotations

from typing import Any

import pytest
from expr_helpers import N, S, compile_

from firstwrite.engine.expressions import evaluate


def holds(expression: str, item: dict[str, Any] | None, **values: Any) -> bool:
    compiled = compile_(
        condition=expression, values={f":{k}": v for k, v in values.items()} or None
    )
    assert compiled.condition is not None
    return evaluate(compiled.condition, item)


ITEM = {
    "pk": S("k"),
    "n": N(10),
    "s": S("hello"),
    "b": {"B": b"\x01\x02\x03"},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"\x01"]},
    "l": {"L": [S("x"), N(1), {"L": [S("inner")]}]},
    "m": {"M": {"a": {"M": {"b": N(7)}}, "lst": {"L": [N(0), {"M": {"deep": S("d")}}]}}},
    "t": {"BOOL": True},
    "z": {"NULL": True},
}


class TestComparisons:
    def test_equality_and_inequality(self) -> None:
        assert holds("n = :v", ITEM, v=N(10))
        assert holds("n = :v", ITEM, v=N("10.0"))  # numbers compare numerically
        assert not holds("n = :v", ITEM, v=S("10"))  # different types are never equal
        assert holds("n <> :v", ITEM, v=S("10"))

    def test_missing_attribute_equal_false_not_equal_true(self) -> None:
        assert not holds("missing_attr = :v", ITEM, v=N(1))
        assert holds("missing_attr <> :v", ITEM, v=N(1))
        assert holds("q <> zz", ITEM)  # both missing
        assert not holds("missing_attr < :v", ITEM, v=N(1))

    def test_ordering_by_type(self) -> None:
        assert holds("n > :v", ITEM, v=N(9.5))
        assert holds("n >= :v AND n <= :v", ITEM, v=N(10))
        assert holds("s < :v", ITEM, v=S("help"))  # 'o' < 'p'
        assert holds(":a > :b", None, a=S("a"), b=S("A"))  # 0x61 > 0x41
        assert holds(":a > :b", None, a=S("\u00bf"), b=S("z"))  # UTF-8 bytes order
        assert holds(":a > :b", None, a={"B": b"\xff"}, b={"B": b"\x01"})  # unsigned bytes

    def test_type_mismatch_in_ordering_is_false_not_an_error(self) -> None:
        assert not holds("s < :v", ITEM, v=N(1))
        assert not holds("s >= :v", ITEM, v=N(1))
        assert not holds("l < :v", ITEM, v=N(1))

    def test_sets_compare_order_insensitively(self) -> None:
        assert holds("ss = :v", ITEM, v={"SS": ["b", "a"]})
        assert holds("ns = :v", ITEM, v={"NS": ["2.50", "1"]})

    def test_between_inclusive(self) -> None:
        assert holds("n BETWEEN :a AND :b", ITEM, a=N(10), b=N(11))
        assert holds("n BETWEEN :a AND :b", ITEM, a=N(9), b=N(10))
        assert not holds("n BETWEEN :a AND :b", ITEM, a=N(11), b=N(12))
        assert not holds("s BETWEEN :a AND :b", ITEM, a=N(1), b=N(12))
        assert not holds("nothing_here BETWEEN :a AND :b", ITEM, a=N(1), b=N(12))

    def test_in(self) -> None:
        assert holds("n IN (:a, :b)", ITEM, a=N(1), b=N(10))
        assert not holds("n IN (:a, :b)", ITEM, a=N(1), b=N(2))
        assert not holds("missing_attr IN (:a)", ITEM, a=N(1))


class TestPrecedence:
    def test_and_binds_tighter_than_or(self) -> None:
        # false AND false OR true == (false AND false) OR true
        assert holds(":f = :t AND :f = :t OR :t = :t", None, f=N(0), t=N(1))
        # true OR true AND false == true OR (true AND false)
        assert holds(":t = :t OR :t = :t AND :t = :f", None, f=N(0), t=N(1))

    def test_not_binds_tighter_than_and(self) -> None:
        assert not holds("NOT :t = :t AND :t = :t", None, t=N(1))
        assert holds("NOT (:t = :f AND :t = :t)", None, t=N(1), f=N(0))
        assert holds("NOT NOT :t = :t", None, t=N(1))

    def test_parentheses_group(self) -> None:
        assert not holds("(:t = :t OR :t = :t) AND :t = :f", None, t=N(1), f=N(0))

    def test_keywords_case_insensitive(self) -> None:
        assert holds("n between :a and :b And not n in (:a) oR n = :a", ITEM, a=N(9), b=N(11))

    def test_names_that_start_with_keywords_are_names(self) -> None:
        item = {"nothing": N(1), "order_id": N(2), "android": N(3)}
        assert holds(
            "nothing = :a AND order_id = :b AND android = :c", item, a=N(1), b=N(2), c=N(3)
        )

    def test_one_redundant_pair_is_fine(self) -> None:
        assert holds("(n = :v)", ITEM, v=N(10))
        assert holds("(n) = :v", ITEM, v=N(10))


class TestFunctions:
    def test_attribute_exists(self) -> None:
        assert holds("attribute_exists(pk)", ITEM)
        assert not holds("attribute_exists(pk)", None)
        assert holds("attribute_not_exists(pk)", None)
        assert holds("attribute_exists(m.a.b) AND attribute_not_exists(m.a.c)", ITEM)
        assert holds("attribute_exists(l[2][0]) AND attribute_not_exists(l[3])", ITEM)
        assert holds("attribute_exists(m.lst[1].deep)", ITEM)
        assert holds("attribute_not_exists(s.x) AND attribute_not_exists(m[0])", ITEM)

    @pytest.mark.parametrize(
        ("attribute", "kind"),
        [
            ("n", "N"),
            ("s", "S"),
            ("b", "B"),
            ("ss", "SS"),
            ("ns", "NS"),
            ("bs", "BS"),
            ("l", "L"),
            ("m", "M"),
            ("t", "BOOL"),
            ("z", "NULL"),
        ],
    )
    def test_attribute_type(self, attribute: str, kind: str) -> None:
        assert holds(f"attribute_type({attribute}, :t)", ITEM, t=S(kind))
        other = "S" if kind != "S" else "N"
        assert not holds(f"attribute_type({attribute}, :t)", ITEM, t=S(other))

    def test_begins_with(self) -> None:
        assert holds("begins_with(s, :p)", ITEM, p=S("he"))
        assert not holds("begins_with(s, :p)", ITEM, p=S("lo"))
        assert holds("begins_with(b, :p)", ITEM, p={"B": b"\x01\x02"})
        assert not holds("begins_with(n, :p)", ITEM, p=S("1"))  # item attribute of another type
        assert holds("begins_with(:whole, :p)", None, whole=S("abc"), p=S("ab"))

    def test_contains(self) -> None:
        assert holds("contains(s, :v)", ITEM, v=S("ell"))
        assert holds("contains(b, :v)", ITEM, v={"B": b"\x02\x03"})
        assert holds("contains(ss, :v)", ITEM, v=S("a"))
        assert not holds("contains(ss, :v)", ITEM, v=S("c"))
        assert holds("contains(ns, :v)", ITEM, v=N("2.50"))
        assert holds("contains(bs, :v)", ITEM, v={"B": b"\x01"})
        assert holds("contains(l, :v)", ITEM, v=N(1))
        assert holds("contains(l, :v)", ITEM, v={"L": [S("inner")]})
        assert not holds("contains(n, :v)", ITEM, v=N(1))
        assert not holds("contains(ss, :v)", ITEM, v=N(1))

    def test_size(self) -> None:
        assert holds("size(s) = :v", ITEM, v=N(5))
        assert holds("size(b) = :v", ITEM, v=N(3))
        assert holds("size(ss) = :v AND size(l) = :w AND size(m) = :v", ITEM, v=N(2), w=N(3))
        assert not holds("size(n) = :v", ITEM, v=N(2))  # numbers have no size: false
        assert not holds("size(missing_attr) >= :v", ITEM, v=N(0))
        assert holds("size(:s) = :v", None, s=S("abc"), v=N(3))

    def test_placeholder_names_with_dots_are_literal(self) -> None:
        item = {"a.b": N(1), "a": {"M": {"b": N(2)}}}
        compiled = compile_(condition="#ab = :v", names={"#ab": "a.b"}, values={":v": N(1)})
        assert compiled.condition is not None and evaluate(compiled.condition, item)
        compiled = compile_(
            condition="#a.#b = :v", names={"#a": "a", "#b": "b"}, values={":v": N(2)}
        )
        assert compiled.condition is not None and evaluate(compiled.condition, item)

    def test_filter_exposes_top_level_names(self) -> None:
        compiled = compile_(
            filter="#s = :v AND m.a.b > :v", names={"#s": "sk"}, values={":v": N(1)}
        )
        assert compiled.filter is not None
        assert compiled.filter.top_level_names == {"sk", "m"}
