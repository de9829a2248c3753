"""Helpers for the middleware tests: real servers on loopback and guards on an engine file.

``serve_asgi(app)`` runs an ASGI app in uvicorn on a free loopback port (a thread of this
process, so the test can look at the app's recorder); ``serve_wsgi(app)`` runs a WSGI app in
werkzeug's threaded server. Both yield the base URL. ``asgi_request`` and ``wsgi_request``
call an app directly, without a server: one POST with an ``Idempotency-Key``, the answer's
status, headers (lower-case names) and body (or each piece handed to ``on_body``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple
from wsgiref.util import setup_testing_defaults

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, lifespan="off", log_level="warning", access_log=False, log_config=None
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@contextlib.contextmanager
def serve_wsgi(app: Any) -> Iterator[str]:
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    # serve_forever looks for shutdown() every poll_interval (0.5 s by default)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(30)
        server.server_close()


class ThreadedClient:
    """An asyncio facade over a boto3 client (each call in a worker thread), standing in for
    an aiobotocore client: what ``AsyncIdempotency`` awaits."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.meta = client.meta
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        async def call(**kwargs: Any) -> Any:
            return await asyncio.to_thread(lambda: method(**kwargs))

        return call


def guards(client: Any, table: str, **settings: Any) -> tuple[Any, Any]:
    """(sync guard, async guard) on one table through ``client`` (created if absent)."""
    from firstwrite.idempotency import AsyncIdempotency, Idempotency, IdempotencyConfig

    config = IdempotencyConfig(table_name=table, **settings)
    sync = Idempotency(config, client=client)
    sync.ensure_table()
    return sync, AsyncIdempotency(config, client=ThreadedClient(client))


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes
    pieces: list[bytes]  # the body as the app sent it (empty when ``on_body`` took it)
    more_body: list[bool]  # ASGI: each body message's ``more_body`` (WSGI: empty)


def _kept(
    on_body: Callable[[bytes], object] | None, pieces: list[bytes]
) -> Callable[[bytes], object]:
    return on_body if on_body is not None else pieces.append


def asgi_request(
    app: Any,
    path: str,
    key: str,
    *,
    body: bytes = b"{}",
    on_body: Callable[[bytes], object] | None = None,
) -> Answer:
    """POST ``path`` straight through an ASGI app (module docstring)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"idempotency-key", key.encode()), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    start: dict[str, Any] = {}
    pieces: list[bytes] = []
    more: list[bool] = []
    keep = _kept(on_body, pieces)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            keep(message.get("body", b""))
            more.append(message.get("more_body", False))

    asyncio.run(app(scope, receive, send))
    headers = {n.decode().lower(): v.decode() for n, v in start["headers"]}
    return Answer(start["status"], headers, b"".join(pieces), pieces, more)


def wsgi_request(
    app: Any,
    path: str,
    key: str,
    *,
    body: bytes = b"{}",
    on_body: Callable[[bytes], object] | None = None,
) -> Answer:
    """POST ``path`` straight through a WSGI app (module docstring)."""
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ.update(
        REQUEST_METHOD="POST",
        PATH_INFO=path,
        CONTENT_TYPE="application/json",
        CONTENT_LENGTH=str(len(body)),
        HTTP_IDEMPOTENCY_KEY=key,
    )
    environ["wsgi.input"] = io.BytesIO(body)
    got: dict[str, Any] = {}
    pieces: list[bytes] = []
    keep = _kept(on_body, pieces)

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        got["status"], got["headers"] = int(status.split()[0]), headers
        return keep

    result = app(environ, start_response)
    try:
        for piece in result:
            keep(piece)
    finally:
        getattr(result, "close", lambda: None)()
    headers = {n.lower(): v for n, v in got["headers"]}
    return Answer(got["status"], headers, b"".join(pieces), pieces, [])
