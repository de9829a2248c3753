"""Fixtures for the console tests: a real engine on a file, the console mounted at ``/console``
in front of the engine's own HTTP app, served by uvicorn on loopback.

``served(engine, console=None, wrap=None, alone=False, credentials=None)`` starts one such
server (``alone``: the console by itself, at the root; ``credentials``: sign-in required) and
returns it;
``console_server`` is one on a fresh database for the module's tests. ``http`` is an httpx
client of it. When the engine's server gains its ``mounts=`` argument the fixture mounts the
console that way; until then it composes the two apps with a Starlette ``Mount``.
"""

from __future__ import annotations

import inspect
import json
import secrets
import socket
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from firstwrite.console import PUBLIC_PATHS, create_console
from firstwrite.engine import Engine, create_app

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
    """The engine's HTTP app with the console mounted at /console, and how to close it.

    Uses the engine server's own mounts (and its sign-in, with ``credentials``) when it has
    them; until then, a Starlette ``Mount`` and :class:`SessionAuth` in its place."""
    if "mounts" in inspect.signature(create_app).parameters:
        from firstwrite.engine.server import Mounted  # type: ignore[attr-defined]

        mounted = Mounted(console, public=PUBLIC_PATHS)
        app = create_app(engine, credentials=credentials, mounts={"/console": mounted})  # type: ignore[call-arg]
        return app, app.close
    engine_app = create_app(engine)
    outer: ASGIApp = Starlette(routes=[Mount("/console", app=console), Mount("", app=engine_app)])
    if credentials:
        outer = SessionAuth(outer, credentials)
    return outer, engine_app.close


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
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
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
            server.should_exit = True
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


class SessionAuth:
    """A stand-in for the engine server's sign-in for browsers (``--require-auth``), used until
    the server has its own: ``POST /_firstwrite/session`` with a key pair as JSON sets an
    HttpOnly, SameSite=Strict cookie (``DELETE`` ends it); without one, the console answers
    401 except on its public paths; the caller goes in ``scope["firstwrite.principal"]``."""

    def __init__(self, app: Any, credentials: Mapping[str, str]) -> None:
        self.app, self.credentials = app, dict(credentials)
        self.sessions: dict[str, str] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        cookies = dict(
            part.strip().split("=", 1)
            for part in headers.get("cookie", "").split(";")
            if "=" in part
        )
        token = cookies.get("fw-session")
        if path == "/_firstwrite/session" and method == "DELETE":
            self.sessions.pop(token or "", None)
            await _respond(send, 204, b"", [])
            return
        if path == "/_firstwrite/session" and method == "POST":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            given = json.loads(body or b"{}")
            key = given.get("access_key_id")
            if key in self.credentials and given.get("secret_access_key") == self.credentials[key]:
                token = secrets.token_hex(16)
                self.sessions[token] = key
                cookie = f"fw-session={token}; HttpOnly; SameSite=Strict; Path=/"
                await _respond(send, 204, b"", [(b"set-cookie", cookie.encode())])
            else:
                await _problem(send, 401, "not a key pair this server knows")
            return
        signed_in = token in self.sessions
        inner = path[len("/console") :]
        public = any(inner.startswith(p) for p in PUBLIC_PATHS)
        if path.startswith("/console") and not signed_in and not public:
            await _problem(send, 401, "sign in first")
            return
        if signed_in:
            scope["firstwrite.principal"] = types.SimpleNamespace(
                access_key_id=self.sessions[token or ""]
            )
        await self.app(scope, receive, send)


async def _respond(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _problem(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"title": "Unauthorized", "status": status, "detail": detail}).encode()
    await _respond(send, status, body, [(b"content-type", b"application/problem+json")])
