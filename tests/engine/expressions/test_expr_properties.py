"""Property tests: ordering consistency and generated document paths."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from expr_helpers import compile_
from hypothesis import given, settings
from hypothesis import strategies as st

from firstwrite.engine.expressions import evaluate, project
from firstwrite.engine.values import format_number
from hypothesis_budget import examples

strings = st.text(max_size=8)
numbers = st.decimals(min_value=-(10**20), max_value=10**20, places=4, allow_nan=False)


def truth(expression: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    compiled = compile_(condition=expression, values={":a": a, ":b": b})
    assert compiled.condition is not None
    return evaluate(compiled.condition, None)


@settings(max_examples=examples(150), deadline=None)
@given(strings, strings)
def test_string_ordering_is_utf8_byte_order_and_trichotomous(x: str, y: str) -> None:
    a, b = {"S": x}, {"S": y}
    results = [truth(f":a {op} :b", a, b) for op in ("<", "=", ">")]
    assert results.count(True) == 1
    assert results[0] == (x.encode() < y.encode())
    assert truth(":a <= :b", a, b) == (results[0] or results[1])
    assert truth(":a BETWEEN :b AND :b", a, b) == results[1]


@settings(max_examples=examples(150), deadline=None)
@given(numbers, numbers)
def test_number_ordering_is_numeric(x: Decimal, y: Decimal) -> None:
    a, b = {"N": format_number(x)}, {"N": format_number(y)}
    assert truth(":a < :b", a, b) == (x < y)
    assert truth(":a = :b", a, b) == (x == y)
    assert truth(":a >= :b", a, b) == (x >= y)


names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=6
)
steps = st.lists(st.one_of(names, st.integers(min_value=0, max_value=3)), min_size=0, max_size=6)


@settings(max_examples=examples(150), deadline=None)
@given(names, steps)
def test_generated_paths_parse_and_project_what_they_address(
    head: str, rest: list[str | int]
) -> None:
    leaf = {"S": "leaf"}
    # Build the item from the innermost step outwards so the path exists.
    value: dict[str, Any] = leaf
    for step in reversed(rest):
        value = (
            {"L": [{"NULL": True}] * step + [value]}
            if isinstance(step, int)
            else {"M": {step: value}}
        )
    item = {head: value}
    placeholders: dict[str, str] = {}
    text = "#p0"
    placeholders["#p0"] = head
    for i, step in enumerate(rest, start=1):
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            placeholders[f"#p{i}"] = step
            text += f".#p{i}"
    compiled = compile_(projection=text, condition=f"attribute_exists({text})", names=placeholders)
    assert compiled.condition is not None and evaluate(compiled.condition, item)
    assert compiled.projection is not None
    projected = project(item, compiled.projection)
    # Walk the projection: lists collapse to the single selected element.
    node: Any = projected[head]
    for step in rest:
        node = node["L"][0] if isinstance(step, int) else node["M"][step]
    assert node == leaf
