"""Result serialisation.

JSON types, dataclasses, pydantic models, raw bytes, and the values JSON cannot keep (``Decimal``, ``datetime``, ``date``, ``time``, ``UUID``, sets, nested bytes).

Stored forms (the ``result`` attribute):

* ``S``: the JSON text, readable in any console;
* ``B`` with a one-byte tag: ``0x01`` zlib-compressed JSON, ``0x02`` raw bytes, ``0x03`` zlib-
  compressed raw bytes, ``0x04`` typed JSON (:mod:`.typed_json`: a result holding values plain
  JSON would replay as another type), ``0x05`` zlib-compressed typed JSON. Compression is used
  above ``compress_threshold`` bytes and only when it actually shrinks the value;
* ``B`` with tag ``0x06`` (sealed: an encrypted inner form) or ``0x07`` (a pointer to a result
  store's object), made and undone by :mod:`.result_placement`; ``0x08`` (JSON text as UTF-8)
  occurs only inside those.

Replaying into a type (a dataclass, a pydantic model, ``list[Model]``...) uses pydantic's
``TypeAdapter`` when pydantic is installed, else a small dataclass builder.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import json
import typing
import uuid
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from . import typed_json
from .errors import SerializationError
from .spooled_results import SpooledResult

_ZJSON = 1
_RAW = 2
_ZRAW = 3
_TJSON = 4
_ZTJSON = 5
SEALED = 6
POINTER = 7
JSON_BYTES = 8
_FORMATS = {
    _ZJSON: "JSON, zlib-compressed",
    _RAW: "bytes",
    _ZRAW: "bytes, zlib-compressed",
    _TJSON: "typed JSON",
    _ZTJSON: "typed JSON, zlib-compressed",
    SEALED: "sealed (encrypted)",
    POINTER: "in a result store",
    JSON_BYTES: "JSON",
}

_dumps = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=lambda o: _default(o)
).encode


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)  # pydantic v2
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def to_json(value: Any) -> str:
    """Plain JSON (lossy: a ``Decimal`` becomes a number, a ``datetime`` a string); for
    stored failures, which are replayed as messages."""
    try:
        return _dumps(value)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"cannot store the result: {exc}") from exc


class _Lossy(Exception):
    """Plain JSON would change a value's type: store the result as typed JSON."""


def _result_default(value: Any) -> Any:
    if isinstance(value, typed_json.LOSSY):
        raise _Lossy
    return _default(value)


def _result_encoder() -> Callable[[Any], str]:
    """``JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False,
    default=_result_default).encode`` with its C encoder built once: ``encode`` builds one per
    call (and a Python closure), once per first request. That constructor is the stdlib's
    private ``c_make_encoder``, used only if present and giving the very same text. Without the
    per-call circularity check, a circular result ends in ``RecursionError``, which
    :func:`encode` reports as it reports the stdlib's "Circular reference detected"."""
    stdlib: Callable[[Any], str] = json.JSONEncoder(
        separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_result_default
    ).encode
    try:
        from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]

        # markers (none: no circularity check), default, encoder, indent, key and item
        # separators, sort_keys, skipkeys, allow_nan
        make = c_make_encoder(
            None, _result_default, encode_basestring, None, ":", ",", False, False, False
        )
    except (ImportError, TypeError):  # pragma: no cover - another Python's json
        return stdlib

    def encode(value: Any) -> str:
        return "".join(make(value, 0))

    sample = {
        "b": [1, "é\n", None, True, (2, -3), 1.5],
        "a": {"": "x"},
        "c": 10**40,
        "d": {2: 3.25},
    }
    return encode if encode(sample) == stdlib(sample) else stdlib


_result_dumps = _result_encoder()


