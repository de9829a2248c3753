"""ProjectionExpression and KeyConditionExpression analysis."""

from __future__ import annotations

import pytest
from expr_helpers import N, S, compile_, error

from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.expressions import RangeCondition, key_condition_range, project

ITEM = {
    "pk": S("k"),
    "a": {"M": {"b": N(1), "c": {"M": {"d": N(2)}}}},
    "l": {"L": [N(0), {"M": {"x": N(1), "y": N(2)}}, N(2), N(3)]},
    "n.dot": N(5),
}


class TestProjection:
    def test_nested_maps_and_lists(self) -> None:
        compiled = compile_(projection="a.c.d, l[3], l[1].y, pk")
        assert compiled.projection is not None
        assert project(ITEM, compiled.projection) == {
            "pk": S("k"),
            "a": {"M": {"c": {"M": {"d": N(2)}}}},
            "l": {"L": [{"M": {"y": N(2)}}, N(3)]},
        }

    def test_missing_paths_are_left_out(self) -> None:
        compiled = compile_(
            projection="nope, a.zz, l[9], a.b[0], l[0].x, #n", names={"#n": "n.dot"}
        )
        assert compiled.projection is not None
        assert project(ITEM, compiled.projection) == {"n.dot": N(5)}


class TestKeyCondition:
    def analyse(self, expression: str, range_key: str | None = "sk") -> tuple[object, object]:
        compiled = compile_(
            key_condition=expression,
            values={":p": S("a"), ":q": S("b")} if ":q" in expression else {":p": S("a")},
        )
        assert compiled.key_condition is not None
        ranges = () if range_key is None else (range_key,)
        match = key_condition_range(compiled.key_condition, ("pk",), ranges)
        assert match.equal == ()
        return match.hash_values[0], match.condition

    @pytest.mark.parametrize(
        ("expression", "operator"),
        [
            ("pk = :p AND sk = :q", "="),
            ("pk = :p AND sk < :q", "<"),
            ("pk = :p AND sk <= :q", "<="),
            ("pk = :p AND sk > :q", ">"),
            ("pk = :p AND :q > sk", "<"),
            ("sk >= :q AND pk = :p", ">="),
            ("pk = :p AND begins_with(sk, :q)", "begins_with"),
            ("(pk = :p) AND (sk = :q)", "="),
        ],
    )
    def test_range_conditions(self, expression: str, operator: str) -> None:
        assert self.analyse(expression) == (S("a"), RangeCondition(operator, (S("b"),)))

    def test_between_and_hash_only(self) -> None:
        compiled = compile_(
            key_condition="pk = :p AND sk BETWEEN :a AND :b",
            values={":p": S("a"), ":a": N(1), ":b": N(2)},
        )
        assert compiled.key_condition is not None
        match = key_condition_range(compiled.key_condition, ("pk",), ("sk",))
        assert (match.hash_values, match.condition) == (
            (S("a"),),
            RangeCondition("BETWEEN", (N(1), N(2))),
        )
        assert self.analyse("pk = :p", None) == (S("a"), None)

    def test_multi_attribute_keys(self) -> None:
        """Every HASH attribute by =, RANGE attributes left to right, = before the last."""
        compiled = compile_(
            key_condition="b = :b AND a = :a AND x = :x AND y > :y",
            values={":a": S("1"), ":b": N(2), ":x": S("x"), ":y": N(3)},
        )
        assert compiled.key_condition is not None
        match = key_condition_range(compiled.key_condition, ("a", "b"), ("x", "y", "z"))
        assert match.hash_values == (S("1"), N(2))  # in KeySchema order
        assert match.equal == (S("x"),)
        assert match.condition == RangeCondition(">", (N(3),))
        values = {":a": S("1"), ":b": N(2), ":x": S("x"), ":y": N(3)}
        for text, message in [
            (
                "a = :a AND b = :b AND y = :y",
                "RANGE key attributes x must have equality conditions specified in the query "
                "because a condition is present on key attribute y",
            ),
            (
                "a = :a AND b = :b AND x > :x AND y = :y",
                "RANGE key attributes x must have equality conditions specified in the query "
                "because a condition is present on key attribute y",
            ),
            (
                "a = :a AND x = :x",
                "HASH key attributes b must have equality conditions specified in the query",
            ),
        ]:
            used = {k: v for k, v in values.items() if k in text}
            compiled = compile_(key_condition=text, values=used)
            assert compiled.key_condition is not None
            with pytest.raises(DynamoDBError) as info:
                key_condition_range(compiled.key_condition, ("a", "b"), ("x", "y", "z"))
            assert info.value.message == message

    @pytest.mark.parametrize(
        ("expression", "range_key", "message"),
        [
            ("sk = :p", "sk", "Query condition missed key schema element: pk"),
            ("x = :p", "sk", "Query condition missed key schema element: pk"),
            ("pk = :p AND x = :p", "sk", "Query condition missed key schema element: sk"),
            ("pk < :p", "sk", "Query key condition not supported"),
            (
                "pk = :p AND sk = :p",
                None,
                "The number of query conditions (2) exceeds the number of key attributes defined in the schema (1)",
            ),
        ],
    )
    def test_schema_errors(self, expression: str, range_key: str | None, message: str) -> None:
        with pytest.raises(DynamoDBError) as info:
            self.analyse(expression, range_key)
        assert info.value.message == message

    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            (
                "pk = :p OR sk = :p",
                "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: OR",
            ),
            (
                "NOT pk = :p",
                "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: NOT",
            ),
            (
                "pk IN (:p)",
                "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: IN",
            ),
            (
                "pk <> :p",
                "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: <>",
            ),
            (
                "attribute_exists(pk)",
                "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: attribute_exists",
            ),
            (
                "pk = sk",
                "Invalid KeyConditionExpression: Invalid condition in KeyConditionExpression: Multiple attribute names used in one condition",
            ),
            ("pk.a = :p", "KeyConditionExpressions cannot have conditions on nested attributes"),
            (
                "pk = :p AND pk = :p",
                "KeyConditionExpressions must only contain one condition per key",
            ),
            (
                "size(pk) = :p",
                "Invalid KeyConditionExpression: KeyConditionExpressions cannot contain nested operations",
            ),
            (
                ":p = :p",
                "Invalid KeyConditionExpression: Invalid condition in KeyConditionExpression: No key attribute specified",
            ),
        ],
    )
    def test_shape_errors_at_compile_time(self, expression: str, message: str) -> None:
        assert error(key_condition=expression, values={":p": S("a")}) == message
