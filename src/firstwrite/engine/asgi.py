"""ASGI types and the ``application/problem+json`` answers, shared by every app the server runs.

Every error the server answers outside DynamoDB's own protocol (the admin API, the session, an
unknown path, a refused connection) is an RFC 9457 problem: ``{"type", "title", "status",
"detail"}`` with the content type ``application/problem+json``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

__all__ = [
    "PROBLEM_TYPE",
    "ASGIApp",
    "Headers",
    "Message",
    "Problem",
    "Receive",
    "Scope",
    "Send",
    "header",
    "problem",
    "problem_bytes",
    "respond",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

PROBLEM_TYPE = b"application/problem+json"


class Problem(Exception):
    """An HTTP error answered as a problem: status, short title, detail, extra headers."""

    def __init__(
        self, status: int, title: str, detail: str, *, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.headers = list(headers)

    def body(self) -> dict[str, Any]:
        return {
            "type": "about:blank",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }

    def encode(self) -> tuple[int, Headers, bytes]:
        """``(status, headers, body)`` ready for :func:`respond`."""
        body = json.dumps(self.body()).encode()
        headers = [(b"content-type", PROBLEM_TYPE), (b"content-length", b"%d" % len(body))]
        headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers]
        return self.status, headers, body


def problem(status: int, title: str, detail: str, **headers: str) -> tuple[int, Headers, bytes]:
    """A problem's ``(status, headers, body)``; ``headers`` are extra ones (``allow=...``)."""
    return Problem(status, title, detail, headers=headers.items()).encode()


def problem_bytes(status: int, title: str, detail: str, *, close: bool = False) -> bytes:
    """A whole HTTP/1.1 response carrying a problem, for answers written below ASGI."""
    import http

    _, headers, body = problem(status, title, detail)
    if close:
        headers.append((b"connection", b"close"))
    lines = [b"HTTP/1.1 %d %s" % (status, http.HTTPStatus(status).phrase.encode())]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case) in ``scope``, or None."""
    for key, value in scope["headers"]:
        if key == name:
            return value  # type: ignore[no-any-return]
    return None


async def respond(send: Send, status: int, headers: Headers, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
