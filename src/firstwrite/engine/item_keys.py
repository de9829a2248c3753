"""Item keys: key schemas, key values encoded in DynamoDB's order, items' keys and index entries.

A table's key schema (and its indexes') turns items and ``Key`` parameters into storage keys,
and items into index entries. SQLite compares BLOBs with memcmp, so a range of sort keys becomes
a range of byte strings. Strings order by UTF-8 bytes and binary by unsigned bytes, so both
encode as themselves. Numbers encode as sign, exponent and digits so that byte order equals
numeric order (checked by a property test).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .errors import invalid_parameters, validation
from .values import (
    MAX_NAME_BYTES,
    AttributeValue,
    Item,
    check_name,
    item_size,
    parse_value,
    value_type,
)

# --- key schemas -------------------------------------------------------------------------------


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


# --- key values in DynamoDB's order ------------------------------------------------------------

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


# --- the keys of items --------------------------------------------------------------------------

MAX_HASH_KEY_BYTES = 2048
MAX_RANGE_KEY_BYTES = 1024
_KEY_MISMATCH = "The provided key element does not match the schema"


def _encoded(name: str, value: AttributeValue, *, is_hash: bool) -> bytes:
    ((kind, raw),) = value.items()
    if kind in ("S", "B") and len(raw) == 0:
        # "binary" for B (dynalite's tests of DynamoDB, GetItem and PutItem).
        what = "string" if kind == "S" else "binary"
        raise validation(
            "One or more parameter values are not valid. The AttributeValue for a key attribute "
            f"cannot contain an empty {what} value. Key: {name}"
        )
    encoded = encode_key_value(value)
    size = len(encoded)  # S encodes as its UTF-8 bytes and B as itself: their sizes
    if is_hash and size > MAX_HASH_KEY_BYTES:
        raise invalid_parameters("Size of hashkey has exceeded the maximum size limit of2048 bytes")
    if not is_hash and size > MAX_RANGE_KEY_BYTES:
        raise invalid_parameters(
            "Aggregated size of all range keys has exceeded the size limit of 1024 bytes"
        )
    return encoded


def check_attribute_names(item: Item, size: int) -> None:
    """Refuse an item with an attribute name (at any depth) longer than DynamoDB's limit.

    ``size`` is the item's size, which counts every name's bytes: below the limit no name can
    pass it, so the usual item costs one comparison.
    """
    if size <= MAX_NAME_BYTES:
        return
    pending: list[Any] = [item]
    while pending:
        mapping = pending.pop()
        for name, value in mapping.items():
            check_name(name)
            if "M" in value:
                pending.append(value["M"])
            elif "L" in value:
                pending.extend({"": v} for v in value["L"])


def item_key(schema: KeySchema, item: Item) -> tuple[bytes, bytes]:
    """Storage key of an item being written (PutItem): the key attributes must be present."""
    hash_value = _key_part(item, schema.hash_name, schema.hash_type)
    sk = b""
    if schema.range_name is not None:
        range_value = _key_part(item, schema.range_name, schema.range_type)
        sk = _encoded(schema.range_name, range_value, is_hash=False)
    return _encoded(schema.hash_name, hash_value, is_hash=True), sk


def _key_part(item: Item, name: str, kind: str | None) -> AttributeValue:
    """The item's key attribute ``name``, which must be there with the schema's type."""
    value = item.get(name)
    if value is None:
        raise invalid_parameters(f"Missing the key {name} in the item")
    if value_type(value) != kind:
        raise invalid_parameters(
            f"Type mismatch for key {name} expected: {kind} actual: {value_type(value)}"
        )
    return value


def parse_key(schema: KeySchema, key: Any, *, wire: bool) -> tuple[Item, bytes, bytes]:
    """Validate a ``Key`` parameter (GetItem, UpdateItem, ...): exactly the key attributes."""
    if not isinstance(key, dict):
        raise validation(_KEY_MISMATCH)
    parsed = {name: parse_value(value, wire=wire) for name, value in key.items()}
    if parsed.keys() != schema.names:
        raise validation(_KEY_MISMATCH)
    if schema.composite:
        for name, kind in (*schema.hash_attributes, *schema.range_attributes):
            if value_type(parsed[name]) != kind:
                raise validation(_KEY_MISMATCH)
        pk = key_bytes(schema.hash_attributes, parsed, is_hash=True)
        return parsed, pk, key_bytes(schema.range_attributes, parsed, is_hash=False)
    if value_type(parsed[schema.hash_name]) != schema.hash_type:
        raise validation(_KEY_MISMATCH)
    if schema.range_name is not None and value_type(parsed[schema.range_name]) != schema.range_type:
        raise validation(_KEY_MISMATCH)
    pk = _encoded(schema.hash_name, parsed[schema.hash_name], is_hash=True)
    sk = b""
    if schema.range_name is not None:
        sk = _encoded(schema.range_name, parsed[schema.range_name], is_hash=False)
    return parsed, pk, sk


def key_bytes(attributes: tuple[tuple[str, str], ...], values: Item, *, is_hash: bool) -> bytes:
    """The stored partition or sort key of ``values`` (which hold every attribute named, of
    the right types): one attribute's encoding, or several laid end to end (:func:`composite_part`)."""
    parts = key_parts(attributes, values, is_hash=is_hash)
    if len(parts) == 1:
        return parts[0]
    return b"".join(composite_part(part) for part in parts)


