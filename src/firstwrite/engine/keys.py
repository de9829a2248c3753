"""Key schemas (a table's and its indexes') and key parts encoded in DynamoDB's order.

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
    """The key attributes of a table (or of a query's hash-key part): names and types.

    A global secondary index may have up to four HASH and four RANGE attributes (DynamoDB's
    multi-attribute keys): ``hash_name``/``range_name`` are the first of each, ``more_hash`` and
    ``more_range`` the others as ``(name, type)`` in KeySchema order. Tables and local indexes
    have at most one of each.
    """

    hash_name: str
    hash_type: str
    range_name: str | None = None
    range_type: str | None = None
    more_hash: tuple[tuple[str, str], ...] = ()
    more_range: tuple[tuple[str, str], ...] = ()

    @property
    def names(self) -> frozenset[str]:
        if self.range_name is None and not self.more_hash:
            return frozenset((self.hash_name,))
        return frozenset(n for n, _ in (*self.hash_attributes, *self.range_attributes))

    @property
    def hash_attributes(self) -> tuple[tuple[str, str], ...]:
        """Every partition-key attribute as ``(name, type)``, in KeySchema order."""
        return ((self.hash_name, self.hash_type), *self.more_hash)

    @property
    def range_attributes(self) -> tuple[tuple[str, str], ...]:
        """Every sort-key attribute as ``(name, type)``, in KeySchema order (maybe none)."""
        if self.range_name is None or self.range_type is None:
            return ()
        return ((self.range_name, self.range_type), *self.more_range)

    @property
    def composite(self) -> bool:
        """Whether the partition or the sort key has more than one attribute."""
        return bool(self.more_hash or self.more_range)

    @classmethod
    def of(
        cls, definition: Mapping[str, Any], key_schema: list[dict[str, str]] | None = None
    ) -> KeySchema:
        """The key schema of a table definition (its KeySchema and AttributeDefinitions), or
        ``key_schema`` (an index's KeySchema) typed by the table's AttributeDefinitions."""
        types = {d["AttributeName"]: d["AttributeType"] for d in definition["AttributeDefinitions"]}
        hashes: list[tuple[str, str]] = []
        ranges: list[tuple[str, str]] = []
        for element in definition["KeySchema"] if key_schema is None else key_schema:
            name = element["AttributeName"]
            (hashes if element["KeyType"] == "HASH" else ranges).append((name, types[name]))
        if not hashes:
            raise ValueError(f"a key schema without a HASH key: {definition['KeySchema']!r}")
        (hash_name, hash_type), *more_hash = hashes
        range_name, range_type = ranges[0] if ranges else (None, None)
        return cls(
            hash_name, hash_type, range_name, range_type, tuple(more_hash), tuple(ranges[1:])
        )


@dataclass(frozen=True, slots=True)
class IndexSchema:
    """One secondary index of a table, as its catalog definition describes it.

    ``id`` names its entries in storage (``index_items``); ``projected`` is the set of
    attributes its entries hold (``None``: every attribute, projection ``ALL``); ``status`` is
    DescribeTable's IndexStatus (LSIs are always ``ACTIVE``).
    """

    name: str
    id: int
    local: bool
    key: KeySchema
    projection: str  # ALL | KEYS_ONLY | INCLUDE
    projected: frozenset[str] | None
    status: str = "ACTIVE"

    @property
    def kind(self) -> str:
        """The ConsumedCapacity member this index's units are reported under."""
        return "LocalSecondaryIndexes" if self.local else "GlobalSecondaryIndexes"

    def projects(self, names: frozenset[str] | set[str]) -> bool:
        return self.projected is None or names <= self.projected


def indexes_of(definition: Mapping[str, Any], table: KeySchema) -> tuple[IndexSchema, ...]:
    """The secondary indexes of a table definition that have storage (see ``_index_ids``)."""
    ids: Mapping[str, int] = definition.get("_index_ids") or {}
    out: list[IndexSchema] = []
    for members, local in (
        (definition.get("LocalSecondaryIndexes"), True),
        (definition.get("GlobalSecondaryIndexes"), False),
    ):
        for index in members or ():
            name = index["IndexName"]
            if name not in ids:
                continue
            key = KeySchema.of(definition, index["KeySchema"])
            projection = index["Projection"]
            kind = projection["ProjectionType"]
            projected = None
            if kind != "ALL":
                projected = (
                    table.names | key.names | frozenset(projection.get("NonKeyAttributes") or ())
                )
            status = "ACTIVE" if local else index.get("IndexStatus", "ACTIVE")
            out.append(IndexSchema(name, ids[name], local, key, kind, projected, status))
    return tuple(out)


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


def composite_part(encoded: bytes, *, terminated: bool = True) -> bytes:
    """One attribute of a multi-attribute key, as it is laid end to end with the others.

    A zero byte is escaped as ``00 FF`` and a part ends with ``00 00``: the end sorts before an
    escaped zero, which sorts before every other byte, so the concatenation orders attribute by
    attribute (a value before a longer one it begins) and a part never runs into the next.
    ``terminated=False`` gives the part without its end: a prefix, for ``begins_with``.
    """
    escaped = encoded.replace(b"\x00", b"\x00\xff")
    return escaped + b"\x00\x00" if terminated else escaped


def successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])
