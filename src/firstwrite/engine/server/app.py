"""The HTTP server: DynamoDB's JSON 1.0 protocol over HTTP, a pure ASGI app run by uvicorn.

``POST /`` with ``X-Amz-Target: DynamoDB_20120810.<Op>`` (or ``DynamoDBStreams_20120810.<Op>``)
and a JSON body is answered as DynamoDB answers (:mod:`.wire`; compressed when the client asks:
:mod:`.response_coding`); ``GET /`` is DynamoDB's health check (``healthy: <host>``); browsers'
CORS requests are answered for the origins the server allows (:mod:`.cors`).
Paths under ``/_firstwrite/`` are the admin API (:mod:`.admin`), and other ASGI apps can be
mounted under a path prefix (``mounts={"/console": app}``); the server composes them all
explicitly, with Starlette's routing. Anything else is a 4xx with an
``application/problem+json`` body.

The data plane's hot path avoids frameworks: headers are picked out of the raw ASGI scope, and
the blocking part (JSON decode, signature check, :meth:`Engine.execute`, JSON encode, CRC32)
runs as one job, so the event loop only moves bytes. Big bodies are decoded in a worker process
first (:mod:`.screening`): this one decodes only those that must be.

Size: one request's path through the data plane (host, origin, credentials before the body,
pacing, lanes, the answer) is read in one place, in the order it runs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import DynamoDBError
from ..wire import (
    JSON_CONTENT_TYPES,
    MAX_BODY_BYTES,
    Decode,
    dumps,
    new_request_id,
    note_served_address,
    response_headers,
    wire_call,
)
from . import connection, control, response_coding, runner
from .asgi import ASGIApp, Message, Receive, Scope, Send, header, problem, respond
from .bodies import BIG_BODY_BYTES, BodyReader
from .connection import Limits
from .content_coding import decoded_body
from .control import ADMIN_PREFIX, Mounted
from .cors import Cors
from .lanes import ByteBudget, Lane
from .origins import HostCheck
from .screening import Screener
from .session import Sessions
from .sigv4 import SigV4Verifier, access_key_of, region_from_authorization

if TYPE_CHECKING:
    from ..api import Engine

__all__ = [
    "ADMIN_PREFIX",
    "ASGIApp",
    "EngineApp",
    "Limits",
    "Mounted",
    "ServerThread",
    "SigV4Verifier",
    "create_app",
    "serve",
]

log = logging.getLogger(__name__)

DEFAULT_THREADS = 32
# DynamoDB's limits on a request's line and on its header fields, 16 KB each, answered 400
# (ScyllaDB's test_manual_requests.py records them); the rest as every server here.
DEFAULT_LIMITS = Limits(max_line_bytes=16 * 1024, max_field_bytes=16 * 1024)
# At most this many bytes of big bodies in the server at once (16 MiB: one of DynamoDB's
# biggest requests, which takes up to about 25 times its size in memory while it runs).
BIG_BODY_BUDGET = 16 * 1024 * 1024


class EngineApp:
    """The ASGI application serving one :class:`Engine`.

    ``credentials`` (access key -> secret) turns on real SigV4 verification; without it any
    signature (or none) is accepted and the region is read from the credential scope.
    ``routes`` (extra admin apps under ``/_firstwrite/``) and ``mounts`` (apps under a prefix
    such as ``"/console"``, plain or :class:`~.control.Mounted`) are composed with the admin API
    by :func:`.control.compose`, behind the guard. ``hosts`` limits the ``Host`` headers
    answered on every route (DNS rebinding); :func:`serve` and :class:`ServerThread` set it from
    the address they bind. ``allowed_origins``: the page origins a browser app may call the
    DynamoDB endpoint from (``"*"``: any), answered with DynamoDB's CORS headers (:mod:`.cors`).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        credentials: Mapping[str, str] | None = None,
        routes: Mapping[str, ASGIApp] | None = None,
        mounts: Mapping[str, ASGIApp | Mounted] | None = None,
        threads: int = DEFAULT_THREADS,
        max_body_bytes: int = MAX_BODY_BYTES,
        inline: bool | None = None,
        hosts: HostCheck | None = None,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.engine = engine
        self.cors = Cors(allowed_origins)
        self.verifier = SigV4Verifier(credentials) if credentials else None
        self.hosts = hosts
        self.sessions = Sessions()
        self.mounts = tuple(mounts or {})
        self._budget = ByteBudget(max(BIG_BODY_BUDGET, max_body_bytes))
        self.bodies = BodyReader(max_body_bytes)  # reads big bodies at a bounded pace
        self.control = control.compose(
            engine,
            routes=routes or {},
            mounts=mounts or {},
            credentials=credentials,
            verifier=self.verifier,
            sessions=self.sessions,
            hosts=hosts,
            bodies=self.bodies,
            budget=self._budget,
        )
        self.max_body_bytes = max_body_bytes
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="firstwrite-engine")
        # Where engine calls run (lanes.py). Small requests go to the lane (with durability
        # "full", one fsync per batch of calls); big bodies (screened first, screening.py) and
        # every call while faults are on to the thread pool. inline=True runs small requests on
        # the event loop (a call waiting on SQLite's lock then stalls every client);
        # inline=False sends every call to the pool.
        self._inline = inline is True
        # (Only durability "full" has anything for a batch to wait for.)
        scope = engine.storage.deferred if engine.durability == "full" else None
        self._lane = Lane(scope=scope, overflow=self._pool) if inline is None else None
        self.screener = Screener()  # decodes big bodies in a worker process first
        # What DynamoDB's endpoint answers GET / with, when a request names no host.
        self._health_host = f"dynamodb.{engine.default_region}.amazonaws.com".encode()

    def close(self) -> None:
        if self._lane is not None:
            self._lane.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.screener.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            method = scope["method"]
            if method == "POST" and path == "/":
                await self._dynamodb(scope, receive, send)
            elif path.startswith(ADMIN_PREFIX) or self._mounted(path):
                await self.control(scope, receive, send)
            elif self.hosts is not None and not self.hosts.allows(host := header(scope, b"host")):
                # The health check and every refusal below too: one Host policy for every route
                # (a load balancer's own name or address goes in allowed_hosts).
                await respond(send, *self.hosts.refusal(host).encode())
            else:
                await self._other(scope, receive, send, path, method)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _other(
        self, scope: Scope, receive: Receive, send: Send, path: str, method: str
    ) -> None:
        """Everything but ``POST /`` and the composed apps, once the host is allowed: the data
        plane at another path, CORS preflights, the health check, and the refusals."""
        if method == "POST" and header(scope, b"x-amz-target") is not None:
            # SDKs pointed at an endpoint_url with a path POST there: DynamoDB ignores it.
            await self._dynamodb(scope, receive, send)
            return
        origin = header(scope, b"origin")
        if origin is not None:
            if not self.cors.allows(origin):
                await respond(send, *self.cors.refusal(origin).encode())
                return
            if method == "OPTIONS":
                headers = [*self.cors.headers(scope, preflight=True), (b"content-length", b"0")]
                await respond(send, 200, headers, b"")
                return
            send = self.cors.sender(scope, send)
        if path == "/" and method in ("GET", "HEAD"):
            # DynamoDB's answer: "healthy: " and the host the request named.
            body = b"healthy: " + (header(scope, b"host") or self._health_host)
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", b"%d" % len(body)),
            ]
            await respond(send, 200, headers, b"" if method == "HEAD" else body)
        elif path == "/" and method == "OPTIONS":  # no Origin: no CORS headers (DynamoDB's)
            await respond(send, 200, [(b"content-length", b"0")], b"")
        elif path == "/":
            await respond(
                send,
                *problem(
                    405,
                    "Method Not Allowed",
                    f"{method} / is not supported; use POST",
                    allow="GET, HEAD, OPTIONS, POST",
                ),
            )
        else:
            await respond(send, *problem(404, "Not Found", f"No route for {method} {path}"))

    def _mounted(self, path: str) -> bool:
        return any(
            path.startswith(p) and (len(path) == len(p) or path[len(p)] == "/") for p in self.mounts
        )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _dynamodb(self, scope: Scope, receive: Receive, send: Send) -> None:
        # (A repeated header: its last value, as before; one C call rather than a loop.)
        headers = dict(scope["headers"])
        target = headers.get(b"x-amz-target")
        authorization = headers.get(b"authorization")
        content_type = headers.get(b"content-type")
        host = headers.get(b"host")
        length = headers.get(b"content-length")
        coding = headers.get(b"content-encoding")
        accept = headers.get(b"accept-encoding")  # (botocore sends "identity")
        if self.hosts is not None and not self.hosts.allows(host):
            await respond(send, *self.hosts.refusal(host).encode())
            return
        origin = headers.get(b"origin")
        if origin is not None:  # a browser's call (:mod:`.cors`)
            if not self.cors.allows(origin):
                await respond(send, *self.cors.refusal(origin).encode())
                return
            send = self.cors.sender(scope, send)
        if self.verifier is not None:
            # What the headers tell of the credentials (the Authorization header's parameters,
            # the date, the scope, the access key) is judged before a byte of the body is read:
            # a caller nobody authenticated gets DynamoDB's error at once, and the connection
            # closes (connection.py) rather than read a body nobody will use. The signature
            # itself covers the body's hash: it is checked once the body is in (_answer).
            try:
                self.verifier.check_headers(scope["headers"])
            except DynamoDBError as refused:
                start, payload = _error_answer(refused)
                await send(start)
                await send({"type": "http.response.body", "body": payload})
                return
        # A big body (or a chunked one, of unknown size) is paced (bodies.py), waits for room in
        # the budget before it is read, and is answered on the thread pool.
        size = None if length is None or len(length) > 12 else int(length)
        if size is None:
            big = length is not None or b"transfer-encoding" in headers
        else:
            big = size > BIG_BODY_BYTES
        big = big or coding is not None  # a compressed body may decode to the limit
        over = (size is None and length is not None) or (size or 0) > self.max_body_bytes
        body: bytes | bytearray | None = None
        if over or (
            content_type is not None
            and content_type not in JSON_CONTENT_TYPES  # (the common case: exactly one of them)
            and content_type.partition(b";")[0].strip().lower() not in JSON_CONTENT_TYPES
        ):
            # Refused whatever it holds (an empty body aside): read, paced, and dropped first.
            drained = await self.bodies.drain(receive, big=big)
            if over or drained > self.max_body_bytes:
                await self._too_large(send)
                return
            if drained:  # what DynamoDB sends for a body that is not JSON-typed
                request_id = (b"x-amzn-requestid", new_request_id().encode())
                await respond(send, 404, [request_id, *_XML_HEADERS], _XML_UNKNOWN)
                return
            body = b""
        granted = 0
        try:
            if body is None:
                if big:
                    whole = self.max_body_bytes if size is None or coding else size
                    granted = await self._budget.acquire(whole)
                body = await self.bodies.read(receive, size, big=big)
                if body is None:
                    await self._too_large(send)
                    return
            lane = self._lane
            small = not big and not self.engine.hooks.interceptors
            if small and self._inline:
                start, payload = self._answer(scope, target, authorization, body, coding)
            elif small and lane is not None and not lane.stuck():
                try:
                    start, payload = await lane.submit(
                        self._answer, scope, target, authorization, body, coding
                    )
                except DynamoDBError as error:  # the lane's batch could not be made durable
                    start, payload = _error_answer(error)
            else:
                call = functools.partial(self._answer, scope, target, authorization, body, coding)
                if big and body and coding is None:  # screened in a worker process first
                    call = functools.partial(self.screener.answer, self.engine, body, target, call)
                start, payload = await asyncio.get_running_loop().run_in_executor(self._pool, call)
            if accept is not None and len(payload) > response_coding.THRESHOLD:
                start, payload = await self._encoded(scope, start, payload)
            await send(start)
            await send({"type": "http.response.body", "body": payload})
        finally:
            if granted:
                self._budget.release(granted)

    async def _encoded(self, scope: Scope, start: Message, payload: bytes) -> tuple[Message, bytes]:
        """The answer compressed as the request's first ``Accept-Encoding`` asks (the only one
        DynamoDB reads), on the thread pool; as it is if it asks for no coding served."""
        coding = response_coding.chosen_coding(header(scope, b"accept-encoding") or b"")
        if coding is None:
            return start, payload
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, response_coding.encoded, start, payload, coding
        )

    async def _too_large(self, send: Send) -> None:
        await respond(
            send,
            *problem(
                413,
                "Payload Too Large",
                f"Request bodies are limited to {self.max_body_bytes} bytes",
            ),
        )

    def _answer(
        self,
        scope: Scope,
        target: bytes | None,
        authorization: bytes | None,
        body: bytes | bytearray,
        coding: bytes | None,
        decode: Decode | None = None,
    ) -> tuple[Message, bytes]:
        # Runs on the lane or the thread pool: everything that costs CPU or blocks, so that the
        # event loop only moves bytes.
        verifier = self.verifier
        target_text = None if target is None else target.decode("latin-1")
        decoded: bytes | bytearray | None = body
        signed = b""
        if verifier is not None or coding is not None:
            signed = bytes(body)  # (a copy only of a big body, read in place: bodies.py)
            decoded, refused = decoded_body(scope, signed, self.max_body_bytes)
            if refused is not None:
                return refused
        if target == _DESCRIBE_ENDPOINTS:
            # Answered with the address this call reached. Set in the context of the thread (or
            # task) answering it, before every DescribeEndpoints the server answers: nothing
            # else reads it, so it is not reset.
            host = header(scope, b"host")
            note_served_address(None if host is None else host.decode("latin-1"))
        if verifier is None:
            region = region_from_authorization(authorization)
            status, payload = wire_call(self.engine, target_text, decoded, region, decode=decode)
        else:

            def authorize() -> str:
                return verifier.verify(
                    scope["method"],
                    scope.get("raw_path") or scope["path"].encode(),
                    scope.get("query_string", b""),
                    scope["headers"],
                    signed,
                )

            caller = access_key_of(authorization)  # verified by authorize() before it is used
            status, payload = wire_call(
                self.engine, target_text, decoded, None, authorize, decode, caller
            )
        if status == 200 and target in _EMPTY_ANSWERS:
            payload = b""
        start = {
            "type": "http.response.start",
            "status": status,
            "headers": response_headers(payload),
        }
        return start, payload


