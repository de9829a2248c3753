"""The servers the project starts besides ``firstwrite engine serve``, and every route of each,
for the hostile proofs.

* ``demo``: a real ``firstwrite demo`` process (its payments API with the console mounted).
* ``console-app``: the console mounted in a user's own Starlette app beside the engine's
  endpoint, exactly as docs/console.md shows, served by plain uvicorn in a subprocess
  (:data:`CONSOLE_APP`: the user's file).

:func:`routes` enumerates the routes from the app objects themselves (Starlette's route table,
mounts followed), so a route added to the demo or the console is attacked without anyone
listing it here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine_process import start_demo

CONSOLE_APP = """
import socket, sys

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from firstwrite.console import create_console
from firstwrite.engine import Engine, create_app

engine = Engine(sys.argv[1])
console = create_console(engine)  # a fresh database gets the example records
app = Starlette(routes=[Mount("/console", app=console), Mount("", app=create_app(engine))])

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(1024)
print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""

SERVERS = ("demo", "console-app")


@dataclass(frozen=True)
class KnownLimit:
    """What an attack is known to cost a server beyond the proof's own bounds, as bounds of
    its own (still asserted, so a leak or a stall past them fails): the growth of its RSS
    (MiB, after the attack over before) and the other client's attacked p99 over its baseline
    (quiet p99 x machine ratio). ``None``: the proof's own bound."""

    rss_growth_mib: float | None = None
    p99_over_baseline: float | None = None
    # A cost per attack request (MiB), for growth that follows the attack's volume: the bound
    # is then that times the requests answered, at least RSS_FLOOR_MIB, at most rss_growth_mib.
    rss_mib_per_request: float | None = None

    def rss_bound_mib(self, requests: int) -> float | None:
        """The RSS growth allowed after ``requests`` attack requests (``None``: the proof's)."""
        if self.rss_growth_mib is None or self.rss_mib_per_request is None:
            return self.rss_growth_mib
        return min(self.rss_growth_mib, max(RSS_FLOOR_MIB, self.rss_mib_per_request * requests))


RSS_FLOOR_MIB = 64  # what the first few attack requests may cost (arenas, caches)


# The console in a user's app runs under the user's server: plain uvicorn (httptools) has no
# limit on a request's head, reads 1-byte chunks one by one at full speed, and keeps what a
# flood made it allocate. Those costs are uvicorn's, not the console's (which answers every
# route within its own limits, no 5xx; docs/console.md says how to serve it with the engine's
# limits instead). Measured (docs/reliability.md, "The console under a user's plain uvicorn"):
# bounds about twice the worst seen, per form (short, long).
PLAIN_UVICORN = {"console-app": "the user's plain uvicorn"}
PLAIN_UVICORN_LIMITS: dict[str, dict[str, tuple[KnownLimit, KnownLimit]]] = {
    "console-app": {
        # heads: RSS +265 MiB over ~1,500 requests and +26 over 99 (short), +509 over 183,000
        # (long, 2026-12-05): at most 0.26 MiB a request, and saturating. p99 in the short
        # form, whose p99 is one of a few slowest calls, on a loaded machine (2026-12-07):
        # 4.4x the baseline in CI's full run (bound 4.4x), 2.5-5.3x quiet with two busy
        # loops beside it: uvicorn parses each 100 KiB head on its event loop; the long
        # form's 2x held
        "heads": (
            KnownLimit(rss_growth_mib=600, rss_mib_per_request=1.0, p99_over_baseline=10),
            KnownLimit(rss_growth_mib=1024, rss_mib_per_request=1.0),
        ),
        # chunks: p99 7.1x the baseline (long: 44.9x quiet, machine 6.3x), 8.5x and 12.8x
        # (short, load 11-19); RSS +1 to +20 MiB
        "chunks": (
            KnownLimit(rss_growth_mib=48, p99_over_baseline=24),
            KnownLimit(rss_growth_mib=48, p99_over_baseline=24),
        ),
        # bodies: RSS +34-36 MiB (what the 16 MiB bodies made it allocate stays)
        "bodies": (KnownLimit(rss_growth_mib=72), KnownLimit(rss_growth_mib=72)),
    }
}


