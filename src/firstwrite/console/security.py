"""The console's own guard: its hosts, same-origin JSON state changes, the headers of its pages.

The console protects itself rather than trusting the server it is mounted in (which may check
nothing), with the project's one Host and Origin policy
(:class:`firstwrite.engine.server.origins.OriginPolicy`):

* every request's ``Host`` must be a loopback name or one the console was told to answer
  (``create_console(..., allowed_hosts=[...])``): else 403, so a page of another site re-pointed
  at this address (DNS rebinding) reads and changes nothing;
* a request that is not GET/HEAD must be ``application/json`` (a plain ``<form>`` can only send
  ``application/x-www-form-urlencoded``, ``multipart/form-data`` or ``text/plain``): else 415;
* its ``Sec-Fetch-Site``, when the browser sends one, must be ``same-origin``: else 403;
* its ``Origin``, when present, must be the console's own origin (its checked ``Host``): else 403.

Every response gets a Content-Security-Policy that allows only the console's own scripts,
styles and connections (no inline script, no framing), ``nosniff`` and a same-origin referrer.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from firstwrite.engine.server.origins import OriginPolicy

SAFE_METHODS = frozenset({"GET", "HEAD"})
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def own_origin(scope: Scope) -> str | None:
    """``scheme://host[:port]`` of this request, from its Host header."""
    host = _header(scope, b"host")
    if not host:
        return None
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    return f"{scheme}://{host}".lower()


def refusal(scope: Scope) -> tuple[int, str, str] | None:
    """Why a state-changing request is refused, as (status, title, detail), or ``None``."""
    if scope["method"] in SAFE_METHODS:
        return None
    content_type = (_header(scope, b"content-type") or "").partition(";")[0].strip().lower()
    if content_type != "application/json":
        return (
            415,
            "Unsupported Media Type",
            "the console changes state only through JSON requests "
            "(Content-Type: application/json) from its own pages",
        )
    site = _header(scope, b"sec-fetch-site")
    if site is not None and site.lower() not in ("same-origin", "none"):
        return (
            403,
            "Forbidden",
            f"a {site} request may not change state; use the console's own pages",
        )
    origin = _header(scope, b"origin")
    if origin is not None:
        parts = urlsplit(origin)
        given = f"{parts.scheme}://{parts.netloc}".lower()
        if origin == "null" or given != own_origin(scope):
            return 403, "Forbidden", f"requests from origin {origin} may not change state here"
    return None


def too_large(limit: int) -> tuple[int, str, str]:
    return (
        413,
        "Content Too Large",
        f"the request is larger than the console accepts ({limit} bytes)",
    )


class SameOriginJSON:
    """Pure ASGI middleware: refuse foreign hosts (``policy``; default: loopback names only),
    cross-site or non-JSON state changes and bodies over the limit; add the headers."""

    def __init__(
        self, app: ASGIApp, max_body_bytes: int, policy: OriginPolicy | None = None
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.policy = policy if policy is not None else OriginPolicy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self._foreign_host(scope) or refusal(scope) or self._too_large(scope)
        if refused is not None:
            status, title, detail = refused
            body = json.dumps(
                {"type": "about:blank", "title": title, "status": status, "detail": detail}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/problem+json"),
                        (b"content-length", str(len(body)).encode()),
                        *HEADERS,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return

        scope["firstwrite.console.max_body"] = self.max_body_bytes

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {bytes(k).lower() for k, _ in message.get("headers", ())}
                message["headers"] = [
                    *message.get("headers", ()),
                    *(h for h in HEADERS if h[0] not in present),
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _foreign_host(self, scope: Scope) -> tuple[int, str, str] | None:
        host = _header(scope, b"host")
        raw = None if host is None else host.encode("latin-1")
        if self.policy.hosts.allows(raw):
            return None
        problem = self.policy.hosts.refusal(raw)
        return problem.status, problem.title, problem.detail

    def _too_large(self, scope: Scope) -> tuple[int, str, str] | None:
        """Refused at once when the declared length is over the limit (a chunked body is
        counted as it is read: see :func:`.api._object`)."""
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            return too_large(self.max_body_bytes)
        return None