def _error_answer(error: DynamoDBError) -> tuple[Message, bytes]:
    payload = dumps(error.wire_body())
    headers = response_headers(payload)
    return {"type": "http.response.start", "status": error.status, "headers": headers}, payload


_DESCRIBE_ENDPOINTS = b"DynamoDB_20120810.DescribeEndpoints"
# "If the action is successful, the service sends back an HTTP 200 response with an empty HTTP
# body" (the API reference of TagResource and UntagResource): no "{}" either.
_EMPTY_ANSWERS = frozenset({b"DynamoDB_20120810.TagResource", b"DynamoDB_20120810.UntagResource"})
_XML_UNKNOWN = b"<UnknownOperationException/>\n"
_XML_HEADERS = [
    (b"x-amz-crc32", b"%d" % zlib.crc32(_XML_UNKNOWN)),
    (b"content-length", b"%d" % len(_XML_UNKNOWN)),
]


def create_app(
    engine: Engine,
    *,
    credentials: Mapping[str, str] | None = None,
    routes: Mapping[str, ASGIApp] | None = None,
    mounts: Mapping[str, ASGIApp | Mounted] | None = None,
    threads: int = DEFAULT_THREADS,
    inline: bool | None = None,
    hosts: HostCheck | None = None,
    allowed_origins: Iterable[str] = (),
) -> EngineApp:
    """The ASGI app for ``engine`` (mount it in any ASGI server); see :class:`EngineApp`."""
    return EngineApp(
        engine,
        credentials=credentials,
        routes=routes,
        mounts=mounts,
        threads=threads,
        inline=inline,
        hosts=hosts,
        allowed_origins=allowed_origins,
    )


