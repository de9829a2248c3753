"""AttributeValues: validation, DynamoDB number semantics, sizes, ordering and equality.

The engine holds every item in boto3's low-level shape, one type tag per value:
``{"S": str}``, ``{"N": str}`` (always normalised), ``{"B": bytes}``, ``{"SS": [str]}``,
``{"NS": [str]}``, ``{"BS": [bytes]}``, ``{"M": {name: value}}``, ``{"L": [value]}``,
``{"NULL": True}``, ``{"BOOL": bool}``.

Requests come in two dialects. From JSON (the HTTP server, the boto3 binding) binary values are
base64 text (``wire=True``); from the direct client they are ``bytes``, or ``str`` that boto3
would encode as UTF-8. :func:`parse_value` accepts either and returns the engine's shape.
"""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Context, Decimal, Inexact, InvalidOperation
from typing import Any

from .errors import invalid_parameters, serialization, validation

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]

TYPES = frozenset({"S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"})
SCALAR_TYPES = frozenset({"S", "N", "B"})
SET_TYPES = frozenset({"SS", "NS", "BS"})

MAX_ITEM_SIZE = 409_600
MAX_NESTING = 32
NESTING_TOO_DEEP = (
    "Nesting Levels have exceeded supported limits: Attributes in the item have nested levels "
    "beyond supported limit"
)
MAX_SIGNIFICANT_DIGITS = 38
MAX_EXPONENT = 125  # 9.99..E+125 is the largest magnitude
MIN_EXPONENT = -130  # 1E-130 is the smallest non-zero magnitude

# Names DynamoDB uses for types inside "operand type: X" messages.
TYPE_WORDS = {
    "S": "STRING",
    "N": "NUMBER",
    "B": "BINARY",
    "SS": "STRING_SET",
    "NS": "NUMBER_SET",
    "BS": "BINARY_SET",
    "M": "MAP",
    "L": "LIST",
    "NULL": "NULL",
    "BOOL": "BOOLEAN",
}

# ASCII digits only: DynamoDB's number grammar is ASCII (Decimal would read "١٢٣" as 123).
_NUMBER_SYNTAX = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_EXACT = Context(prec=MAX_SIGNIFICANT_DIGITS, traps=[Inexact, InvalidOperation])
_WIDE = Context(prec=MAX_SIGNIFICANT_DIGITS + 4)

_EMPTY_VALUE = (
    "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
)
_MANY_TYPES = (
    "Supplied AttributeValue has more than one datatypes set, "
    "must contain exactly one of the supported datatypes"
)
_NOT_NUMERIC = "The parameter cannot be converted to a numeric value"
_OVERFLOW = (
    "Number overflow. Attempting to store a number with magnitude larger than supported range"
)
_UNDERFLOW = (
    "Number underflow. Attempting to store a number with magnitude smaller than supported range"
)
_TOO_PRECISE = "Attempting to store more than 38 significant digits in a Number"
_EMPTY_SET = {
    "SS": "One or more parameter values were invalid: An string set  may not be empty",
    "NS": "One or more parameter values were invalid: An number set  may not be empty",
    "BS": "One or more parameter values were invalid: Binary sets should not be empty",
}


# --- numbers -------------------------------------------------------------------------------


MAX_NAME_BYTES = 65535  # the longest attribute name (64 KB itself is refused)
# DynamoDB's words, as the service answers them (ExtendDB issue #365, 2026-09): for item attribute
# names at any depth and for ExpressionAttributeNames values alike.
NAME_TOO_LARGE = (
    "1 validation error detected: Attribute name is too large, must be less than 65536 bytes"
)


def check_name(name: str) -> None:
    """Refuse an attribute name longer than DynamoDB's limit."""
    if len(name) > MAX_NAME_BYTES // 4 and len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise validation(NAME_TOO_LARGE)


def parse_number(text: Any) -> Decimal:
    """Validate a number as DynamoDB does and return its exact value."""
    if not isinstance(text, str):
        raise serialization(f"{json_kind(text)} cannot be converted to String")
    if not _NUMBER_SYNTAX.match(text):
        raise validation(_NOT_NUMERIC)
    value = Decimal(text)
    _check_magnitude(value)
    return value


