"""Applying UpdateExpressions: SET/REMOVE/ADD/DELETE semantics and runtime errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from expr_helpers import N, S, compile_

from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.expressions import apply_update, project

KEY = frozenset({"pk"})


def run(
    expression: str, item: dict[str, Any] | None, names: Any = None, **values: Any
) -> dict[str, Any]:
    compiled = compile_(
        update=expression, names=names, values={f":{k}": v for k, v in values.items()} or None
    )
    assert compiled.update is not None
    before = copy.deepcopy(item)
    result = apply_update(compiled.update, item, key_names=KEY)
    assert item == before  # the input is never mutated
    return result


def fails(expression: str, item: dict[str, Any] | None, **values: Any) -> str:
    with pytest.raises(DynamoDBError) as info:
        run(expression, item, **values)
    assert info.value.code == "ValidationException"
    return info.value.message


def nums(*xs: int) -> dict[str, Any]:
    return {"L": [N(x) for x in xs]}


class TestSet:
    def test_set_top_level_and_nested(self) -> None:
        item = {"pk": S("k"), "m": {"M": {"a": N(1)}}}
        assert run("SET x = :v, m.b = :v, m.a = :w", item, v=S("x"), w=N(2)) == {
            "pk": S("k"),
            "x": S("x"),
            "m": {"M": {"a": N(2), "b": S("x")}},
        }

    def test_operands_read_the_old_item(self) -> None:
        assert run("SET a = b, b = a", {"a": N(1), "b": N(2)}) == {"a": N(2), "b": N(1)}

    def test_arithmetic(self) -> None:
        assert run("SET n = n + :d", {"n": N("1.5")}, d=N("2.25")) == {"n": N("3.75")}
        assert run("SET n = :d - n", {"n": N(5)}, d=N(2)) == {"n": N(-3)}

    def test_if_not_exists_counter_idiom(self) -> None:
        assert run("SET c = if_not_exists(c, :zero) + :one", {}, zero=N(0), one=N(1)) == {"c": N(1)}
        assert run("SET c = if_not_exists(c, :zero) + :one", {"c": N(41)}, zero=N(0), one=N(1)) == {
            "c": N(42)
        }

    def test_list_append(self) -> None:
        assert run("SET l = list_append(l, :t)", {"l": nums(1)}, t=nums(2, 3)) == {
            "l": nums(1, 2, 3)
        }
        assert run("SET l = list_append(:h, l)", {"l": nums(1)}, h=nums(0)) == {"l": nums(0, 1)}
        assert run(
            "SET l = list_append(if_not_exists(l, :empty), :t)", {}, empty=nums(), t=nums(7)
        ) == {"l": nums(7)}

    def test_index_past_the_end_appends_in_index_order(self) -> None:
        assert run("SET l[10] = :a, l[5] = :b", {"l": nums(0)}, a=N(10), b=N(5)) == {
            "l": nums(0, 5, 10)
        }
        assert run("SET l[0] = :a", {"l": nums(1, 2)}, a=N(9)) == {"l": nums(9, 2)}

    def test_reference_example_remove_and_set_use_original_indexes(self) -> None:
        item = {"pk": S("k"), "a": nums(2, 3, 4, 5, 6, 7)}
        assert run("REMOVE a[1] SET a[3] = :v", item, v=N(17))["a"] == nums(2, 4, 17, 6, 7)

    def test_placeholder_with_dot_is_one_attribute(self) -> None:
        assert run("SET #n = :v", {}, names={"#n": "a.b"}, v=N(1)) == {"a.b": N(1)}

    def test_runtime_errors(self) -> None:
        assert fails("SET b = b + :v", {}, v=N(1)) == (
            "The provided expression refers to an attribute that does not exist in the item"
        )
        assert fails("SET b = b + :v", None, v=N(1)).startswith("The provided expression refers")
        assert fails("SET s = s + :v", {"s": S("x")}, v=N(1)) == (
            "An operand in the update expression has an incorrect data type"
        )
        assert fails("SET l = list_append(l, :v)", {"l": N(1)}, v=nums(1)) == (
            "An operand in the update expression has an incorrect data type"
        )
        invalid_path = "The document path provided in the update expression is invalid for update"
        assert fails("SET x.y.z = :v", {"x": {"M": {}}}, v=N(1)) == invalid_path
        assert fails("SET s[1] = :v", {"s": S("str")}, v=N(1)) == invalid_path
        assert fails("SET nope.x = :v", {}, v=N(1)) == invalid_path
        assert fails(
            "SET n = n + :v",
            {"n": N("9.9999999999999999999999999999999999999E+125")},
            v=N("1E+125"),
        ) == (
            "Number overflow. Attempting to store a number with magnitude larger than supported range"
        )

    def test_key_attributes_cannot_be_updated(self) -> None:
        message = "One or more parameter values were invalid: Cannot update attribute pk. This attribute is part of the key"
        assert fails("SET pk = :v", {"pk": S("k")}, v=S("j")) == message
        assert fails("REMOVE pk", {"pk": S("k")}) == message


class TestRemove:
    def test_remove_is_a_no_op_when_missing(self) -> None:
        item = {"a": nums(1), "m": {"M": {"x": N(1)}}}
        assert run("REMOVE nope, m.nope, a[5]", item) == item
        # On a missing item any path removes nothing.
        assert run("REMOVE elsewhere.deeper, a[0].x", None) == {}

    @pytest.mark.parametrize("path", ["elsewhere.deeper", "a[0].x", "m.x[0]", "m[0]", "s.x"])
    def test_remove_under_a_missing_or_mistyped_parent_is_refused(self, path: str) -> None:
        """REMOVE a.c where ``a`` is missing or not a map (``a[0]``: not a list), on an item
        that exists, is DynamoDB's "invalid for update" error, as for SET: its answers quoted in
        ScyllaDB's test/alternator/test_update_expression.py (test_nested_attribute_update_bad_
        path_dot and _array, which pass on DynamoDB)."""
        item = {"a": nums(1), "m": {"M": {"x": N(1)}}, "s": S("text")}
        assert fails(f"REMOVE {path}", item) == (
            "The document path provided in the update expression is invalid for update"
        )

    def test_remove_nested_and_leave_empty_containers(self) -> None:
        assert run("REMOVE m.x, l[0]", {"m": {"M": {"x": N(1)}}, "l": nums(1)}) == {
            "m": {"M": {}},
            "l": {"L": []},
        }

    def test_several_indexes_refer_to_the_original_list(self) -> None:
        assert run("REMOVE l[0], l[2], l[1]", {"l": nums(0, 1, 2, 3)}) == {"l": nums(3)}
        item = {"l": {"L": [{"M": {"x": N(1), "y": N(2)}}, {"M": {"y": N(5)}}]}}
        assert run("REMOVE l[0], l[1].x", item) == {"l": {"L": [{"M": {"y": N(5)}}]}}
        assert run("REMOVE l[1], l[0].x", item) == {"l": {"L": [{"M": {"y": N(2)}}]}}


class TestAddDelete:
    def test_add_numbers(self) -> None:
        assert run("ADD n :d", {"n": N(1)}, d=N(2)) == {"n": N(3)}
        assert run("ADD n :d", None, d=N(-2)) == {"n": N(-2)}

    def test_add_to_sets(self) -> None:
        assert run("ADD s :v", {"s": {"SS": ["a"]}}, v={"SS": ["a", "b"]}) == {
            "s": {"SS": ["a", "b"]}
        }
        assert run("ADD s :v", {}, v={"NS": ["1"]}) == {"s": {"NS": ["1"]}}
        assert fails("ADD s :v", {"s": {"SS": ["a"]}}, v={"NS": ["1"]}) == (
            "An operand in the update expression has an incorrect data type"
        )
        assert fails("ADD s :v", {"s": S("a")}, v=N(1)) == (
            "An operand in the update expression has an incorrect data type"
        )

    def test_delete_from_sets(self) -> None:
        assert run("DELETE s :v", {"s": {"SS": ["a", "b"]}}, v={"SS": ["a", "z"]}) == {
            "s": {"SS": ["b"]}
        }
        assert run("DELETE s :v", {"s": {"SS": ["a"]}}, v={"SS": ["a"]}) == {}  # all gone
        assert run("DELETE s :v", {}, v={"SS": ["a"]}) == {}
        assert fails("DELETE s :v", {"s": {"NS": ["1"]}}, v={"SS": ["a"]}) == (
            "An operand in the update expression has an incorrect data type"
        )

    def test_binary_sets(self) -> None:
        assert run(
            "ADD b :v DELETE c :w",
            {"c": {"BS": [b"\x01", b"\x02"]}},
            v={"BS": [b"\x00"]},
            w={"BS": [b"\x01"]},
        ) == {
            "b": {"BS": [b"\x00"]},
            "c": {"BS": [b"\x02"]},
        }


class TestUpdatedPaths:
    def test_paths_drive_updated_old_and_new(self) -> None:
        compiled = compile_(update="SET m.a = :v, x = :v REMOVE r", values={":v": N(9)})
        assert compiled.update is not None
        assert compiled.update.paths == (("m", "a"), ("x",), ("r",))
        old = {"pk": S("k"), "m": {"M": {"a": N(1), "b": N(2)}}, "r": N(0)}
        new = apply_update(compiled.update, old, key_names=KEY)
        assert project(old, compiled.update.paths) == {"m": {"M": {"a": N(1)}}, "r": N(0)}
        assert project(new, compiled.update.paths) == {"m": {"M": {"a": N(9)}}, "x": N(9)}
