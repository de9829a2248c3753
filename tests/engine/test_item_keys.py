"""Key encoding: SQLite's byte order must be DynamoDB's order for every key type."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from firstwrite.engine.item_keys import encode_key_value, encode_number, successor
from firstwrite.engine.values import normalize_number

# Numbers inside DynamoDB's range: up to 38 significant digits, exponent -130..125.
numbers = st.builds(
    lambda digits, exponent, negative: ("-" if negative else "") + f"{digits}E{exponent}",
    st.integers(min_value=0, max_value=10**38 - 1),
    st.integers(min_value=-130, max_value=88),
    st.booleans(),
).map(normalize_number)


@given(numbers, numbers)
def test_number_encoding_preserves_numeric_order(a: str, b: str) -> None:
    left, right = Decimal(a), Decimal(b)
    ea, eb = encode_number(a), encode_number(b)
    assert (ea < eb) == (left < right)
    assert (ea == eb) == (left == right)


def test_number_encoding_examples_in_order() -> None:
    ordered = [
        "-1e125",
        "-100",
        "-1.23",
        "-1.2",
        "-1",
        "-0.001",
        "0",
        "1e-130",
        "0.5",
        "1",
        "1.2",
        "1.23",
        "10",
        "9.9e125",
    ]
    encoded = [encode_number(normalize_number(n)) for n in ordered]
    assert encoded == sorted(encoded)
    assert len(set(encoded)) == len(encoded)


def test_equal_numbers_encode_equal() -> None:
    assert encode_number(normalize_number("1000")) == encode_number(normalize_number("1e3"))
    assert encode_number(normalize_number("-0")) == encode_number(normalize_number("0.000"))


@given(st.text(), st.text())
def test_string_encoding_is_utf8_byte_order(a: str, b: str) -> None:
    ea, eb = encode_key_value({"S": a}), encode_key_value({"S": b})
    assert (ea < eb) == (a.encode() < b.encode())


@given(st.binary(min_size=1))
def test_successor_bounds_every_extension(prefix: bytes) -> None:
    upper = successor(prefix)
    if upper is None:
        assert set(prefix) == {0xFF}
        return
    assert prefix < upper
    assert prefix + b"\xff" * 4 < upper