def _check_magnitude(value: Decimal) -> None:
    if not value:
        return
    _sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    # Significant digits: strip zeros at both ends of the coefficient.
    stripped = len(digits)
    lead = 0
    while lead < stripped and digits[lead] == 0:
        lead += 1
    trail = 0
    while trail < stripped - lead and digits[stripped - 1 - trail] == 0:
        trail += 1
    significant = stripped - lead - trail
    if significant > MAX_SIGNIFICANT_DIGITS:
        raise validation(_TOO_PRECISE)
    adjusted = value.adjusted()
    if adjusted > MAX_EXPONENT:
        raise validation(_OVERFLOW)
    if adjusted < MIN_EXPONENT:
        raise validation(_UNDERFLOW)


def format_number(value: Decimal) -> str:
    """DynamoDB's canonical output: plain decimal, no exponent, no redundant zeros."""
    if not value:
        return "0"
    text = format(value.normalize(_WIDE), "f")
    return text


def normalize_number(text: Any) -> str:
    if type(text) is str and _is_plain_integer(text):
        return text  # fast path: a canonical integer needs no Decimal round trip
    return format_number(parse_number(text))


def _is_plain_integer(text: str) -> bool:
    """``text`` is an integer already in canonical form (no sign but ``-``, no leading zero,
    at most 38 digits): normalising it returns it unchanged, and it is always in range."""
    digits = text[1:] if text[:1] == "-" else text
    return (
        0 < len(digits) <= MAX_SIGNIFICANT_DIGITS
        and digits.isascii()
        and digits.isdigit()
        and (digits[0] != "0" or text == "0")
    )


def number_arithmetic(left: str, right: str, *, subtract: bool = False) -> str:
    """``left + right`` (or ``-``) with DynamoDB's precision limits on the result."""
    a, b = Decimal(left), Decimal(right)
    try:
        result = _EXACT.subtract(a, b) if subtract else _EXACT.add(a, b)
    except (Inexact, InvalidOperation):
        # DynamoDB reports results needing more than 38 digits with the overflow text.
        raise validation(_OVERFLOW) from None
    _check_magnitude(result)
    return format_number(result)


# --- validation ----------------------------------------------------------------------------


def json_kind(value: Any) -> str:
    """How DynamoDB's JSON reader names a value of the wrong type in its messages."""
    if value is None:
        return "NULL_VALUE"
    if isinstance(value, bool):
        return "TRUE_VALUE" if value else "FALSE_VALUE"
    if isinstance(value, (int, float)):
        return "NUMBER_VALUE"
    if isinstance(value, dict):
        return "START_OBJECT"
    if isinstance(value, list):
        return "START_ARRAY"
    return "VALUE_STRING"


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise serialization(f"{json_kind(value)} cannot be converted to String")
    return value


def _binary(value: Any, wire: bool) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)) and not wire:
        return bytes(value)
    if isinstance(value, str):
        if not wire:
            return value.encode("utf-8")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise serialization("Base64 encoded binary data must be valid base64 text") from None
    raise serialization(f"{json_kind(value)} cannot be converted to Blob")


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        if isinstance(value, tuple):
            return list(value)
        raise serialization(f"{json_kind(value)} cannot be converted to List")
    return value


def _duplicates_message(shown: list[str], kind: str) -> str:
    if kind == "BS":
        return invalid_parameters(
            f"Input collection {'[' + ', '.join(shown) + ']'}of type BS contains duplicates."
        ).message
    return invalid_parameters(f"Input collection [{', '.join(shown)}] contains duplicates.").message