# --- running it ------------------------------------------------------------------------------


def serve(
    engine: Engine,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    credentials: Mapping[str, str] | None = None,
    routes: Mapping[str, ASGIApp] | None = None,
    mounts: Mapping[str, ASGIApp | Mounted] | None = None,
    threads: int = DEFAULT_THREADS,
    inline: bool | None = None,
    ready: Callable[[str], None] | None = None,
    allowed_hosts: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    allowed_origins: Iterable[str] = (),
) -> None:
    """Serve ``engine`` until SIGINT/SIGTERM (when run on the main thread), then return; from
    then on this process ignores SIGINT/SIGTERM (the caller is closing up; install your own
    handlers with :func:`signal.signal` to take them back).

    ``port=0`` picks a free port; ``ready(url)`` is called once the socket accepts requests.
    Shutdown is graceful: in-flight requests finish, the engine is left open for the caller.
    Bound to a loopback address, the server answers loopback host names only, plus
    ``allowed_hosts`` (``["*"]``: any); see :class:`~firstwrite.engine.server.origins.HostCheck`.
    ``allowed_origins``: the web page origins whose browser apps may call the DynamoDB endpoint
    (``["*"]``: every origin); see :class:`~firstwrite.engine.server.cors.Cors`.
    ``limits``: read timeouts and the connection limit (:class:`~.connection.Limits`; the
    default limit is what the file descriptor limit, raised to its hard maximum, leaves after
    the engine's own). Other arguments: :class:`EngineApp`.
    """
    connection.raise_file_limit()
    app = create_app(
        engine,
        credentials=credentials,
        routes=routes,
        mounts=mounts,
        threads=threads,
        inline=inline,
        hosts=HostCheck(host, allowed_hosts),
        allowed_origins=allowed_origins,
    )
    config = runner.uvicorn_config(app, host, port, limits, engine.clock.now)
    sock = runner.bind(host, port)
    url = runner.url_of(sock)
    server = runner.server_class()(config)
    if ready is not None:
        server.ready_callback = lambda: ready(url)

    try:
        runner.serve_until_signalled(server, sock)
    finally:
        sock.close()
        app.close()


