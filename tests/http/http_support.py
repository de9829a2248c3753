"""Helpers for the middleware tests: real servers on loopback and guards on an engine file.

``serve_asgi(app)`` runs an ASGI app in uvicorn on a free loopback port (a thread of this
process, so the test can look at the app's recorder); ``serve_wsgi(app)`` runs a WSGI app in
werkzeug's threaded server. Both yield the base URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

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