def parse_value(value: Any, *, wire: bool = False, depth: int = 1) -> AttributeValue:
    """Validate one AttributeValue and return it in the engine's shape."""
    if not isinstance(value, dict):
        raise serialization(f"{json_kind(value)} cannot be converted to AttributeValue")
    if len(value) != 1:
        present = [k for k in value if k in TYPES and value[k] is not None]
        if not present:
            raise validation(_EMPTY_VALUE)
        if len(present) > 1:
            raise validation(_MANY_TYPES)
        kind = present[0]
    else:
        kind = next(iter(value))
        if kind not in TYPES or value[kind] is None:
            raise validation(_EMPTY_VALUE)
    raw = value[kind]
    if depth > MAX_NESTING:
        # The top-level attribute is level 1; a document path reaches at most 32 levels.
        raise validation(NESTING_TOO_DEEP)
    if kind == "S":
        return {"S": _string(raw)}
    if kind == "N":
        return {"N": normalize_number(raw)}
    if kind == "B":
        return {"B": _binary(raw, wire)}
    if kind == "BOOL":
        if not isinstance(raw, bool):
            raise serialization(f"{json_kind(raw)} cannot be converted to Boolean")
        return {"BOOL": raw}
    if kind == "NULL":
        if not isinstance(raw, bool):
            raise serialization(f"{json_kind(raw)} cannot be converted to Boolean")
        if not raw:
            raise invalid_parameters("Null attribute value types must have the value of true")
        return {"NULL": True}
    if kind in SET_TYPES:
        return {kind: _parse_set(kind, _list(raw), wire)}
    if kind == "L":
        return {"L": [parse_value(v, wire=wire, depth=depth + 1) for v in _list(raw)]}
    # kind == "M"
    if not isinstance(raw, dict):
        raise serialization(f"{json_kind(raw)} cannot be converted to Map")
    return {"M": {_string(k): parse_value(v, wire=wire, depth=depth + 1) for k, v in raw.items()}}


def _parse_set(kind: str, raw: list[Any], wire: bool) -> list[Any]:
    if not raw:
        raise validation(_EMPTY_SET[kind])
    elements: list[Any]
    if kind == "SS":
        elements = [_string(v) for v in raw]
        shown = elements
    elif kind == "NS":
        elements = [normalize_number(v) for v in raw]
        shown = [str(v) for v in raw]
    else:
        elements = [_binary(v, wire) for v in raw]
        shown = [repr(v) for v in elements]
    if len(set(elements)) != len(elements):
        raise validation(_duplicates_message(shown, kind))
    return elements


def parse_item(item: Any, *, wire: bool = False) -> Item:
    """Validate a whole item (a map of attribute name to AttributeValue)."""
    return parse_item_sized(item, wire=wire)[0]


def parse_item_sized(item: Any, *, wire: bool = False) -> tuple[Item, int]:
    """:func:`parse_item` and the item's :func:`item_size`, in one walk of the item."""
    if not isinstance(item, dict):
        raise serialization(f"{json_kind(item)} cannot be converted to Map")
    out: Item = {}
    size = 0
    for name, value in item.items():
        if type(name) is not str or not name:  # one test for the usual name
            if not isinstance(name, str):
                raise serialization("Attribute names must be strings")
            if not name:
                raise invalid_parameters("Empty attribute name")
        size += len(name) if name.isascii() else len(name.encode("utf-8"))
        # Fast path for the commonest attributes, a string or a canonical integer: the same
        # checks as parse_value and value_size, without their dispatch. Such a value is already
        # what parse_value would return, so it is kept rather than copied (items are packed
        # for storage, never changed in place).
        if type(value) is dict and len(value) == 1:
            ((kind, raw),) = value.items()
            if type(raw) is str:
                if kind == "S":
                    out[name] = value
                    size += len(raw) if raw.isascii() else len(raw.encode("utf-8"))
                    continue
                if kind == "N":
                    integer_size = _plain_integer_size(raw)
                    if integer_size:
                        out[name] = value
                        size += integer_size
                        continue
        parsed = out[name] = parse_value(value, wire=wire)
        size += value_size(parsed)
    return out, size


# --- sizes ---------------------------------------------------------------------------------