class ServerThread:
    """Serve an engine on a background thread: ``with ServerThread(engine) as url: ...``.

    Binds (by default) a free loopback port before starting, so the URL is known and the
    server is accepting connections by the time ``__enter__`` returns. Arguments as
    :func:`serve`.
    """

    def __init__(
        self,
        engine: Engine,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        credentials: Mapping[str, str] | None = None,
        routes: Mapping[str, ASGIApp] | None = None,
        mounts: Mapping[str, ASGIApp | Mounted] | None = None,
        threads: int = DEFAULT_THREADS,
        inline: bool | None = None,
        startup_timeout: float = 30.0,
        allowed_hosts: Iterable[str] = (),
        limits: Limits = DEFAULT_LIMITS,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = create_app(
            engine,
            credentials=credentials,
            routes=routes,
            mounts=mounts,
            threads=threads,
            inline=inline,
            hosts=HostCheck(host, allowed_hosts),
            allowed_origins=allowed_origins,
        )
        self._config = runner.uvicorn_config(self.app, host, port, limits, engine.clock.now)
        self._server = runner.server_class()(self._config)
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
            with asyncio.Runner(loop_factory=runner.new_loop) as loop_runner:
                loop_runner.run(self._server.serve(sockets=[self._sock]))
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    def start(self) -> str:
        self._sock = runner.bind(self._config.host, self._config.port)
        self.url = runner.url_of(self._sock)
        self._thread = threading.Thread(target=self._run, name="firstwrite-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._startup_timeout) or self._error is not None:
            self.stop()
            raise RuntimeError(f"server failed to start: {self._error!r}")
        return self.url

    def stop(self) -> None:
        if not self._server.should_exit:
            runner.request_exit(self._server)
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
