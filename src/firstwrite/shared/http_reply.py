"""The stored form of an HTTP response: one line of JSON metadata, a newline, the body bytes.

The middleware (:mod:`firstwrite.http.core`) writes and replays it; the CLI and the console
decode it to show a stored reply. The metadata holds the status, the kept headers and, when the
application sent one that differs from the standard phrase, the reason phrase of its status
line (``201 CREATED`` from Flask), so that a replay answers the same status line, and
``"o": 1`` when the body was deliberately not kept (``replay="status-only"``).
A value that is not in this form raises :class:`ValueError` from :func:`decode`.
"""

from __future__ import annotations

import http
import json
from dataclasses import dataclass

_META = json.JSONEncoder(separators=(",", ":"))  # json.dumps() makes one per call otherwise


@dataclass(frozen=True, slots=True)
class StoredReply:
    """A stored response: status, reason phrase (``None``: the standard one), headers, body."""

    status: int
    reason: str | None
    headers: list[tuple[str, str]]
    body: bytes
    body_omitted: bool = False  # replay="status-only": the body was never kept

    @property
    def status_line(self) -> str:
        """``201 Created``: the reason the application sent, else the standard phrase."""
        return f"{self.status} {self.reason or standard_phrase(self.status)}"

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (any case), or ``None``."""
        wanted = name.lower()
        return next((v for n, v in self.headers if n.lower() == wanted), None)


def standard_phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def encode(status: int, headers: list[list[str]], body: bytes, reason: str | None = None) -> bytes:
    """The stored form; ``reason`` is kept only when it is not the standard phrase."""
    return head(status, headers, reason) + body


def head(
    status: int, headers: list[list[str]], reason: str | None = None, *, body_omitted: bool = False
) -> bytes:
    """The stored form's metadata line and its newline: what precedes the body."""
    meta: dict[str, object] = {"v": 1, "s": status, "h": headers}
    if reason is not None and reason != standard_phrase(status):
        meta["r"] = reason
    if body_omitted:
        meta["o"] = 1
    return _META.encode(meta).encode("utf-8") + b"\n"


def decode(raw: bytes) -> StoredReply:
    """The reply in ``raw``; :class:`ValueError` saying why when it is not one."""
    meta_text, sep, body = raw.partition(b"\n")
    try:
        meta = json.loads(meta_text)
        if not isinstance(meta, dict) or meta.get("v") != 1:
            raise ValueError("no version 1 metadata line")
        status = int(meta["s"])
        headers = [(str(n), str(v)) for n, v in meta["h"]]
        reason = meta.get("r")
        omitted = meta.get("o") == 1
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"stored HTTP response is corrupt: {exc}") from exc
    if not sep:
        raise ValueError("stored HTTP response is corrupt: no body separator")
    reason = reason if isinstance(reason, str) else None
    return StoredReply(status, reason, headers, body, omitted)