def _number_size(text: str) -> int:
    integer_size = _plain_integer_size(text)
    if integer_size:
        return integer_size
    value = Decimal(text)
    if not value:
        return 1
    sign, digits, _exp = value.normalize(_WIDE).as_tuple()
    count = len(digits)
    adjusted = value.adjusted()
    even_bonus = 1 if (count % 2 == 0 and adjusted % 2 == 0) else 0
    return 1 + (count + 1) // 2 + even_bonus + (1 if sign else 0)


def _integer_size(text: str) -> int:
    """_number_size of a plain integer (see _is_plain_integer), without Decimal: the significant
    digits are the digits less trailing zeros, and the exponent is the digit count less one."""
    if text == "0":
        return 1
    negative = text[0] == "-"
    digits = text[1:] if negative else text
    count = len(digits.rstrip("0"))
    even_bonus = 1 if (count % 2 == 0 and (len(digits) - 1) % 2 == 0) else 0
    return 1 + (count + 1) // 2 + even_bonus + (1 if negative else 0)


def _plain_integer_size(text: str) -> int:
    """:func:`_integer_size` of ``text`` if it is a plain integer (:func:`_is_plain_integer`),
    else 0 (no size is 0): the two in one pass, for the item walks."""
    if text[:1] == "-":
        digits = text[1:]
        negative = 1
    else:
        digits = text
        negative = 0
    length = len(digits)
    if not (0 < length <= MAX_SIGNIFICANT_DIGITS and digits.isascii() and digits.isdigit()):
        return 0
    if digits[0] == "0":
        return 1 if text == "0" else 0
    count = len(digits.rstrip("0"))
    even_bonus = 1 if (count % 2 == 0 and (length - 1) % 2 == 0) else 0
    return 1 + (count + 1) // 2 + even_bonus + negative


def value_size(value: AttributeValue) -> int:
    """Bytes one AttributeValue counts for toward the 400 KB limit and capacity units."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw) if raw.isascii() else len(raw.encode("utf-8"))  # ASCII: no copy
    if kind == "B":
        return len(raw)
    if kind == "N":
        return _number_size(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode("utf-8")) for v in raw)
    if kind == "NS":
        return sum(_number_size(v) for v in raw)
    if kind == "BS":
        return sum(len(v) for v in raw)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in raw)
    return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in raw.items())


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    size = 0
    for name, value in item.items():
        size += (len(name) if name.isascii() else len(name.encode("utf-8"))) + value_size(value)
    return size


# --- ordering and equality -----------------------------------------------------------------


def value_type(value: AttributeValue) -> str:
    return next(iter(value))


def compare(left: AttributeValue, right: AttributeValue) -> int | None:
    """Order two scalars as DynamoDB does: -1, 0 or 1; ``None`` if not comparable.

    Strings order by UTF-8 bytes, which is the same as code point order; binary by unsigned
    bytes; numbers numerically.
    """
    ((lk, lv),) = left.items()
    ((rk, rv),) = right.items()
    if lk != rk or lk not in SCALAR_TYPES:
        return None
    if lk == "N":
        lv, rv = Decimal(lv), Decimal(rv)
    return int(lv > rv) - int(lv < rv)


def equal(left: AttributeValue | None, right: AttributeValue | None) -> bool:
    """Type and value equality; sets ignore order; numbers are already normalised."""
    if left is None or right is None:
        return False
    ((lk, lv),) = left.items()
    ((rk, rv),) = right.items()
    if lk != rk:
        return False
    if lk in SET_TYPES:
        return len(lv) == len(rv) and set(lv) == set(rv)
    if lk == "L":
        return len(lv) == len(rv) and all(equal(a, b) for a, b in zip(lv, rv, strict=True))
    if lk == "M":
        return lv.keys() == rv.keys() and all(equal(lv[k], rv[k]) for k in lv)
    return bool(lv == rv)


def describe(value: AttributeValue) -> str:
    """AWS's rendering of a value inside messages, e.g. ``{N:5}``."""
    ((kind, raw),) = value.items()
    if kind in ("S", "N"):
        return f"{{{kind}:{raw}}}"
    return f"{{{kind}:{raw!r}}}"


def to_wire(value: Any) -> Any:
    """JSON ``default=`` hook: bytes (B and BS elements) become base64 text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
