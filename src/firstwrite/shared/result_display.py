"""How a decoded stored result is shown: one line for tables, a few lines for one record.

One function each for the CLI (``firstwrite keys``) and the console, so both say the same. A
stored HTTP reply (:mod:`.http_reply`, what the middleware stores) shows its status line, the
stored headers and its body: JSON pretty-printed, text as text, anything else as a byte count,
cut to a limit with the full size said. Other results show as JSON (typed JSON's values as
text) or, for bytes, their size and first bytes. Pure: no I/O, never raises on odd values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import http_reply

BODY_CHARS = 2000  # of a pretty-printed body in the detailed view


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Shown:
    """A result for display: ``line`` (whole, one line) and ``detail`` (the lines of the
    detailed view, a body pretty-printed and cut to ``BODY_CHARS``)."""

    kind: str  # "HTTP reply", "bytes" or "value"
    line: str
    detail: tuple[str, ...]

    def summary(self, limit: int) -> str:
        return shorten(self.line, limit)


def show(value: Any) -> Shown:
    """``value``, a result as the layer's
    :func:`~firstwrite.idempotency.serialization.decode` returns it, for display."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            reply = http_reply.decode(raw)
        except ValueError:
            return _bytes(raw)
        return _reply(reply)
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    pretty = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return Shown("value", text, tuple(_cut(pretty, len(pretty.encode())).splitlines()))


def _bytes(raw: bytes) -> Shown:
    line = f"{len(raw)} bytes: {raw[:16].hex()}" + ("…" if len(raw) > 16 else "")
    return Shown("bytes", line, (line,))


def _reply(reply: http_reply.StoredReply) -> Shown:
    body = reply.body
    media = (reply.header("content-type") or "").split(";", 1)[0].strip().lower()
    compact, pretty = _body(body, media)
    line = f"HTTP {reply.status_line}"
    if media:
        line += f", {media}"
    line += f", {_size(len(body))} body" + (f": {compact}" if compact else "")
    detail = [f"HTTP {reply.status_line}"]
    detail += [f"{name}: {value}" for name, value in reply.headers]
    detail.append(
        f"body: {_size(len(body))}" + ("" if pretty is not None or not compact else f": {compact}")
    )
    if pretty is not None:
        detail += _cut(pretty, len(body)).splitlines()
    return Shown("HTTP reply", line, tuple(detail))


def _body(body: bytes, media: str) -> tuple[str, str | None]:
    """The body on one line and pretty (``None``: not text)."""
    if not body:
        return "", None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"{body[:16].hex()}" + ("…" if len(body) > 16 else ""), None
    if media == "application/json" or media.endswith("+json") or text[:1] in "{[":
        try:
            document = json.loads(text)
        except ValueError:
            pass
        else:
            compact = json.dumps(document, ensure_ascii=False, separators=(", ", ": "))
            return compact, json.dumps(document, ensure_ascii=False, indent=2)
    return " ".join(text.split()), text


def _cut(text: str, size: int) -> str:
    if len(text) <= BODY_CHARS:
        return text
    return text[:BODY_CHARS] + f"\n… (cut; {_size(size)} in all)"


def _size(count: int) -> str:
    return f"{count:,} B"
