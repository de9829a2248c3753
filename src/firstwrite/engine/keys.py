"""A table's key schema, and its key parts encoded as bytes whose order is DynamoDB's order.

SQLite compares BLOBs with memcmp, so a range of sort keys becomes a range of byte strings.
Strings order by UTF-8 bytes and binary by unsigned bytes, so both encode as themselves. Numbers
encode as sign, exponent and digits so that byte order equals numeric order (checked by a
property test).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .values import AttributeValue


@dataclass(frozen=True, slots=True)
class KeySchema:
    """The key attributes of a table (or of a query's hash-key part): names and types."""

    hash_name: str
    hash_type: str
    range_name: str | None = None
    range_type: str | None = None

    @property
    def names(self) -> frozenset[str]:
        if self.range_name is None:
            return frozenset((self.hash_name,))
        return frozenset((self.hash_name, self.range_name))

    @classmethod
    def of(cls, definition: Mapping[str, Any]) -> KeySchema:
        """The key schema of a table definition (its KeySchema and AttributeDefinitions)."""
        types = {d["AttributeName"]: d["AttributeType"] for d in definition["AttributeDefinitions"]}
        hash_name = range_name = None
        for element in definition["KeySchema"]:
            if element["KeyType"] == "HASH":
                hash_name = element["AttributeName"]
            else:
                range_name = element["AttributeName"]
        if hash_name is None:
            raise ValueError(f"a key schema without a HASH key: {definition['KeySchema']!r}")
        return cls(
            hash_name, types[hash_name], range_name, types[range_name] if range_name else None
        )


_NEGATIVE, _ZERO, _POSITIVE = b"\x01", b"\x02", b"\x03"
_EXPONENT_BIAS = 1000  # exponents are within [-130, 125]; bias keeps them positive
_DIGIT_COMPLEMENT = bytes.maketrans(b"0123456789", b"9876543210")


def encode_number(text: str) -> bytes:
    """Order-preserving bytes for a normalised DynamoDB number."""
    value = Decimal(text)
    if not value:
        return _ZERO
    sign, digits, _ = value.as_tuple()
    coefficient = "".join(map(str, digits)).rstrip("0").lstrip("0").encode("ascii")
    exponent = value.adjusted()
    if not sign:
        return _POSITIVE + (exponent + _EXPONENT_BIAS).to_bytes(2, "big") + coefficient
    # Negative: bigger magnitude sorts first, so invert exponent and digits; the 0xFF terminator
    # makes a shorter coefficient (smaller magnitude, e.g. -1.2 vs -1.23) sort after a longer one.
    return (
        _NEGATIVE
        + (_EXPONENT_BIAS - exponent).to_bytes(2, "big")
        + coefficient.translate(_DIGIT_COMPLEMENT)
        + b"\xff"
    )


def encode_key_value(value: AttributeValue) -> bytes:
    """Encode one key attribute (S, N or B) for storage."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return bytes(raw.encode("utf-8"))
    if kind == "N":
        return encode_number(raw)
    return bytes(raw)


def successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])
