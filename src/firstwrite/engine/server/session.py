"""The browser session: the login, its server-side tokens, the caller, the login throttle.

``POST /_firstwrite/session`` with ``{"access_key_id": ..., "secret_access_key": ...}`` trades
the key pair for an HttpOnly, SameSite=Strict cookie holding a random token (only its hash is
kept here); ``GET`` tells who is logged in; ``DELETE`` logs out. :class:`~.auth.Guard` accepts
the cookie on the admin API and mounted apps.

Failed logins slow down, per client address (:class:`LoginThrottle`): the first
:data:`FREE_FAILURES` in a row cost nothing; after that each failure makes the address wait
before its next try, :data:`BASE_DELAY` doubling with every failure up to :data:`MAX_DELAY`. A
try while it must wait is answered 429 with ``Retry-After`` at once, whatever the credentials
(a right guess is then no different from a wrong one), and does not count. A login that
succeeds clears the count, and an address that has not failed for :data:`FORGET_AFTER` is
forgotten. Nothing waits on the server, so neither the event loop nor other clients are held
up, and at most :data:`MAX_CLIENTS` addresses are remembered (the least recently failed go
first). IPv6 clients count per /64, the block one host is usually given. SigV4-signed requests
are verified per request and never throttled.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any, Literal

from .asgi import Problem, Scope, header

__all__ = [
    "PRINCIPAL_SCOPE_KEY",
    "SESSION_PATH",
    "LoginThrottle",
    "Principal",
    "Sessions",
    "client_address",
    "cookie_name",
    "session_cookie",
    "session_routes",
]

PRINCIPAL_SCOPE_KEY = "firstwrite.principal"
SESSION_PATH = "/_firstwrite/session"
SESSION_LIFETIME = 8 * 3600.0
MAX_SESSIONS = 1024

FREE_FAILURES = 5
BASE_DELAY = 1.0
MAX_DELAY = 300.0
FORGET_AFTER = 3600.0
MAX_CLIENTS = 4096


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: the access key id, and how it proved it."""

    access_key_id: str
    via: Literal["sigv4", "session"]


# --- failed logins ---------------------------------------------------------------------------


