"""Turning items and Key parameters into storage keys, by a table's key schema."""

from __future__ import annotations

from typing import Any

from .errors import invalid_parameters, validation
from .keys import KeySchema, encode_key_value
from .values import AttributeValue, Item, parse_value, value_type

MAX_HASH_KEY_BYTES = 2048
MAX_RANGE_KEY_BYTES = 1024
_KEY_MISMATCH = "The provided key element does not match the schema"


def _encoded(name: str, value: AttributeValue, *, is_hash: bool) -> bytes:
    ((kind, raw),) = value.items()
    if kind in ("S", "B") and len(raw) == 0:
        raise validation(
            "One or more parameter values are not valid. The AttributeValue for a key attribute "
            f"cannot contain an empty string value. Key: {name}"
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
    if value_type(parsed[schema.hash_name]) != schema.hash_type:
        raise validation(_KEY_MISMATCH)
    if schema.range_name is not None and value_type(parsed[schema.range_name]) != schema.range_type:
        raise validation(_KEY_MISMATCH)
    pk = _encoded(schema.hash_name, parsed[schema.hash_name], is_hash=True)
    sk = b""
    if schema.range_name is not None:
        sk = _encoded(schema.range_name, parsed[schema.range_name], is_hash=False)
    return parsed, pk, sk


def key_of(schema: KeySchema, item: Item) -> Item:
    """The key attributes of a stored item (LastEvaluatedKey, stream Keys)."""
    key = {schema.hash_name: item[schema.hash_name]}
    if schema.range_name is not None:
        key[schema.range_name] = item[schema.range_name]
    return key
