"""AttributeValue validation, number semantics and sizes (reference section 5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firstwrite.engine import values
from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.values import (
    compare,
    equal,
    item_size,
    normalize_number,
    number_arithmetic,
    parse_item,
    parse_value,
)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("+3", "3"),
        (".123", "0.123"),
        ("0001.23", "1.23"),
        ("1e+5", "100000"),
        ("-17.4E37", "-174" + "0" * 36),
        ("-0", "0"),
        ("0e5", "0"),
        ("1.5E2", "150"),
        ("1e-3", "0.001"),
        ("3.1400", "3.14"),
        ("100.000", "100"),
        ("1e20", "100000000000000000000"),
        ("1e-20", "0.00000000000000000001"),
        ("1e125", "1" + "0" * 125),
    ],
)
def test_numbers_are_normalised_like_dynamodb(given: str, expected: str) -> None:
    assert normalize_number(given) == expected


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("1" * 39, "Attempting to store more than 38 significant digits in a Number"),
        (
            "1E+126",
            "Number overflow. Attempting to store a number with magnitude larger than supported range",
        ),
        (
            "1E-131",
            "Number underflow. Attempting to store a number with magnitude smaller than supported range",
        ),
        ("NaN", "The parameter cannot be converted to a numeric value"),
        ("Infinity", "The parameter cannot be converted to a numeric value"),
        ("dog", "The parameter cannot be converted to a numeric value"),
        (" 1", "The parameter cannot be converted to a numeric value"),
        ("1 ", "The parameter cannot be converted to a numeric value"),
    ],
)
def test_bad_numbers_get_dynamodb_messages(given: str, message: str) -> None:
    with pytest.raises(DynamoDBError) as err:
        normalize_number(given)
    assert err.value.code == "ValidationException"
    assert err.value.message == message


def test_38_digits_with_zeros_around_are_fine() -> None:
    assert normalize_number("000" + "1" * 38 + "000") == "1" * 38 + "000"
    assert normalize_number("9.9999999999999999999999999999999999999E+125").startswith("99999")


def test_arithmetic_keeps_precision_limits() -> None:
    assert number_arithmetic("1.5", "2.25") == "3.75"
    assert number_arithmetic("1", "3", subtract=True) == "-2"
    with pytest.raises(DynamoDBError, match="Number overflow"):
        number_arithmetic("1e50", "1")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {},
            "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes",
        ),
        (
            {"S": "a", "N": "1"},
            "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes",
        ),
        (
            {"NULL": False},
            "One or more parameter values were invalid: Null attribute value types must have the value of true",
        ),
        ({"SS": []}, "One or more parameter values were invalid: An string set  may not be empty"),
        ({"NS": []}, "One or more parameter values were invalid: An number set  may not be empty"),
        ({"BS": []}, "One or more parameter values were invalid: Binary sets should not be empty"),
        (
            {"SS": ["a", "a"]},
            "One or more parameter values were invalid: Input collection [a, a] contains duplicates.",
        ),
        (
            {"L": [{"SS": []}]},
            "One or more parameter values were invalid: An string set  may not be empty",
        ),
    ],
)
def test_invalid_attribute_values(value: dict[str, object], message: str) -> None:
    with pytest.raises(DynamoDBError) as err:
        parse_value(value)
    assert err.value.message == message


def test_number_sets_collapse_equal_numbers_into_a_duplicate() -> None:
    with pytest.raises(DynamoDBError, match="contains duplicates"):
        parse_value({"NS": ["1", "1.0"]})


def test_wrong_json_types_are_serialization_errors() -> None:
    for bad in ({"S": 5}, {"N": 5}, {"BOOL": "yes"}, {"L": "x"}, {"M": []}):
        with pytest.raises(DynamoDBError) as err:
            parse_value(bad)
        assert err.value.code == "SerializationException"


def test_binary_dialects() -> None:
    assert parse_value({"B": "aGk="}, wire=True) == {"B": b"hi"}
    assert parse_value({"B": "hi"}, wire=False) == {"B": b"hi"}
    assert parse_value({"B": b"\x00\xff"}) == {"B": b"\x00\xff"}
    with pytest.raises(DynamoDBError) as err:
        parse_value({"B": "***"}, wire=True)
    assert err.value.code == "SerializationException"


def test_empty_strings_and_binary_are_allowed_outside_keys() -> None:
    assert parse_item({"a": {"S": ""}, "b": {"B": b""}, "c": {"L": []}, "d": {"M": {}}})


def test_nesting_limit() -> None:
    value: dict[str, object] = {"S": "x"}
    for _ in range(32):
        value = {"L": [value]}
    with pytest.raises(DynamoDBError, match="Nesting Levels have exceeded supported limits"):
        parse_value(value)


def test_item_size_matches_documented_example() -> None:
    # The developer guide's example: {"shirt-color": "R", "shirt-size": "M"} is 23 bytes.
    assert item_size({"shirt-color": {"S": "R"}, "shirt-size": {"S": "M"}}) == 23


def test_number_sizes() -> None:
    assert item_size({"a": {"N": "0"}}) == 2
    # 1 + ceil(digits / 2), +1 for negatives.
    assert item_size({"a": {"N": "123"}}) == 1 + 3
    assert item_size({"a": {"N": "-123"}}) == 1 + 4


def test_ordering_and_equality() -> None:
    assert compare({"N": "10"}, {"N": "9"}) == 1
    assert compare({"S": "a"}, {"S": "B"}) == 1  # 0x61 > 0x42
    assert compare({"S": "¿"}, {"S": "z"}) == 1  # UTF-8 0xC2BF > 0x7A
    assert compare({"B": b"\xff"}, {"B": b"\x01"}) == 1  # unsigned
    assert compare({"S": "1"}, {"N": "1"}) is None
    assert equal({"SS": ["a", "b"]}, {"SS": ["b", "a"]})
    assert not equal({"L": [{"S": "a"}]}, {"L": [{"S": "b"}]})
    assert equal({"M": {"x": {"N": "1"}}}, {"M": {"x": {"N": "1"}}})


def test_nesting_at_the_limit_is_fine() -> None:
    value: dict[str, object] = {"S": "x"}
    for _ in range(31):
        value = {"L": [value]}
    assert parse_value(value)


_NUMBER_TEXTS = (
    st.integers(min_value=-(10**45), max_value=10**45).map(str)
    | st.from_regex(r"-?[0-9]{0,40}", fullmatch=True)
    | st.text(max_size=6)
)


@given(_NUMBER_TEXTS)
def test_plain_integer_size_is_the_plain_integer_check_and_size_in_one(text: str) -> None:
    expected = values._integer_size(text) if values._is_plain_integer(text) else 0
    assert values._plain_integer_size(text) == expected
