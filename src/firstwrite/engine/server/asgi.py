"""ASGI types and the ``application/problem+json`` answers, shared by every app the server runs.

Every error the server answers outside DynamoDB's own protocol (the admin API, the session, an
unknown path, a refused connection) is an RFC 9457 problem: ``{"type", "title", "status",
"detail"}`` with the content type ``application/problem+json``.
"""

from __future__ import annotations

import json
import logging
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
    "problem_handlers",
    "respond",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

log = logging.getLogger("firstwrite.engine.server.app")

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


# --- Starlette's errors as problems (for the apps the server composes with Starlette) ---------


def problem_handlers() -> dict[Any, Callable[..., Any]]:
    """Starlette ``exception_handlers`` answering every error as a problem."""
    from starlette.exceptions import HTTPException

    return {Problem: _problem_response, HTTPException: _http_problem, Exception: _internal_problem}


def _problem_response(request: Any, exc: Exception) -> Any:
    from starlette.responses import Response

    assert isinstance(exc, Problem)
    status, headers, body = exc.encode()
    response = Response(body, status)
    response.raw_headers = headers
    return response


def _http_problem(request: Any, exc: Exception) -> Any:
    import http

    from starlette.exceptions import HTTPException

    assert isinstance(exc, HTTPException)
    method, path = request.method, request.scope["path"]
    headers = dict(exc.headers or {})
    if "Allow" in headers:  # Starlette lists a route's methods in set order
        headers["Allow"] = ", ".join(sorted(headers["Allow"].split(", ")))
    if exc.status_code == 404:
        detail = f"No route for {method} {path}"
    elif exc.status_code == 405:
        detail = f"{method} {path} is not supported; use {headers.get('Allow', '')}"
    else:
        detail = exc.detail
    title = http.HTTPStatus(exc.status_code).phrase
    return _problem_response(
        request, Problem(exc.status_code, title, detail, headers=headers.items())
    )


def _internal_problem(request: Any, exc: Exception) -> Any:
    log.error("admin request %s %s failed", request.method, request.scope["path"], exc_info=exc)
    problem = Problem(500, "Internal Server Error", "the server failed on this request")
    return _problem_response(request, problem)