def encode(value: Any, *, threshold: int = 4096, level: int = 6) -> dict[str, Any]:
    """The DynamoDB AttributeValue that stores ``value``. A
    :class:`~.spooled_results.SpooledResult` is raw bytes left in its file (``{"B":`` the
    result with its tag ``}``), for :mod:`.result_placement` to store from there."""
    if isinstance(value, SpooledResult):
        return {"B": value.with_head(bytes((_RAW,)))}
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) > threshold:
            packed = zlib.compress(raw, level)
            if len(packed) < len(raw):
                return {"B": bytes((_ZRAW,)) + packed}
        return {"B": bytes((_RAW,)) + raw}
    try:
        text = _result_dumps(value)
    except _Lossy:
        return _encode_typed(value, threshold, level)
    except (TypeError, ValueError, RecursionError) as exc:
        raise SerializationError(f"cannot store the result: {exc}") from exc
    if len(text) > threshold:  # characters <= bytes: a cheap first test
        data = text.encode("utf-8")
        packed = zlib.compress(data, level)
        if len(packed) + 1 < len(data):
            return {"B": bytes((_ZJSON,)) + packed}
    return {"S": text}


def _encode_typed(value: Any, threshold: int, level: int) -> dict[str, Any]:
    try:
        data = typed_json.dumps(value).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"cannot store the result: {exc}") from exc
    if len(data) > threshold:
        packed = zlib.compress(data, level)
        if len(packed) < len(data):
            return {"B": bytes((_ZTJSON,)) + packed}
    return {"B": bytes((_TJSON,)) + data}


_raw_decode = json.JSONDecoder().raw_decode


def _loads(text: str) -> Any:
    """``json.loads`` of the compact JSON :func:`encode` stores (half its cost: no whitespace
    scan, no bytes detection); anything after the value is corruption, as for json.loads."""
    value, end = _raw_decode(text)
    if end != len(text):
        raise ValueError(f"extra data at character {end}")
    return value


TEXT_PREFIX = "b64:"
"""A binary stored value written as text (:func:`as_text`): never the start of JSON."""


