"""Fixtures for the console tests: a real engine on a file, the console mounted at ``/console``
in front of the engine's own HTTP app, served by uvicorn on loopback.

``served(engine, console=None, wrap=None, alone=False, credentials=None)`` starts one such
server (``alone``: the console by itself, at the root; ``credentials``: sign-in required) and
returns it;
``console_server`` is one on a fresh database for the test. ``http`` is an httpx client of
it. The console is mounted the way the engine's server mounts it (``mounts=``), in the engine's
own uvicorn subclass (which stops at once when asked).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from firstwrite.console import PUBLIC_PATHS, create_console
from firstwrite.engine import Engine, Mounted, create_app
from firstwrite.engine.server import runner

ASGIApp = Any


@dataclass
class Server:
    url: str
    engine: Engine
    console: Any

    @property
    def console_url(self) -> str:
        return self.url + "/console"


def compose(
    engine: Engine, console: ASGIApp, credentials: Mapping[str, str] | None = None
) -> tuple[ASGIApp, Callable[[], None]]:
    """The engine's HTTP app with the console mounted at /console (and the server's own
    sign-in, with ``credentials``), and how to close it."""
    mounted = Mounted(console, public=PUBLIC_PATHS)
    app = create_app(engine, credentials=credentials, mounts={"/console": mounted})
    return app, app.close


@pytest.fixture
def served() -> Iterator[Callable[..., Server]]:
    stops: list[Callable[[], None]] = []

    def start(
        engine: Engine,
        console: ASGIApp | None = None,
        wrap: Callable[[ASGIApp], ASGIApp] | None = None,
        alone: bool = False,
        credentials: Mapping[str, str] | None = None,
    ) -> Server:
        console = console if console is not None else create_console(engine)
        app, close = (console, lambda: None) if alone else compose(engine, console, credentials)
        if wrap is not None:
            app = wrap(app)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        # The engine's uvicorn subclass, as `firstwrite engine serve` runs the console: it
        # stops as soon as asked instead of on uvicorn's 0.1 s tick.
        server = runner.server_class()(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="console-server", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the console server did not start")
            time.sleep(0.01)

        def stop() -> None:
            runner.request_exit(server)
            thread.join(30)
            sock.close()
            close()

        stops.append(stop)
        return Server(f"http://127.0.0.1:{sock.getsockname()[1]}", engine, console)

    yield start
    for stop in reversed(stops):
        stop()


@pytest.fixture
def console_engine(tmp_path: Path) -> Iterator[Engine]:
    with Engine(tmp_path / "console.db") as engine:
        yield engine


@pytest.fixture
def console_server(served: Callable[..., Server], console_engine: Engine) -> Server:
    return served(console_engine)


@pytest.fixture
def http(console_server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console_server.console_url, timeout=60) as client:
        yield client


def post_json(client: httpx.Client, path: str, payload: Any, **headers: str) -> httpx.Response:
    """A same-origin JSON POST, as the console's own pages send it."""
    origin = str(client.base_url.copy_with(path="/")).rstrip("/")
    return client.post(
        path,
        json=payload,
        headers={"Origin": origin, "Sec-Fetch-Site": "same-origin", **headers},
    )


LONG_KEY = "order-2026-12-04-" + "7f3c9a1e" * 6 + "-try-3"  # 71 characters


def store_http_replies(engine: Engine, table: str = "http-replies") -> str:
    """Records of the HTTP middleware (its own stored form) in ``table``, one under a
    71-character key; returns the table's name."""
    from firstwrite.engine import local_client
    from firstwrite.http import HttpConfig
    from firstwrite.http.core import Core
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    assert len(LONG_KEY) == 71
    guard = Idempotency(
        IdempotencyConfig(table_name=table, scope="POST /charges"), client=local_client(engine)
    )
    guard.ensure_table()
    core = Core(HttpConfig())
    for n, key in enumerate((LONG_KEY, "short-key")):
        body = json.dumps({"charge": f"ch_{n}", "amount": 1999, "currency": "eur"}).encode()
        stored = core.stored_form(
            201, [(b"content-type", b"application/json"), (b"location", b"/charges/1")], body
        )
        guard.run(key, lambda stored=stored: stored)
    return table
