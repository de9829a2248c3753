"""Who may use the admin API and mounted apps, and from where: the guard in front of them.

Every request to ``/_firstwrite/...`` or to a mounted app passes :class:`Guard`, in this order:

1. **Host** and 2. **same origin**: the project's one policy (:mod:`.origins`). 403.
3. **JSON only.** A state-changing request (not GET/HEAD/OPTIONS) with a body or a content type
   must be ``application/json`` (or ``+json``), which a page cannot send without a CORS
   preflight. 415.
4. **Credentials**, when the server has any (``--require-auth``): a SigV4 signature (its header,
   date, scope and key checked before any body is read), or the session cookie (:mod:`.session`).
   401. Not for the login route, nor a mounted app's public paths (its login page, its files).

The guard reads a body itself: at most :data:`MAX_BODY_BYTES` (413; at once, closing, when the
announced length is over), at the data plane's pace and within its byte budget (:mod:`.bodies`).
The caller is in the ASGI scope under :data:`~.session.PRINCIPAL_SCOPE_KEY` (a
:class:`~.session.Principal`, ``None`` without credentials), for mounted apps to read.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

from ..errors import DynamoDBError
from .asgi import ASGIApp, Headers, Message, Problem, Receive, Scope, Send, header, respond
from .bodies import BIG_BODY_BYTES, BodyReader
from .lanes import ByteBudget
from .origins import HostCheck, check_origin
from .session import PRINCIPAL_SCOPE_KEY, SESSION_PATH, Principal, Sessions, session_cookie
from .sigv4 import SigV4Verifier

__all__ = ["Guard"]

MAX_BODY_BYTES = 1024 * 1024  # admin requests, logins, mounted apps' (the console's) bodies
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


# --- the guard -------------------------------------------------------------------------------


class Guard:
    """The checks in the module docstring, in front of ``app`` (pure ASGI middleware)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: SigV4Verifier | None,
        sessions: Sessions,
        hosts: HostCheck | None = None,
        public: Iterable[str] = (),
        bodies: BodyReader | None = None,
        budget: ByteBudget | None = None,
    ) -> None:
        self.app = app
        self.verifier = verifier
        self.sessions = sessions
        self.hosts = hosts
        # Bodies read at the data plane's pace (its BodyReader's), capped at MAX_BODY_BYTES,
        # big ones within its byte budget.
        pace = bodies.pace if bodies is not None else None
        self.bodies = BodyReader(MAX_BODY_BYTES, pace=pace)
        self.budget = budget if budget is not None else ByteBudget(MAX_BODY_BYTES)
        # Paths served without credentials: exact, or every path under one ending with "/".
        public = {SESSION_PATH, *public}
        self._public_exact = frozenset(p for p in public if not p.endswith("/"))
        self._public_prefixes = tuple(p for p in public if p.endswith("/"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        try:
            self._check_host(scope)
            self._check_same_origin(scope)
            if kind == "http":
                self._check_content_type(scope)
            receive = await self._authenticate(scope, receive)
            if kind == "http" and _has_body(scope):
                receive = await self._read_body(scope, receive)
        except Problem as problem:
            if kind == "websocket":
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1008, "reason": problem.title})
            else:
                await respond(send, *problem.encode())
            return
        await self.app(scope, receive, _hardened(send) if kind == "http" else send)

    def _check_host(self, scope: Scope) -> None:
        if self.hosts is not None:
            host = header(scope, b"host")
            if not self.hosts.allows(host):
                raise self.hosts.refusal(host)

    def _check_same_origin(self, scope: Scope) -> None:
        check_origin(scope, "the admin API and mounted apps")

    def _check_content_type(self, scope: Scope) -> None:
        if scope["method"] in _SAFE_METHODS:
            return
        content_type = header(scope, b"content-type")
        if content_type is None:
            length = header(scope, b"content-length")
            has_body = header(scope, b"transfer-encoding") is not None or (
                length is not None and length.strip() not in (b"", b"0")
            )
            if not has_body:
                return
            shown = "none"
        else:
            bare = content_type.split(b";")[0].strip().lower()
            if bare == b"application/json" or (
                bare.startswith(b"application/") and bare.endswith(b"+json")
            ):
                return
            shown = content_type.decode("latin-1")
        raise Problem(
            415,
            "Unsupported Media Type",
            f"{scope['method']} {scope['path']} takes a JSON body (Content-Type: "
            f"application/json), not {shown}",
        )

    def _login_page_for(self, scope: Scope) -> str | None:
        """The public ``<mount>/login`` page of the mount ``scope`` is under, for a browser's
        page request (GET or HEAD accepting HTML); None otherwise."""
        accept = header(scope, b"accept") or b""
        if scope.get("method") not in ("GET", "HEAD") or b"text/html" not in accept:
            return None
        path = scope["path"]
        for page in self._public_exact:
            mount = page.removesuffix("/login")
            if page.endswith("/login") and mount and path.startswith(mount + "/"):
                return page
        return None

    async def _authenticate(self, scope: Scope, receive: Receive) -> Receive:
        """Set the scope's principal; return the ``receive`` the app should use."""
        scope[PRINCIPAL_SCOPE_KEY] = None
        if self.verifier is None:
            return receive
        token = session_cookie(scope)
        if token is not None:
            found = self.sessions.lookup(token)
            if found is not None:
                scope[PRINCIPAL_SCOPE_KEY] = Principal(found[0], "session")
                return receive
        path = scope["path"]
        if path in self._public_exact or path.startswith(self._public_prefixes):
            return receive
        if header(scope, b"authorization") is None:
            login = self._login_page_for(scope)
            if login is not None:  # a browser opening a page: to its mount's sign-in page
                target = quote(
                    path
                    + (
                        "?" + scope["query_string"].decode("latin-1")
                        if scope.get("query_string")
                        else ""
                    ),
                    safe="",
                )
                raise Problem(
                    303,
                    "See Other",
                    "sign in first",
                    headers=[("location", f"{login}?next={target}")],
                )
            raise Problem(
                401,
                "Unauthorized",
                "this server requires credentials: sign the request with SigV4 (as the data "
                f"plane), or log in with POST {SESSION_PATH}",
                headers=[("www-authenticate", "AWS4-HMAC-SHA256")],
            )
        try:  # everything but the signature itself, before a byte of the body is read
            self.verifier.check_headers(scope["headers"])
        except DynamoDBError as error:
            raise Problem(401, "Unauthorized", f"{error.code}: {error.message}") from None
        body = b""
        if scope["type"] == "http" and _has_body(scope):
            receive = await self._read_body(scope, receive)
            body = (await receive())["body"]
            receive = _replay(body, receive)
        try:
            key_id, _region = self.verifier.authenticate(
                scope["method"],
                scope.get("raw_path") or scope["path"].encode(),
                scope.get("query_string", b""),
                scope["headers"],
                body,
            )
        except DynamoDBError as error:
            raise Problem(401, "Unauthorized", f"{error.code}: {error.message}") from None
        scope["firstwrite.body_read"] = True
        scope[PRINCIPAL_SCOPE_KEY] = Principal(key_id, "sigv4")
        return receive

    async def _read_body(self, scope: Scope, receive: Receive) -> Receive:
        """Read the body (once) at the shared pace, capped: a ``receive`` replaying it."""
        if scope.get("firstwrite.body_read"):
            return receive
        scope["firstwrite.body_read"] = True
        length = header(scope, b"content-length")
        size = int(length) if length is not None and length.strip().isdigit() else None
        if size is not None and size > MAX_BODY_BYTES:  # announced too big: not worth reading
            raise Problem(
                413,
                "Payload Too Large",
                f"the request is larger than {scope['path']} accepts ({MAX_BODY_BYTES} bytes)",
                headers=[("connection", "close")],
            )
        big = size is None or size > BIG_BODY_BYTES
        granted = (
            await self.budget.acquire(min(size or MAX_BODY_BYTES, MAX_BODY_BYTES)) if big else 0
        )
        try:
            body = await self.bodies.read(receive, size, big=big)
        finally:
            if granted:
                self.budget.release(granted)
        if body is None:
            raise Problem(
                413,
                "Payload Too Large",
                f"the request is larger than {scope['path']} accepts ({MAX_BODY_BYTES} bytes)",
            )
        return _replay(bytes(body), receive)


def _has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length")
    return header(scope, b"transfer-encoding") is not None or (
        length is not None and length.strip() not in (b"", b"0")
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then the connection's events."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


_HARDENING: Headers = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"SAMEORIGIN")]


def _hardened(send: Send) -> Send:
    """``send`` adding headers that keep other sites from framing or sniffing the answers."""

    async def send_hardened(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name.lower() for name, _ in message.get("headers", [])}
            extra = [(k, v) for k, v in _HARDENING if k not in names]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return send_hardened
