"""DynamoDB's JSON 1.0 protocol over HTTP: a pure ASGI app, run by uvicorn.

``POST /`` with ``X-Amz-Target: DynamoDB_20120810.<Op>`` (or ``DynamoDBStreams_20120810.<Op>``)
and a JSON body, answered as DynamoDB answers: ``application/x-amz-json-1.0``, an
``x-amzn-RequestId`` and the body's ``x-amz-crc32``, errors with their HTTP status and
DynamoDB's ``__type`` body. ``GET /`` is a health check. Paths under ``/_firstwrite/`` are
reserved for admin apps (see :func:`register_admin_route`); anything else is a 4xx with an
``application/problem+json`` body.

The hot path avoids frameworks: headers are picked out of the raw ASGI scope, and the blocking
part (JSON decode, signature check, :meth:`Engine.execute`, JSON encode, CRC32) runs as one job
on a thread pool, so the event loop only moves bytes and concurrent writers reach the storage
layer together, where they share a commit.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import functools
import hashlib
import hmac
import json
import logging
import re
import signal
import socket
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .client import CONTENT_TYPE, new_request_id
from .errors import DynamoDBError
from .values import to_wire

if TYPE_CHECKING:
    import uvicorn

    from .api import Engine, Service

__all__ = [
    "ADMIN_PREFIX",
    "ASGIApp",
    "EngineApp",
    "ServerThread",
    "SigV4Verifier",
    "create_app",
    "register_admin_route",
    "serve",
    "unregister_admin_route",
    "wire_call",
]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ADMIN_PREFIX = "/_firstwrite/"
MAX_BODY_BYTES = 16 * 1024 * 1024  # DynamoDB's own request limit
DEFAULT_THREADS = 32
DEFAULT_REGION = "us-east-1"

_TARGETS: dict[str, Service] = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "streams",
}
_JSON_TYPES = frozenset({b"application/x-amz-json-1.0", b"application/json"})


# --- the protocol core, shared with the boto3 binding ------------------------------------------


def _loads(body: bytes | str) -> Any:
    if type(body) is bytes and body[:1] == b"{" and body[1:2] != b"\x00":
        # What json.loads does with such bytes (its encoding sniffing says UTF-8), minus the
        # sniffing.
        return json.loads(body.decode("utf-8", "surrogatepass"))
    return json.loads(body)


# One encoder for every response: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=to_wire)


def _dumps(value: Any) -> bytes:
    if type(value) is dict and not value:
        return b"{}"  # the commonest response (PutItem, DeleteItem, UpdateItem without returns)
    return _ENCODER.encode(value).encode()


# DynamoDB answers unparseable JSON with a bare __type (no message member).
_SERIALIZATION_BODY = b'{"__type":"com.amazon.coral.service#SerializationException"}'
_UNKNOWN_OPERATION_BODY = b'{"__type":"com.amazon.coral.service#UnknownOperationException"}'
_INTERNAL_BODY = _dumps(DynamoDBError("InternalServerError", "Internal server error").wire_body())


def wire_call(
    engine: Engine,
    target: str | None,
    body: bytes | str | None,
    region: str | None = None,
    authorize: Callable[[], str] | None = None,
) -> tuple[int, bytes]:
    """Answer one DynamoDB JSON 1.0 request: ``(HTTP status, response body)``.

    Checks run in DynamoDB's order: the JSON body, then the target, then ``authorize`` (which
    returns the region of a verified signature or raises), then the engine. Anything the
    engine did not anticipate becomes DynamoDB's 500 ``InternalServerError``.
    """
    try:
        try:
            request = _loads(body) if body else {}
        except ValueError:
            return 400, _SERIALIZATION_BODY
        prefix, _, operation = (target or "").partition(".")
        service = _TARGETS.get(prefix)
        if service is None or not operation:
            return 400, _UNKNOWN_OPERATION_BODY
        if authorize is not None:
            region = authorize()
        result = engine.execute(operation, request, region=region, wire=True, service=service)
        return 200, _dumps(result)
    except DynamoDBError as error:
        return error.status, _dumps(error.wire_body())
    except Exception:
        log.exception("engine failed on %s", target)
        return 500, _INTERNAL_BODY


# --- SigV4 -----------------------------------------------------------------------------------

_MISSING_TOKEN = "Request is missing Authentication Token"
_BAD_TOKEN = "The security token included in the request is invalid."
_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. "
    "Consult the service documentation for details."
)
_BASIC_DATE = re.compile(r"\d{8}T\d{6}Z\Z")
_SKEW_SECONDS = 15 * 60


def region_from_authorization(header: bytes | str | None) -> str:
    """The region of a SigV4 ``Authorization`` header's credential scope, unverified."""
    if header is None:
        return DEFAULT_REGION
    text = header.decode("latin-1") if isinstance(header, bytes) else header
    start = text.find("Credential=")
    if start < 0:
        return DEFAULT_REGION
    end = text.find(",", start)
    parts = text[start + 11 : end if end >= 0 else None].strip().split("/")
    return parts[2] if len(parts) >= 3 and parts[2] else DEFAULT_REGION


