"""JSON that keeps the standard library values plain JSON would change.

``Decimal``, ``datetime``, ``date``, ``time``, ``UUID``, ``set``/``frozenset`` and ``bytes`` inside a result.

Plain JSON would replay ``Decimal("10.50")`` as the float ``10.5`` and a ``datetime`` as a
string: another type than the first call returned, silently. A result holding such values is
stored in this form instead, so a replay gives back the very same types (boto3's resource API,
for one, returns every number as a ``Decimal``).

Each such value becomes a one-member object whose name is a NUL character and a tag
(``{"\\u0000decimal": "10.50"}``). A name of the caller's own that starts with a NUL gets a
second NUL in front (and loses it on the way back), so no caller data can be taken for a tag.
Dataclasses, pydantic models and enums are stored as their fields or value, as in plain JSON
(replay them into their type with ``result_type``).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import json
import uuid
from collections.abc import Callable
from typing import Any

_MARK = "\x00"
_ESCAPED = "\x00\x00"

# type -> (tag, to JSON); the first matching entry wins (datetime before date: a subclass).
_ENCODERS: tuple[tuple[type, str, Callable[[Any], Any]], ...] = (
    (decimal.Decimal, "decimal", str),
    (_dt.datetime, "datetime", lambda v: v.isoformat()),
    (_dt.date, "date", lambda v: v.isoformat()),
    (_dt.time, "time", lambda v: v.isoformat()),
    (uuid.UUID, "uuid", str),
    (bytes, "bytes", lambda v: base64.b64encode(v).decode("ascii")),
    (bytearray, "bytes", lambda v: base64.b64encode(bytes(v)).decode("ascii")),
)
_DECODERS: dict[str, Callable[[Any], Any]] = {
    "decimal": decimal.Decimal,
    "datetime": _dt.datetime.fromisoformat,
    "date": _dt.date.fromisoformat,
    "time": _dt.time.fromisoformat,
    "uuid": uuid.UUID,
    "bytes": base64.b64decode,
    "set": set,
    "frozenset": frozenset,
}
LOSSY = (*(t for t, _, _ in _ENCODERS), set, frozenset)
"""The types plain JSON would store as something else."""

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _key(name: Any) -> Any:
    return _MARK + name if isinstance(name, str) and name.startswith(_MARK) else name


def tagged(value: Any) -> Any:
    """``value`` as plain JSON types, with the lossy values tagged."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if isinstance(value, dict):
        return {_key(k): tagged(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [tagged(v) for v in value]
    if isinstance(value, (set, frozenset)):
        tag = "frozenset" if isinstance(value, frozenset) else "set"
        return {_MARK + tag: [tagged(v) for v in value]}
    for base, tag, encode in _ENCODERS:
        if isinstance(value, base):
            return {_MARK + tag: encode(value)}
    if isinstance(value, (str, int, float)):  # subclasses (IntEnum, StrEnum...) as JSON does
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: tagged(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)  # pydantic v2
    if callable(dump):
        return tagged(dump(mode="python"))
    if isinstance(value, enum.Enum):
        return tagged(value.value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> str:
    """The typed JSON text of ``value``."""
    return str(_dumps(tagged(value)))


def _untag(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        ((name, inner),) = obj.items()
        if name.startswith(_MARK) and not name.startswith(_ESCAPED):
            decode = _DECODERS.get(name[1:])
            if decode is None:
                raise ValueError(f"unknown typed JSON tag {name[1:]!r}")
            return decode(inner)
    if any(name.startswith(_ESCAPED) for name in obj):
        return {name[1:] if name.startswith(_ESCAPED) else name: v for name, v in obj.items()}
    return obj


def loads(text: str | bytes) -> Any:
    """The value :func:`dumps` stored, with its types."""
    return json.loads(text, object_hook=_untag)