def known_limit(name: str, kind: str, long: bool) -> KnownLimit:
    """The bounds of ``kind`` of attack on server ``name`` beyond the proof's own."""
    short_and_long = PLAIN_UVICORN_LIMITS.get(name, {}).get(kind)
    if short_and_long is None:
        return KnownLimit()
    return short_and_long[long]


@dataclass
class App:
    """A running server: its URL, process, and the routes it serves as ``(method, path)``."""

    name: str
    url: str
    process: subprocess.Popen[str]
    routes: tuple[tuple[str, str], ...]
    output: list[str]

    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        return host, int(port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return "".join(self.output)


def _sample(path: str) -> str:
    """A concrete path for a route's template (``{id}`` -> an existing-looking value)."""
    return re.sub(r"\{[^}]+\}", "acct_alice", path)


def routes_of(app: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Every ``(method, path)`` an ASGI app's route table serves, mounts followed; an app with
    no route table (the engine's endpoint, static files) is one route, with GET and POST."""
    while not hasattr(app, "routes") and hasattr(app, "app"):
        app = app.app  # middleware
    table = getattr(app, "routes", None)
    if table is None:
        path = (prefix or "") + "/"
        return [("GET", path), ("POST", path)]
    found: list[tuple[str, str]] = []
    for route in table:
        path = getattr(route, "path", "")
        methods = getattr(route, "methods", None)
        if methods is not None:  # a Route
            for method in sorted(methods - {"HEAD"}) or ["GET"]:
                found.append((method, _sample(prefix + path) or "/"))
        else:  # a Mount
            found.extend(routes_of(route.app, prefix + path))
    return found


def demo_routes() -> list[tuple[str, str]]:
    """The demo's app object (:func:`firstwrite.demo.app.create_app`, the console mounted as
    ``firstwrite demo`` mounts it), built over a stand-in client only to read its routes."""
    from firstwrite.console import create_console
    from firstwrite.demo.app import create_app
    from firstwrite.engine import Engine

    with Engine(None) as engine:
        app = create_app(
            object(), guard=_NoGuard(), mounts={"/console": create_console(engine, seed=False)}
        )
        return routes_of(app)


def console_app_routes() -> list[tuple[str, str]]:
    """The user's app of :data:`CONSOLE_APP`, built the same way, for its routes."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from firstwrite.console import create_console
    from firstwrite.engine import Engine, create_app

    with Engine(None) as engine:
        app = Starlette(
            routes=[
                Mount("/console", app=create_console(engine, seed=False)),
                Mount("", app=create_app(engine)),
            ]
        )
        return routes_of(app)


class _NoGuard:
    is_async = True


def _start_console_app(folder: Path) -> tuple[subprocess.Popen[str], str, list[str]]:
    script = folder / "user_app.py"
    script.write_text(CONSOLE_APP)
    process = subprocess.Popen(
        [sys.executable, str(script), str(folder / "user.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    output: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if line.startswith("listening on"):
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(60)
    match = re.search(r"listening on (http://\S+)", "".join(output))
    if match is None:
        process.kill()
        raise RuntimeError(f"the user's app did not start: {output}")
    return process, match.group(1), output


def start(name: str, folder: Path) -> App:
    """Start the server ``name`` (one of :data:`SERVERS`) with its files under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if name == "demo":
        demo = start_demo(folder / "demo.db")
        output = list(demo.banner)
        assert demo.process.stdout is not None

        def drain() -> None:  # (its log, read for tracebacks; the pipe must not fill)
            assert demo.process.stdout is not None
            for line in demo.process.stdout:
                output.append(line)

        threading.Thread(target=drain, daemon=True).start()
        return App(name, demo.url, demo.process, tuple(demo_routes()), output)
    process, url, output = _start_console_app(folder)
    return App(name, url, process, tuple(console_app_routes()), output)