def key_parts(
    attributes: tuple[tuple[str, str], ...], values: Item, *, is_hash: bool
) -> list[bytes]:
    """Each named key attribute of ``values`` encoded, after the key checks (empty value,
    size limit)."""
    return [_encoded(name, values[name], is_hash=is_hash) for name, _ in attributes]


def key_of(schema: KeySchema, item: Item) -> Item:
    """The key attributes of a stored item (LastEvaluatedKey, stream Keys)."""
    key = {schema.hash_name: item[schema.hash_name]}
    if schema.range_name is not None:
        key[schema.range_name] = item[schema.range_name]
    for name, _ in (*schema.more_hash, *schema.more_range):
        key[name] = item[name]
    return key


# --- secondary indexes --------------------------------------------------------------------------


def check_index_keys(indexes: tuple[IndexSchema, ...], item: Item, *, update: bool = False) -> None:
    """Refuse an item whose index key attributes an index could not hold, as DynamoDB does: a
    present index key attribute must have the type AttributeDefinitions gives it and, for S
    and B, not be empty. (An item without the attribute is simply not in that index.)"""
    for index in indexes:
        if index.status == "DELETING":
            continue
        key = index.key
        hash_names = {n for n, _ in key.hash_attributes}
        for name, kind in (*key.hash_attributes, *key.range_attributes):
            value = item.get(name)
            if value is None:
                continue
            actual = value_type(value)
            if actual != kind:
                # dynalite db/index.js validateItem (its tests run against DynamoDB).
                raise invalid_parameters(
                    f"Type mismatch for Index Key {name} Expected: {kind} Actual: {actual} "
                    f"IndexName: {index.name}"
                )
            if actual in ("S", "B") and len(value[actual]) == 0:
                if update:
                    # moto exceptions.py EmptyKeyAttributeException (AWS-verified test).
                    raise validation(
                        "One or more parameter values are not valid. The update expression "
                        "attempted to update a secondary index key to a value that is not "
                        "supported. The AttributeValue for a key attribute cannot contain an "
                        "empty string value."
                    )
                # moto responses.py validate_put_has_empty_keys (AWS-verified test).
                raise validation(
                    "One or more parameter values are not valid. A value specified for a "
                    "secondary index key is not supported. The AttributeValue for a key "
                    f"attribute cannot contain an empty string value. IndexName: {index.name}, "
                    f"IndexKey: {name}"
                )
            _encoded(name, value, is_hash=name in hash_names)


def index_entry(
    table: KeySchema, index: IndexSchema, item: Item
) -> tuple[bytes, bytes, bytes, bytes, int, Item] | None:
    """The entry ``item`` has in ``index``: (ipk, isk, pk, sk, size, projected item), or
    ``None`` when the item lacks an index key attribute (a sparse index leaves it out).

    Items are checked on the way in (:func:`check_index_keys`); an older item whose attribute
    has another type, or a key value past DynamoDB's key size limits (2048 bytes for a partition
    key attribute, 1024 for a sort key attribute), is left out too when an index added later is
    backfilled, as DynamoDB's backfill does (ScyllaDB's test_gsi_updatetable.py
    test_gsi_backfill_key_limits, run against DynamoDB).
    """
    key = index.key
    if key.composite:
        for name, kind in (*key.hash_attributes, *key.range_attributes):
            value = item.get(name)
            if value is None or value_type(value) != kind or not _has_content(value):
                return None
        joined_pk = _joined(key.hash_attributes, item, MAX_HASH_KEY_BYTES)
        joined_sk = _joined(key.range_attributes, item, MAX_RANGE_KEY_BYTES)
        if joined_pk is None or joined_sk is None:
            return None
        ipk, isk = joined_pk, joined_sk
    else:
        hash_value = item.get(key.hash_name)
        if hash_value is None or value_type(hash_value) != key.hash_type:
            return None
        isk = b""
        if key.range_name is not None:
            range_value = item.get(key.range_name)
            if range_value is None or value_type(range_value) != key.range_type:
                return None
            isk = encode_key_value(range_value)
            if (not isk and key.range_type != "N") or len(isk) > MAX_RANGE_KEY_BYTES:
                return None
        ipk = encode_key_value(hash_value)
        if (not ipk and key.hash_type != "N") or len(ipk) > MAX_HASH_KEY_BYTES:
            return None
    pk, sk = item_key(table, item)
    projected = index.projected
    body = item if projected is None else {k: v for k, v in item.items() if k in projected}
    return ipk, isk, pk, sk, item_size(body), body


def _has_content(value: AttributeValue) -> bool:
    """An index key value an index can hold (S and B keys may not be empty)."""
    ((kind, raw),) = value.items()
    return kind == "N" or len(raw) > 0


def _joined(attributes: tuple[tuple[str, str], ...], item: Item, limit: int) -> bytes | None:
    """A multi-attribute index key part of an item already checked to have it, or ``None``
    when one attribute's value passes ``limit`` bytes (an old item an index cannot hold)."""
    parts = [encode_key_value(item[name]) for name, _ in attributes]
    if any(len(part) > limit for part in parts):
        return None
    if len(parts) == 1:
        return parts[0]
    return b"".join(composite_part(part) for part in parts)


@dataclass(frozen=True, slots=True)
class IndexEntries:
    """One index of one table, as the storage's index reads take it (``storage.IndexView``)."""

    table_id: int
    table: KeySchema
    index: IndexSchema

    @property
    def id(self) -> int:
        return self.index.id

    def entry(self, item: Item) -> tuple[bytes, bytes, bytes, bytes, int, Item] | None:
        return index_entry(self.table, self.index, item)