def _basic(ts: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(ts))


@functools.lru_cache(maxsize=256)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = hmac.digest(("AWS4" + secret).encode(), date.encode(), "sha256")
    for part in (region, service, "aws4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    return key


class SigV4Verifier:
    """Verifies AWS Signature Version 4 against configured access key/secret pairs.

    The checks and their wording follow DynamoDB's (as recorded by dynalite): missing
    header -> ``MissingAuthenticationTokenException``; malformed -> ``IncompleteSignatureException``;
    bad scope, stale date or wrong signature -> ``InvalidSignatureException``; unknown key ->
    ``UnrecognizedClientException``.
    """

    def __init__(self, credentials: Mapping[str, str], *, clock: Callable[[], float] = time.time):
        if not credentials:
            raise ValueError("SigV4Verifier needs at least one access key/secret pair")
        self.credentials = dict(credentials)
        self.clock = clock

    def verify(
        self,
        method: str,
        raw_path: bytes,
        query_string: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> str:
        """Return the signed region, or raise the :class:`DynamoDBError` DynamoDB would."""
        values: dict[str, list[str]] = {}
        for name, value in headers:
            values.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        auth = ",".join(values.get("authorization", []))
        if not auth.strip().startswith("AWS4-"):
            raise DynamoDBError("MissingAuthenticationTokenException", _MISSING_TOKEN)
        algorithm, _, rest = auth.strip().partition(" ")
        params: dict[str, str] = {}
        for piece in rest.split(","):
            key, _, val = piece.strip().partition("=")
            params[key] = val
        date = (values.get("x-amz-date") or values.get("date") or [""])[0]
        missing = "".join(
            f"Authorization header requires '{name}' parameter. "
            for name in ("Credential", "Signature", "SignedHeaders")
            if not params.get(name)
        )
        if not date:
            missing += "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
        if missing:
            raise DynamoDBError("IncompleteSignatureException", missing + "Authorization=" + auth)
        signed_at = self._parse_date(date)
        amz_date = _basic(signed_at)
        now = self.clock()
        if signed_at < now - _SKEW_SECONDS:
            raise DynamoDBError(
                "InvalidSignatureException",
                f"Signature expired: {amz_date} is now earlier than "
                f"{_basic(now - _SKEW_SECONDS)} ({_basic(now)} - 15 min.)",
            )
        if signed_at > now + _SKEW_SECONDS:
            raise DynamoDBError(
                "InvalidSignatureException",
                f"Signature not yet current: {amz_date} is still later than "
                f"{_basic(now + _SKEW_SECONDS)} ({_basic(now)} + 15 min.)",
            )
        signed_headers = params["SignedHeaders"]
        names = [n.strip().lower() for n in signed_headers.split(";")]
        if "host" not in names:
            raise DynamoDBError(
                "InvalidSignatureException",
                "'Host' must be a 'SignedHeader' in the AWS Authorization.",
            )
        if algorithm != "AWS4-HMAC-SHA256":
            raise DynamoDBError(
                "IncompleteSignatureException",
                f"Unsupported AWS 'algorithm': '{algorithm}' (only AWS4-HMAC-SHA256 for now). ",
            )
        credential = params["Credential"]
        scope = credential.rstrip("/").split("/")
        if len(scope) != 5:
            raise DynamoDBError(
                "IncompleteSignatureException",
                "Credential must have exactly 5 slash-delimited elements, "
                f"e.g. keyid/date/region/service/term, got '{credential}'",
            )
        key_id, scope_date, region, service, terminator = scope
        problems = ""
        if not region:
            problems += f"Credential should be scoped to a valid region, not '{region}'. "
        if service != "dynamodb":
            problems += "Credential should be scoped to correct service: 'dynamodb'. "
        if terminator != "aws4_request":
            problems += f"Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator}'. "
        if scope_date != amz_date[:8]:
            problems += (
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
                f"from HTTP: '{scope_date}' != '{amz_date[:8]}', from '{date}'."
            )
        if problems:
            raise DynamoDBError("InvalidSignatureException", problems.rstrip())
        secret = self.credentials.get(key_id)
        if secret is None:
            raise DynamoDBError("UnrecognizedClientException", _BAD_TOKEN)

        payload_hash = (values.get("x-amz-content-sha256") or [""])[0] or hashlib.sha256(
            body
        ).hexdigest()
        canonical = "\n".join(
            (
                method.upper(),
                _canonical_path(raw_path),
                _canonical_query(query_string),
                "".join(
                    f"{n}:{','.join(' '.join(v.split()) for v in values.get(n, []))}\n"
                    for n in names
                ),
                signed_headers,
                payload_hash,
            )
        )
        string_to_sign = "\n".join(
            (
                "AWS4-HMAC-SHA256",
                amz_date,
                "/".join(scope[1:]),
                hashlib.sha256(canonical.encode()).hexdigest(),
            )
        )
        signing_key = _signing_key(secret, scope_date, region, service)
        expected = hmac.new(signing_key, string_to_sign.encode(), "sha256").hexdigest()
        if not hmac.compare_digest(expected, params["Signature"]):
            raise DynamoDBError(
                "InvalidSignatureException",
                f"{_SIGNATURE_MISMATCH}\n\nThe Canonical String for this request should have been\n"
                f"'{canonical}'\n\nThe String-to-Sign should have been\n'{string_to_sign}'\n",
            )
        return region

    @staticmethod
    def _parse_date(date: str) -> float:
        if _BASIC_DATE.match(date):
            return float(calendar.timegm(time.strptime(date, "%Y%m%dT%H%M%SZ")))
        with contextlib.suppress(TypeError, ValueError):
            return parsedate_to_datetime(date).timestamp()
        raise DynamoDBError(
            "IncompleteSignatureException",
            f"Date must be in ISO-8601 'basic format'. Got '{date}'. "
            "See http://en.wikipedia.org/wiki/ISO_8601",
        )


def _canonical_path(raw_path: bytes) -> str:
    if raw_path == b"/" or not raw_path:
        return "/"
    from botocore.utils import normalize_url_path

    # As botocore signs it for non-S3 services: normalised, then percent-encoded again.
    return quote(normalize_url_path(raw_path.decode("latin-1")), safe="/~")


def _canonical_query(query_string: bytes) -> str:
    if not query_string:
        return ""
    pairs = sorted(p.partition("=")[::2] for p in query_string.decode("latin-1").split("&"))
    return "&".join(f"{k}={v}" for k, v in pairs)


# --- the ASGI app ----------------------------------------------------------------------------

AdminFactory = Callable[["Engine"], ASGIApp]
_ADMIN_FACTORIES: dict[str, AdminFactory] = {}


def register_admin_route(prefix: str, factory: AdminFactory) -> None:
    """Serve ``prefix`` (under ``/_firstwrite/``) with ``factory(engine)`` in every app.

    The factory's ASGI app receives the full, unchanged scope for any path starting with
    ``prefix``. Apps built with an explicit ``routes=`` mapping get those routes instead.
    """
    if not prefix.startswith(ADMIN_PREFIX):
        raise ValueError(f"admin routes live under {ADMIN_PREFIX}, not {prefix!r}")
    _ADMIN_FACTORIES[prefix] = factory


def unregister_admin_route(prefix: str) -> None:
    """Forget a :func:`register_admin_route` registration (apps already built keep it)."""
    _ADMIN_FACTORIES.pop(prefix, None)


def _problem(status: int, title: str, detail: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps(
        {"type": "about:blank", "title": title, "status": status, "detail": detail}
    ).encode()
    return (
        status,
        [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
        ],
        body,
    )


class _TooLarge(Exception):
    pass


class EngineApp:
    """The ASGI application serving one :class:`Engine`.

    ``credentials`` (access key -> secret) turns on real SigV4 verification; without it any
    signature (or none) is accepted and the region is read from the credential scope.
    ``routes`` maps path prefixes under ``/_firstwrite/`` to ASGI apps (default: every
    :func:`register_admin_route` registration, built for this engine).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        credentials: Mapping[str, str] | None = None,
        routes: Mapping[str, ASGIApp] | None = None,
        threads: int = DEFAULT_THREADS,
        max_body_bytes: int = MAX_BODY_BYTES,
        inline: bool | None = None,
    ) -> None:
        self.engine = engine
        self.verifier = SigV4Verifier(credentials) if credentials else None
        if routes is None:
            from . import admin  # noqa: F401  (registers the clock/faults/replication routes)

            routes = {prefix: factory(engine) for prefix, factory in _ADMIN_FACTORIES.items()}
        for prefix in routes:
            if not prefix.startswith(ADMIN_PREFIX):
                raise ValueError(f"admin routes live under {ADMIN_PREFIX}, not {prefix!r}")
        # Longest prefix first, so /_firstwrite/faults/x beats /_firstwrite/.
        self.routes: list[tuple[str, ASGIApp]] = sorted(
            routes.items(), key=lambda kv: len(kv[0]), reverse=True
        )
        self.max_body_bytes = max_body_bytes
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="firstwrite-engine")
        # Where engine calls run. With durability "full" every commit waits for an fsync, so they
        # go to the thread pool, where concurrent writers share commits (group commit). With
        # "normal" a call is tens of microseconds of CPU and runs inline on the event loop —
        # unless faults are switched on: injected latency must delay one request, not the loop.
        self._inline = inline if inline is not None else engine.durability == "normal"
        self._health = json.dumps({"status": "ok", "service": "firstwrite-dynamodb"}).encode()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            method = scope["method"]
            if method == "POST" and path == "/":
                await self._dynamodb(scope, receive, send)
            elif path.startswith(ADMIN_PREFIX):
                await self._admin(scope, receive, send)
            elif path == "/" and method in ("GET", "HEAD"):
                await _respond(
                    send,
                    200,
                    [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(self._health)).encode()),
                    ],
                    b"" if method == "HEAD" else self._health,
                )
            elif path == "/":
                status, headers, body = _problem(
                    405, "Method Not Allowed", f"{method} / is not supported; use POST"
                )
                await _respond(send, status, [*headers, (b"allow", b"GET, HEAD, POST")], body)
            elif method == "POST" and _header(scope, b"x-amz-target") is not None:
                # SDKs pointed at an endpoint_url with a path POST there: DynamoDB ignores it.
                await self._dynamodb(scope, receive, send)
            else:
                await _respond(send, *_problem(404, "Not Found", f"No route for {method} {path}"))
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _admin(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        for prefix, app in self.routes:
            # Whole path segments only: /_firstwrite/faults must not serve /_firstwrite/faultsx.
            if path.startswith(prefix) and (
                len(path) == len(prefix) or prefix.endswith("/") or path[len(prefix)] == "/"
            ):
                await app(scope, receive, send)
                return
        await _respond(send, *_problem(404, "Not Found", f"No admin route for {path}"))

    async def _dynamodb(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = authorization = content_type = None
        for name, value in scope["headers"]:
            if name == b"x-amz-target":
                target = value
            elif name == b"authorization":
                authorization = value
            elif name == b"content-type":
                content_type = value
        try:
            body = await self._read_body(receive)
        except _TooLarge:
            await _respond(
                send,
                *_problem(
                    413,
                    "Payload Too Large",
                    f"Request bodies are limited to {self.max_body_bytes} bytes",
                ),
            )
            return
        if body and content_type is not None:
            bare = content_type.partition(b";")[0].strip().lower()
            if bare not in _JSON_TYPES:
                # What DynamoDB sends for a body that is not JSON-typed.
                await _respond(
                    send,
                    404,
                    [(b"x-amzn-requestid", new_request_id().encode()), *_XML_HEADERS],
                    _XML_UNKNOWN,
                )
                return
        if self._inline and not self.engine.interceptors:
            # Short and never waiting on another thread of ours: answering on the event loop is
            # 2x faster than a thread-pool round trip (see BENCHMARKS.md).
            start, payload = self._answer(scope, target, authorization, body)
        else:
            loop = asyncio.get_running_loop()
            start, payload = await loop.run_in_executor(
                self._pool, self._answer, scope, target, authorization, body
            )
        await send(start)
        await send({"type": "http.response.body", "body": payload})

    def _answer(
        self, scope: Scope, target: bytes | None, authorization: bytes | None, body: bytes
    ) -> tuple[Message, bytes]:
        # Runs on the thread pool: everything that costs CPU or blocks, so that the event loop
        # only moves bytes.
        verifier = self.verifier
        target_text = None if target is None else target.decode("latin-1")
        if verifier is None:
            region = region_from_authorization(authorization)
            status, payload = wire_call(self.engine, target_text, body, region)
        else:

            def authorize() -> str:
                return verifier.verify(
                    scope["method"],
                    scope.get("raw_path") or scope["path"].encode(),
                    scope.get("query_string", b""),
                    scope["headers"],
                    body,
                )

            status, payload = wire_call(self.engine, target_text, body, authorize=authorize)
        start = {
            "type": "http.response.start",
            "status": status,
            "headers": [
                _CONTENT_TYPE_HEADER,
                (b"content-length", b"%d" % len(payload)),
                (b"x-amzn-requestid", new_request_id().encode()),
                (b"x-amz-crc32", b"%d" % zlib.crc32(payload)),
            ],
        }
        return start, payload

    async def _read_body(self, receive: Receive) -> bytes:
        message = await receive()
        body: bytes = message.get("body", b"")
        if not message.get("more_body", False):
            if len(body) > self.max_body_bytes:
                raise _TooLarge
            return body
        chunks = [body]
        size = len(body)
        while message.get("more_body", False):
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
        return b"".join(chunks)


_CONTENT_TYPE_HEADER = (b"content-type", CONTENT_TYPE.encode())
_XML_UNKNOWN = b"<UnknownOperationException/>\n"
_XML_HEADERS = [
    (b"x-amz-crc32", b"%d" % zlib.crc32(_XML_UNKNOWN)),
    (b"content-length", b"%d" % len(_XML_UNKNOWN)),
]


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value  # type: ignore[no-any-return]
    return None


async def _respond(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_app(
    engine: Engine,
    *,
    credentials: Mapping[str, str] | None = None,
    routes: Mapping[str, ASGIApp] | None = None,
    threads: int = DEFAULT_THREADS,
    inline: bool | None = None,
) -> EngineApp:
    """The ASGI app for ``engine`` (mount it in any ASGI server)."""
    return EngineApp(engine, credentials=credentials, routes=routes, threads=threads, inline=inline)


# --- running it ------------------------------------------------------------------------------


class _CoalescingTransport:
    """A transport that sends all the writes of one event-loop turn as one.

    uvicorn writes a response's head and its body separately, and uvloop sends each write at
    once: two send(2) calls and two TCP segments per DynamoDB answer, which measured as half
    the server's time under load. Buffering until the end of the turn keeps the order and
    halves that; nothing waits longer than the current turn.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Iterator[bytes]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending = []
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()  # what was written before close() still goes out, as with a transport
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _coalescing_protocol() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol on a :class:`_CoalescingTransport` (None without httptools)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is a dependency
        return None

    class CoalescingHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            coalescing = _CoalescingTransport(transport, self.loop)
            super().connection_made(coalescing)  # type: ignore[arg-type]

    return CoalescingHttpToolsProtocol


def _uvicorn_config(app: EngineApp, host: str, port: int) -> uvicorn.Config:
    import uvicorn

    http: Any = _coalescing_protocol() or "auto"
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:  # pragma: no cover - no uvloop on Windows
        loop = "asyncio"
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop=loop,
        http=http,
        lifespan="off",
        access_log=False,
        log_config=None,  # never reconfigure the host program's logging
        log_level="warning",
        server_header=False,
        date_header=True,
        backlog=2048,
        timeout_keep_alive=75,
        timeout_graceful_shutdown=10,
    )


def _bind(host: str, port: int) -> socket.socket:
    # Bound here rather than by uvicorn, whose bind_socket() calls sys.exit() on failure.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _server_class() -> Any:
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn's server, minus its signal handling (its owner decides) plus a ready hook."""

        ready_callback: Callable[[], None] | None = None

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and self.ready_callback is not None:
                self.ready_callback()

    return _Server


def serve(
    engine: Engine,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    credentials: Mapping[str, str] | None = None,
    routes: Mapping[str, ASGIApp] | None = None,
    threads: int = DEFAULT_THREADS,
    inline: bool | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``engine`` until SIGINT/SIGTERM (when run on the main thread), then return.

    ``port=0`` picks a free port; ``ready(url)`` is called once the socket accepts requests.
    Shutdown is graceful: in-flight requests finish, the engine is left open for the caller.
    """
    app = create_app(engine, credentials=credentials, routes=routes, threads=threads, inline=inline)
    config = _uvicorn_config(app, host, port)
    sock = _bind(host, port)
    url = _url(sock)
    server = _server_class()(config)
    if ready is not None:
        server.ready_callback = lambda: ready(url)

    async def main() -> None:
        if threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, _request_exit, server)
        await server.serve(sockets=[sock])

    try:
        with asyncio.Runner(loop_factory=_new_loop) as runner:
            runner.run(main())
    finally:
        sock.close()
        app.close()


def _request_exit(server: uvicorn.Server) -> None:
    if server.should_exit:
        server.force_exit = True  # a second signal: stop waiting for in-flight requests
    server.should_exit = True


class ServerThread:
    """Serve an engine on a background thread: ``with ServerThread(engine) as url: ...``.

    Binds (by default) a free loopback port before starting, so the URL is known and the
    server is accepting connections by the time ``__enter__`` returns.
    """

    def __init__(
        self,
        engine: Engine,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        credentials: Mapping[str, str] | None = None,
        routes: Mapping[str, ASGIApp] | None = None,
        threads: int = DEFAULT_THREADS,
        inline: bool | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.app = create_app(
            engine, credentials=credentials, routes=routes, threads=threads, inline=inline
        )
        self._config = _uvicorn_config(self.app, host, port)
        self._server = _server_class()(self._config)
        self._ready = threading.Event()
        self._server.ready_callback = self._ready.set
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._error: BaseException | None = None
        self._startup_timeout = startup_timeout
        self.url = ""

    def _run(self) -> None:
        assert self._sock is not None
        try:
            with asyncio.Runner(loop_factory=_new_loop) as runner:
                runner.run(self._server.serve(sockets=[self._sock]))
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    def start(self) -> str:
        self._sock = _bind(self._config.host, self._config.port)
        self.url = _url(self._sock)
        self._thread = threading.Thread(target=self._run, name="firstwrite-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._startup_timeout) or self._error is not None:
            self.stop()
            raise RuntimeError(f"server failed to start: {self._error!r}")
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.app.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