def as_text(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` (from :func:`encode`) as a string AttributeValue: a ``B`` value becomes
    ``b64:`` + the base64 of its bytes (tag included), which :func:`decode` reads back. For
    layouts whose result attribute must stay a string (seed 001's ``resultId``)."""
    if "B" not in value:
        return value
    return {"S": TEXT_PREFIX + base64.b64encode(value["B"]).decode("ascii")}


def from_text(raw: str | bytes | None) -> str | bytes | None:
    """``raw`` with an :func:`as_text` form turned back into its bytes (others as they are)."""
    if isinstance(raw, str) and raw.startswith(TEXT_PREFIX):
        try:
            return base64.b64decode(raw[len(TEXT_PREFIX) :], validate=True)
        except ValueError as exc:
            raise SerializationError(f"stored result is corrupt: {exc}") from exc
    return raw


def decode(raw: str | bytes | None, result_type: Any = None) -> Any:
    """The value stored by :func:`encode` (or :func:`as_text`), rebuilt as ``result_type``
    when one is given."""
    raw = from_text(raw)
    if raw is None:
        return None
    try:
        if isinstance(raw, str):
            value: Any = _loads(raw)
        else:
            tag, body = raw[0], raw[1:]
            if tag == _RAW:
                return bytes(body)
            if tag == _ZRAW:
                return zlib.decompress(body)
            if tag == _ZJSON:
                value = json.loads(zlib.decompress(body))
            elif tag == _TJSON:
                value = typed_json.loads(body)
            elif tag == _ZTJSON:
                value = typed_json.loads(zlib.decompress(body))
            elif tag == JSON_BYTES:
                value = _loads(body.decode("utf-8"))
            elif tag in (SEALED, POINTER):
                where = "sealed (encrypted)" if tag == SEALED else "kept in a result store"
                raise SerializationError(
                    f"the stored result is {where}: configure the result_cipher and "
                    "result_store that stored it (docs/results.md)"
                )
            else:
                raise SerializationError(f"unknown stored result format {tag}")
    except (ValueError, zlib.error, IndexError) as exc:
        raise SerializationError(f"stored result is corrupt: {exc}") from exc
    if result_type is None or result_type is Any or json_native(result_type):
        return value
    return rebuild(result_type, value)


def stored_format(raw: str | bytes) -> str:
    """The stored form of a ``result`` value, in words (``"JSON"``, ``"bytes, zlib-compressed"``
    ...), ``"unknown"`` for a tag :func:`decode` does not know."""
    if isinstance(raw, str) and raw.startswith(TEXT_PREFIX):
        try:
            inner = base64.b64decode(raw[len(TEXT_PREFIX) :], validate=True)
        except ValueError:
            return "unknown"
        return stored_format(inner) + ", as base64 text" if inner else "unknown"
    if isinstance(raw, str):
        return "JSON"
    return _FORMATS.get(raw[0], "unknown") if raw else "unknown"


# Types json.loads already produces as they were returned (JSON keeps 1 and 1.0 apart).
_NATIVE = (str, int, float, bool, type(None), Any, object)


def json_native(tp: Any) -> bool:
    """Whether decoded JSON already is a valid ``tp`` (``dict[str, Any]``, ``list[str]``...),
    so rebuilding it would only copy it."""
    try:
        return _native(tp)
    except TypeError:  # unhashable annotation
        return False


@lru_cache(maxsize=128)
def _native(tp: Any) -> bool:
    if tp in _NATIVE or tp is dict or tp is list:
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and len(args) == 1:
        return _native(args[0])
    if origin is dict and len(args) == 2:
        return args[0] is str and _native(args[1])
    return False


@lru_cache(maxsize=128)
def _adapter(tp: Any) -> Any:
    try:
        from pydantic import TypeAdapter
    except ImportError:  # pragma: no cover - pydantic is an optional extra
        return None
    return TypeAdapter(tp)


def rebuild(tp: Any, value: Any) -> Any:
    """Turn plain JSON ``value`` back into ``tp`` (dataclass, pydantic model, containers)."""
    try:
        adapter = _adapter(tp)
    except TypeError:  # unhashable annotation
        adapter = None
    if adapter is not None:
        return adapter.validate_python(value)
    return _build(tp, value)  # pragma: no cover - exercised only without pydantic


def _build(tp: Any, value: Any) -> Any:  # pragma: no cover - fallback without pydantic
    if value is None:
        return None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        return tp(**{k: _build(hints.get(k, Any), v) for k, v in value.items()})
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, tuple, set, frozenset) and args:
        return origin(_build(args[0], v) for v in value)
    if origin is dict and len(args) == 2:
        return {k: _build(args[1], v) for k, v in value.items()}
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for arg in args:
            if arg is not type(None):
                return _build(arg, value)
    return value


def error_info(exc: BaseException | str, data: Any = None) -> str:
    """The JSON stored in a FAILED record's ``error`` attribute."""
    if isinstance(exc, BaseException):
        info = {"type": type(exc).__name__, "message": str(exc)}
    else:
        info = {"type": "Error", "message": exc}
    if data is not None:
        info["data"] = data
    return to_json(info)


def read_error(text: str | None) -> tuple[str, str, Any]:
    if not text:
        return "Error", "", None
    try:
        info = json.loads(text)
        return str(info.get("type", "Error")), str(info.get("message", "")), info.get("data")
    except ValueError:
        return "Error", text, None


def value_size(value: dict[str, Any]) -> int:
    """DynamoDB's size of one AttributeValue (numbers conservatively: 1 byte per digit + 1)."""
    if "S" in value:
        return len(value["S"].encode("utf-8"))
    if "B" in value:
        return len(value["B"])
    if "N" in value:
        return len(value["N"]) + 1
    if "BOOL" in value or "NULL" in value:
        return 1
    if "M" in value:
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in value["M"].items())
    if "L" in value:
        return 3 + sum(value_size(v) + 1 for v in value["L"])
    return sum(len(str(v)) for v in value.values())


def item_size(item: dict[str, dict[str, Any]]) -> int:
    """DynamoDB's size of an item: attribute-name UTF-8 bytes plus value sizes."""
    return sum(len(k.encode("utf-8")) + value_size(v) for k, v in item.items())
