"""The request as the middleware's callables see it (principal, fingerprint).

One view over an ASGI scope or a WSGI environ, with the raw mapping at hand for anything framework-specific
(``request.raw["user"]`` set by Starlette's AuthenticationMiddleware, ``REMOTE_USER``...)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["HttpRequest"]


class HttpRequest:
    """``method`` (upper case), ``path`` (decoded, no query), ``query`` (the raw query string),
    ``headers`` (lower-case names; repeated headers joined with ``", "``), ``raw`` (the ASGI
    scope or the WSGI environ)."""

    __slots__ = ("_headers", "_pairs", "method", "path", "query", "raw")

    def __init__(
        self,
        method: str,
        path: str,
        query: str,
        raw: Mapping[str, Any],
        pairs: Iterable[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.raw = raw
        self._pairs = pairs
        self._headers = headers

    @property
    def headers(self) -> Mapping[str, str]:
        if self._headers is None:  # built on first use: most requests never need it
            headers: dict[str, str] = {}
            for name, value in self._pairs or ():
                name = name.lower()
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
            self._headers = headers
        return self._headers

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    def __repr__(self) -> str:
        query = f"?{self.query}" if self.query else ""
        return f"<HttpRequest {self.method} {self.path}{query}>"


def wsgi_pairs(environ: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A WSGI environ's headers (``HTTP_*``, ``CONTENT_TYPE``, ``CONTENT_LENGTH``)."""
    pairs = []
    for name, value in environ.items():
        if name.startswith("HTTP_"):
            pairs.append((name[5:].replace("_", "-").lower(), value))
        elif name in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            pairs.append((name.replace("_", "-").lower(), value))
    return pairs