class LoginThrottle:
    """Failed logins per client address, and how long each address must wait (module docs).

    Pure bookkeeping on ``clock`` (monotonic seconds): it never sleeps. Thread-safe.
    """

    def __init__(
        self,
        *,
        free_failures: int = FREE_FAILURES,
        base_delay: float = BASE_DELAY,
        max_delay: float = MAX_DELAY,
        forget_after: float = FORGET_AFTER,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if free_failures < 0 or max_clients < 1:
            raise ValueError("free_failures must be >= 0 and max_clients >= 1")
        if not 0 < base_delay <= max_delay <= forget_after:
            raise ValueError("need 0 < base_delay <= max_delay <= forget_after")
        self.free_failures = free_failures
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.forget_after = forget_after
        self.max_clients = max_clients
        self.clock = clock
        self._lock = threading.Lock()
        # address -> (failures in a row, when the last one was, when it may try again); in the
        # order of the last failure, so the first entry is the one to forget first.
        self._clients: dict[str, tuple[int, float, float]] = {}

    def delay(self, failures: int) -> float:
        """The wait after ``failures`` failed logins in a row."""
        over = failures - self.free_failures
        if over <= 0:
            return 0.0
        return min(self.max_delay, self.base_delay * 2.0 ** min(over - 1, 64))

    def wait(self, client: str) -> float:
        """Seconds ``client`` must still wait before its next login (0: it may try now)."""
        now = self.clock()
        with self._lock:
            record = self._clients.get(client)
            if record is None:
                return 0.0
            if now - record[1] >= self.forget_after:
                del self._clients[client]
                return 0.0
            return max(0.0, record[2] - now)

    def failed(self, client: str) -> float:
        """Count a failed login by ``client``; returns the wait it now has before the next."""
        now = self.clock()
        with self._lock:
            record = self._clients.pop(client, None)
            fresh = record is None or now - record[1] >= self.forget_after
            failures = 1 if fresh or record is None else record[0] + 1
            delay = self.delay(failures)
            self._clients[client] = (failures, now, now + delay)
            while len(self._clients) > self.max_clients:
                del self._clients[next(iter(self._clients))]
        return delay

    def succeeded(self, client: str) -> None:
        """A login by ``client`` succeeded: its failures are forgiven."""
        with self._lock:
            self._clients.pop(client, None)


def client_address(scope: Scope) -> str:
    """Whom the throttle counts a request against: the peer's IP address (an IPv6 one by its
    /64); ``""`` when the server does not know it."""
    client = scope.get("client")
    if not client:
        return ""
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return str(client[0])
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


# --- sessions --------------------------------------------------------------------------------


class Sessions:
    """Server-side session tokens: random, expiring, at most :data:`MAX_SESSIONS` alive, and
    the :class:`LoginThrottle` in front of the login that creates them.

    Only a hash of each token is kept, so the table does not hold usable tokens.
    """

    def __init__(
        self,
        lifetime: float = SESSION_LIFETIME,
        *,
        limit: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.time,
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.lifetime = lifetime
        self.limit = limit
        self.clock = clock
        self.throttle = throttle or LoginThrottle()
        self._lock = threading.Lock()
        self._by_digest: dict[str, tuple[str, float]] = {}  # digest -> (access key id, expiry)

    @staticmethod
    def _digest(token: str) -> str:
        return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()

    def create(self, access_key_id: str) -> tuple[str, float]:
        """A new session for ``access_key_id``: ``(token, expiry as a Unix time)``."""
        token = secrets.token_urlsafe(32)
        now = self.clock()
        expires = now + self.lifetime
        with self._lock:
            for digest, (_, expiry) in list(self._by_digest.items()):
                if expiry <= now:
                    del self._by_digest[digest]
            while len(self._by_digest) >= self.limit:  # the oldest first (insertion order)
                del self._by_digest[next(iter(self._by_digest))]
            self._by_digest[self._digest(token)] = (access_key_id, expires)
        return token, expires

    def lookup(self, token: str) -> tuple[str, float] | None:
        """``(access key id, expiry)`` of a live session, or None."""
        digest = self._digest(token)
        with self._lock:
            found = self._by_digest.get(digest)
            if found is not None and found[1] <= self.clock():
                del self._by_digest[digest]
                return None
        return found

    def revoke(self, token: str) -> None:
        with self._lock:
            self._by_digest.pop(self._digest(token), None)


def cookie_name(scope: Scope) -> str:
    """The session cookie's name: per port, as cookies are shared by every port of a host."""
    server = scope.get("server")
    port = server[1] if server and server[1] else ""
    return f"firstwrite_session{port}"


def session_cookie(scope: Scope) -> str | None:
    """The session token the request's cookie carries, if any."""
    raw = header(scope, b"cookie")
    if raw is None:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw.decode("latin-1"))
    except Exception:  # a malformed Cookie header is no session
        return None
    morsel = jar.get(cookie_name(scope))
    return None if morsel is None else morsel.value


# --- the session route ------------------------------------------------------------------------


def session_routes(credentials: Mapping[str, str] | None, sessions: Sessions) -> list[Any]:
    """``GET``/``POST``/``DELETE`` :data:`SESSION_PATH` (Starlette routes)."""
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from .admin import json_response, read_body

    secrets_by_key = dict(credentials or {})

    def state(principal: Principal | None, expires: float | None = None) -> dict[str, Any]:
        return {
            "auth_required": bool(secrets_by_key),
            "principal": None if principal is None else principal.access_key_id,
            "via": None if principal is None else principal.via,
            "expires": expires,
        }

    async def session(request: Request) -> Response:
        scope = request.scope
        principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
        name = cookie_name(scope)
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        if request.method in ("GET", "HEAD"):
            token = session_cookie(scope)
            found = None if token is None else sessions.lookup(token)
            return json_response(state(principal, None if found is None else found[1]))
        if request.method == "DELETE":
            token = session_cookie(scope)
            if token is not None:
                sessions.revoke(token)
            response = json_response(state(None))
            response.headers.append(
                "set-cookie", f"{name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{secure}"
            )
            return response
        key_id, secret = _login_pair(await read_body(request))
        if not secrets_by_key:
            return json_response(state(None))  # nothing to log in to
        # From the throttle's check to its count, no await: on the event loop they are one
        # step, so guesses sent in parallel cannot all pass the check before one is counted.
        client = client_address(scope)
        wait = sessions.throttle.wait(client)
        if wait > 0:  # whatever the pair: a right guess must look like a wrong one
            raise _too_many(wait)
        expected = secrets_by_key.get(key_id, "")
        # Compared even for an unknown key, so the time taken does not tell which keys exist.
        if not hmac.compare_digest(expected.encode(), secret.encode()) or key_id not in (
            secrets_by_key
        ):
            delay = sessions.throttle.failed(client)
            raise Problem(
                401,
                "Unauthorized",
                "the access key id and secret access key are not a pair this server knows"
                + (f" (next try in {_seconds(delay)} s)" if delay else ""),
                headers=[("retry-after", str(_seconds(delay)))] if delay else [],
            )
        sessions.throttle.succeeded(client)
        token, expires = sessions.create(key_id)
        response = json_response(state(Principal(key_id, "session"), expires))
        response.headers.append(
            "set-cookie",
            f"{name}={token}; Path=/; Max-Age={int(sessions.lifetime)}; HttpOnly; "
            f"SameSite=Strict{secure}",
        )
        return response

    return [Route(SESSION_PATH, session, methods=["GET", "POST", "DELETE"])]


def _login_pair(raw: bytes) -> tuple[str, str]:
    """``(access key id, secret)`` from a login body; 400 for anything else."""
    from ..wire import loads

    try:
        body = loads(raw or b"{}")
    except ValueError:
        raise Problem(400, "Bad Request", "the body is not JSON") from None
    if not isinstance(body, dict) or set(body) - {"access_key_id", "secret_access_key"}:
        raise Problem(
            400, "Bad Request", 'the body is {"access_key_id": "...", "secret_access_key": "..."}'
        )
    key_id, secret = body.get("access_key_id"), body.get("secret_access_key")
    if not isinstance(key_id, str) or not isinstance(secret, str):
        raise Problem(400, "Bad Request", "access_key_id and secret_access_key must be strings")
    return key_id, secret


def _seconds(delay: float) -> int:
    return max(1, math.ceil(delay))


def _too_many(wait: float) -> Problem:
    seconds = _seconds(wait)
    return Problem(
        429,
        "Too Many Requests",
        f"too many failed logins from this address: try again in {seconds} s",
        headers=[("retry-after", str(seconds))],
    )
