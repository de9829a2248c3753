"""Which hosts and origins a server answers: one policy for every app the project serves.

The engine's server, the payments demo and the console (wherever it is mounted) each apply
:class:`OriginPolicy`, so a page of another site cannot reach them, rebound or not:

1. **Host.** On a loopback address the ``Host`` header must name a loopback host
   (``localhost``, ``*.localhost``, ``127.x.y.z``, ``[::1]``) or one the server was told to
   answer to: a DNS-rebound page (same-origin to the browser) sends its own name. 403.
2. **Same site.** ``Sec-Fetch-Site`` other than ``same-origin``/``none`` is refused. 403.
3. **Origin.** An ``Origin`` must be this server's own (``scheme://host``, the ``Host`` that
   passed step 1): comparing it with a ``Host`` not checked first proves nothing, as both come
   from the rebound page. ``null`` is refused. 403.

:class:`Protected` is the policy as pure ASGI middleware; the refusals are
``application/problem+json``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from .asgi import ASGIApp, Problem, Receive, Scope, Send, header, respond

__all__ = ["SAFE_METHODS", "HostCheck", "OriginPolicy", "Protected", "check_origin"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_SITE = frozenset({b"same-origin", b"none"})


def _host_name(value: bytes) -> str:
    """The host of a ``Host`` header value, lower case, without port or IPv6 brackets."""
    text = value.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HostCheck:
    """Which ``Host`` headers a server bound to ``bound_host`` answers.

    Bound to a loopback address: loopback names and addresses, plus ``extra``. Bound to any
    other address (or ``extra`` containing ``"*"``): every host.
    """

    def __init__(self, bound_host: str, extra: Iterable[str] = ()) -> None:
        extra = {h.strip().lower().strip("[]") for h in extra}
        self.any = "*" in extra or not _is_loopback(bound_host.strip("[]").lower())
        self.extra = frozenset(extra)
        self._seen: dict[bytes, bool] = {}

    def allows(self, value: bytes | None) -> bool:
        if self.any:
            return True
        if value is None:
            return False  # HTTP/1.0 without Host: no browser sends that
        allowed = self._seen.get(value)
        if allowed is None:
            host = _host_name(value)
            allowed = _is_loopback(host) or host in self.extra
            if len(self._seen) < 256:
                self._seen[value] = allowed
        return allowed

    def refusal(self, value: bytes | None) -> Problem:
        shown = "none" if value is None else repr(value.decode("latin-1"))
        return Problem(
            403,
            "Forbidden",
            f"Host {shown} is not a name of this server: it is bound to a loopback address and "
            "answers to localhost, *.localhost, 127.0.0.1 and [::1] (and the hosts it is told "
            "to allow), so that a page of another site re-pointed here (DNS rebinding) is refused",
        )


class OriginPolicy:
    """The checks in the module docstring for a server bound to ``bound_host`` that also
    answers ``allowed_hosts`` (``["*"]``: any host)."""

    def __init__(self, bound_host: str = "127.0.0.1", allowed_hosts: Iterable[str] = ()) -> None:
        self.hosts = HostCheck(bound_host, allowed_hosts)

    def check_host(self, scope: Scope) -> None:
        """Raise the 403 :class:`Problem` for a ``Host`` this server does not answer."""
        host = header(scope, b"host")
        if not self.hosts.allows(host):
            raise self.hosts.refusal(host)

    def check_origin(self, scope: Scope, what: str = "this server") -> None:
        """Raise the 403 :class:`Problem` for a cross-site request (call after
        :meth:`check_host`); ``what`` names the server in the message."""
        check_origin(scope, what)


def check_origin(scope: Scope, what: str = "this server") -> None:
    """:meth:`OriginPolicy.check_origin`, for a ``scope`` whose host is already checked."""
    site = header(scope, b"sec-fetch-site")
    if site is not None and site.lower() not in _SAME_SITE:
        raise Problem(
            403,
            "Forbidden",
            f"cross-site request refused (Sec-Fetch-Site: {site.decode('latin-1')}): "
            f"{what} answers pages of its own origin only",
        )
    origin = header(scope, b"origin")
    if origin is not None:
        scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
        own = f"{scheme}://{(header(scope, b'host') or b'').decode('latin-1')}".lower()
        if origin.decode("latin-1").strip().lower() != own:
            raise Problem(
                403,
                "Forbidden",
                f"cross-origin request refused (Origin: {origin.decode('latin-1')}, this "
                f"server: {own}): {what} answers pages of its own origin only",
            )


class Protected:
    """``app`` behind an :class:`OriginPolicy` (pure ASGI middleware): the host checked on
    every request, the origin on every state change (not GET/HEAD/OPTIONS) and every
    WebSocket, or on every request with ``every_origin=True``."""

    def __init__(
        self,
        app: ASGIApp,
        policy: OriginPolicy,
        *,
        every_origin: bool = False,
        what: str = "this server",
    ) -> None:
        self.app = app
        self.policy = policy
        self.every_origin = every_origin
        self.what = what

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind in ("http", "websocket"):
            try:
                self.policy.check_host(scope)
                if self.every_origin or kind == "websocket" or scope["method"] not in SAFE_METHODS:
                    self.policy.check_origin(scope, self.what)
            except Problem as problem:
                if kind == "websocket":
                    await receive()  # websocket.connect
                    await send({"type": "websocket.close", "code": 1008, "reason": problem.title})
                else:
                    await respond(send, *problem.encode())
                return
        await self.app(scope, receive, send)
