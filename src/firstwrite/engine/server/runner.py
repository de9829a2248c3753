"""uvicorn, set up the way the engine's server runs.

The pieces :func:`.app.serve` and :class:`.app.ServerThread` share: configuration, binding, the
loop, the server class."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from . import connection
from .connection import Limits

if TYPE_CHECKING:
    import uvicorn

    from .asgi import ASGIApp, Receive, Scope, Send

__all__ = [
    "ServedApp",
    "bind",
    "config",
    "new_loop",
    "request_exit",
    "serve_until_signalled",
    "server_class",
    "url_of",
    "uvicorn_config",
]


class ServedApp(Protocol):
    """What the runner needs of the app it serves: an ASGI app that says how many threads of
    its own may open the database (:class:`~.app.EngineApp`)."""

    @property
    def threads(self) -> int: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


def uvicorn_config(
    app: ServedApp, host: str, port: int, limits: Limits, clock: Callable[[], float]
) -> uvicorn.Config:
    """:func:`config` for an engine's app, its answers dated from ``clock`` (the engine's)."""
    # Threads that may open the database: the engine pool, Starlette's (admin), the lane, the
    # TTL sweeper and replication.
    return config(app, limits, app.threads + 40 + 4, clock, host=host, port=port)


def config(
    app: ASGIApp,
    limits: Limits,
    threads: int,
    clock: Callable[[], float] = time.time,
    **where: Any,
) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` as the engine's server runs: its HTTP/1.1 protocol
    and limits (:mod:`.connection`, ``threads`` of the app's own keeping descriptors), answers
    dated from ``clock``, uvloop, no lifespan, no proxy headers, quiet logs. ``where``:
    ``host`` and ``port``, if it binds."""
    import uvicorn

    http: Any = connection.protocol_class(limits, limits.connections(threads), clock) or "auto"
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:  # pragma: no cover - no uvloop on Windows
        loop = "asyncio"
    return uvicorn.Config(
        app,
        **where,
        loop=loop,
        http=http,
        # Off: the app has nothing to start or stop, and a lifespan task is one more thing a
        # signal can leave behind to be cancelled (and logged) at exit.
        lifespan="off",
        access_log=False,
        log_config=None,  # never reconfigure the host program's logging
        log_level="warning",
        server_header=False,
        date_header=True,
        # The server faces its callers: X-Forwarded-For is the caller's own word (it made a new
        # address, and a fresh login-throttle count, of every guess), and the middleware that
        # reads it cost every request (every header of it, whatever arrives).
        proxy_headers=False,
        backlog=2048,
        timeout_keep_alive=limits.keep_alive_timeout,  # type: ignore[arg-type]
        timeout_graceful_shutdown=10,
    )


LISTEN_ERROR = "cannot listen on "


def listen_error(host: str, port: int, errno: int | None, what: str = "") -> OSError:
    """``cannot listen on HOST:PORT[ what]: <reason>``: which address failed, and (``what``)
    whose it is or which option moves it, for a server that binds more than one port."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    reason = os.strerror(errno) if errno else "cannot bind"
    return OSError(errno, f"{LISTEN_ERROR}{where}{' ' + what if what else ''}: {reason}")


def bind(host: str, port: int, what: str = "") -> socket.socket:
    # Bound here rather than by uvicorn, whose bind_socket() calls sys.exit() on failure.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:  # e.g. the port is taken: say which address
        sock.close()
        raise listen_error(host, port, exc.errno, what) from None
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


_SHUTDOWN_POLL = 0.005  # seconds between looks at what a stopping server still waits for


def server_class() -> Any:
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn's server, minus its signal handling (its owner decides) plus a ready hook."""

        ready_callback: Callable[[], None] | None = None
        tick = 0.1  # seconds between uvicorn's housekeeping ticks (its own interval)
        _loop: asyncio.AbstractEventLoop | None = None
        _wake: asyncio.Event | None = None

        async def main_loop(self) -> None:
            # uvicorn's loop, woken at once by wake(): uvicorn looks at should_exit only on
            # its 0.1 s tick, which every stop of a server thread used to wait for.
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            counter = 0
            should_exit = await self.on_tick(counter)
            while not should_exit:
                counter = (counter + 1) % 864000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.tick)
                should_exit = await self.on_tick(counter)

        def wake(self) -> None:
            """Have the loop look at ``should_exit`` now (from any thread)."""
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                with contextlib.suppress(RuntimeError):  # the loop is closed: it has exited
                    loop.call_soon_threadsafe(wake.set)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # uvicorn's shutdown (0.55), waiting for the same things (open connections asked
            # to close, then running tasks, then the listeners, up to the graceful timeout)
            # but looking every few milliseconds: uvicorn sleeps 0.1 s first whatever is open,
            # and then 0.1 s between looks, which every stop of a server thread paid.
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            for open_connection in list(self.server_state.connections):
                open_connection.shutdown()
            state = self.server_state
            try:
                async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                    while (state.connections or state.tasks) and not self.force_exit:
                        await asyncio.sleep(_SHUTDOWN_POLL)
                    for server in self.servers:
                        await server.wait_closed()
            except TimeoutError:
                for task in state.tasks:
                    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
            if not self.force_exit:
                await self.lifespan.shutdown()

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and self.ready_callback is not None:
                self.ready_callback()

    return _Server


def request_exit(server: uvicorn.Server) -> None:
    """Ask ``server`` (of :func:`server_class`) to exit now; asked again, to stop waiting for
    in-flight requests too. Safe from any thread."""
    if server.should_exit:
        server.force_exit = True  # a second signal: stop waiting for in-flight requests
    server.should_exit = True
    server.wake()  # type: ignore[attr-defined]


def serve_until_signalled(server: uvicorn.Server, sock: socket.socket) -> None:
    """Run ``server`` on ``sock`` on a new event loop until it exits; on the main thread,
    SIGINT/SIGTERM ask it to (a second one stops waiting for in-flight requests), and once it
    has stopped they are ignored for the rest of the process (its owner closing up)."""

    async def main() -> None:
        if threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, request_exit, server)
        await server.serve(sockets=[sock])

    with asyncio.Runner(loop_factory=new_loop) as loop_runner:
        loop_runner.run(main())
    if threading.current_thread() is threading.main_thread():
        # The loop's handlers went with it (back to the default action), and the owner still
        # closes its engine, then the interpreter exits. A stop signal now (a supervisor's
        # second SIGTERM, a second Ctrl-C) finds the server stopped: ignored, not a kill
        # mid-close with a signal's exit status. SIG_IGN, unlike a Python handler, outlasts
        # the interpreter's own finalization.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
