"""CORS on the DynamoDB endpoint: the origins a browser app may call it from, DynamoDB's headers.

DynamoDB answers every origin, and a request carrying an ``Origin`` gets
``Access-Control-Allow-Origin: *`` and ``Access-Control-Expose-Headers:
x-amzn-RequestId,x-amzn-ErrorType,x-amzn-ErrorMessage,Date``; a preflight (``OPTIONS``) also
gets the method and headers it asked for, echoed as allowed, and ``Access-Control-Max-Age:
172800``, with an empty 200 body; a request without ``Origin`` gets none of them (sources in
docs/engine.md). There, a page still needs a signature: its caller's AWS credentials.

A local engine without ``--require-auth`` takes any signature, so answering every origin would
let any web page the developer opens read and wipe the tables. :class:`Cors` answers only the
origins the server is told to (``allowed_origins``, ``--allow-origin``; ``"*"``: every origin,
DynamoDB's policy, meant for a server with ``--require-auth``); by default none, as before.
A request from another origin is refused (403, ``application/problem+json``, naming the
option), its preflight included, so the browser never sends the call. The admin API and the
mounted apps never answer CORS at all: they stay same-origin (:mod:`.auth`), whatever this allows.
The ``Host`` policy (:mod:`.origins`) applies before any of this.
"""

from __future__ import annotations

from collections.abc import Iterable

from .asgi import Headers, Message, Problem, Scope, Send, header

__all__ = ["EXPOSED_HEADERS", "MAX_AGE_SECONDS", "Cors"]

EXPOSED_HEADERS = b"x-amzn-RequestId,x-amzn-ErrorType,x-amzn-ErrorMessage,Date"
# What AWS's JSON front end answers a preflight with (two days; Chromium caps it at two hours).
MAX_AGE_SECONDS = 172800


def _normal(origin: str | bytes) -> str:
    text = origin.decode("latin-1") if isinstance(origin, bytes) else origin
    return text.strip().rstrip("/").lower()


class Cors:
    """The origins a browser app may call the DynamoDB endpoint from (``"*"``: any), and the
    headers answering them (module docstring)."""

    def __init__(self, allowed_origins: Iterable[str] = ()) -> None:
        allowed = {_normal(o) for o in allowed_origins}
        self.any = "*" in allowed
        self.origins = frozenset(allowed - {"*"})

    def allows(self, origin: bytes) -> bool:
        return self.any or _normal(origin) in self.origins

    def refusal(self, origin: bytes) -> Problem:
        shown = origin.decode("latin-1")
        return Problem(
            403,
            "Forbidden",
            f"Origin {shown!r} may not call this DynamoDB endpoint from a browser: start the "
            f"server with --allow-origin {shown} (serve(..., allowed_origins=[...])), or '*' for "
            "every origin as DynamoDB answers (with --require-auth, so that a page still needs "
            "credentials)",
        )

    def headers(self, scope: Scope, *, preflight: bool) -> Headers:
        """The CORS headers of the answer to an allowed request (``preflight``: an OPTIONS)."""
        out: Headers = [
            (b"access-control-allow-origin", b"*"),
            (b"access-control-expose-headers", EXPOSED_HEADERS),
        ]
        if preflight:
            for asked, allowed in (
                (b"access-control-request-method", b"access-control-allow-methods"),
                (b"access-control-request-headers", b"access-control-allow-headers"),
            ):
                value = header(scope, asked)
                if value:
                    out.append((allowed, value))
            if header(scope, b"access-control-request-private-network") == b"true":
                # Chromium's Private Network Access: a public page calling a private address.
                out.append((b"access-control-allow-private-network", b"true"))
            out.append((b"access-control-max-age", b"%d" % MAX_AGE_SECONDS))
        return out

    def sender(self, scope: Scope, send: Send) -> Send:
        """``send`` adding the CORS headers of an allowed, non-preflight request to the
        response's start (every answer: the engine's, its errors, the server's problems)."""
        extra = self.headers(scope, preflight=False)

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        return send_with_cors
