"""What the console's pages write about items and records: DynamoDB JSON, keys, time in words.

Records themselves are decoded by the layer's :mod:`firstwrite.idempotency.record_view`, as
``firstwrite keys`` decodes them; anything else in a table is shown as a plain item.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

Item = Mapping[str, Any]


def wire_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` (items, requests, responses) as DynamoDB JSON text: bytes become base64."""
    return json.dumps(value, indent=indent, default=_wire_default, ensure_ascii=False)


def pretty(value: Any, width: int = 72, _indent: int = 0) -> str:
    """Indented DynamoDB JSON that keeps short values on one line: an AttributeValue such as
    ``{"S": "abc"}``, a small key or item, stays whole instead of taking four lines."""
    flat = wire_json(value)
    if len(flat) + 2 * _indent <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad, inner = "  " * _indent, "  " * (_indent + 1)
    if isinstance(value, dict):
        lines = [
            f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {pretty(v, width, _indent + 1)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(lines) + f"\n{pad}}}"
    lines = [f"{inner}{pretty(v, width, _indent + 1)}" for v in value]
    return "[\n" + ",\n".join(lines) + f"\n{pad}]"


def _wire_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def key_text(item: Item, key_names: Sequence[str]) -> str:
    """The item's key as one line: ``pk`` alone, or ``pk | sk``."""
    parts = []
    for name in key_names:
        value = item.get(name)
        if isinstance(value, Mapping) and len(value) == 1:
            ((kind, raw),) = value.items()
            parts.append(wire_json(raw).strip('"') if kind != "S" else str(raw))
        else:
            parts.append("?")
    return " | ".join(parts)


# --- time, in words ---------------------------------------------------------------------------


def iso(at: float) -> str:
    """UTC ISO 8601 with seconds, as ``<time datetime>`` wants it."""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(seconds: float) -> str:
    """A duration in the two largest units: ``42 s``, ``3 min 5 s``, ``23 h 59 min``, ``2 d 4 h``."""
    total = int(abs(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    units = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    while len(units) > 1 and units[0][0] == 0:
        units.pop(0)
    lead = units[:2]
    if len(lead) == 2 and lead[1][0] == 0:
        lead = lead[:1]
    return " ".join(f"{n} {u}" for n, u in lead)


def until(at: float, now: float) -> str:
    """``in 42 s`` or ``42 s ago`` (``now`` for less than a second either way)."""
    delta = at - now
    if abs(delta) < 1:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def relative(at: float, t0: float) -> str:
    """``t0 + 31 s`` / ``t0 - 5 s``: a scenario's times, counted from its start."""
    delta = at - t0
    if abs(delta) < 0.5:
        return "t0"
    sign = "+" if delta > 0 else "-"
    return f"t0 {sign} {span(delta)}"
