"""Real ``firstwrite engine serve`` and ``firstwrite demo`` subprocesses for tests: start them,
wait for them, stop them.

A module of its own, not ``conftest``: test modules import these by name, and with several
``conftest.py`` files in package-less test folders (tests/http has no ``__init__``) the name
``conftest`` may resolve to another folder's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

READY_PREFIX = "firstwrite engine listening on "
SERVER_START_TIMEOUT = 60.0


class KillSwitch:
    """When the server under a load was SIGKILLed, for the load's threads to tell a failure the
    kill caused from one before it (a real error the test must report).

    :func:`sigkill` records the instant just before the signal, and sets the switch (stop) once
    the process is dead: a failure seen at or after the instant is the kill's, one before it is
    unexpected, with no window where either is taken for the other."""

    def __init__(self) -> None:
        self._at_ns: int | None = None
        self._stopped = threading.Event()

    def explains_a_failure_now(self) -> bool:
        """Whether a failure seen now came after the kill (the caller just caught it)."""
        at = self._at_ns
        return at is not None and time.monotonic_ns() >= at

    def is_set(self) -> bool:
        return self._stopped.is_set()

    def wait(self, timeout: float) -> bool:
        return self._stopped.wait(timeout)

    def set(self) -> None:
        self._stopped.set()


def sigkill(process: subprocess.Popen[str], *switches: KillSwitch) -> None:
    """SIGKILL ``process`` and wait for it; each switch gets the instant (before the signal)
    and is set (after the process is gone)."""
    at = time.monotonic_ns()
    for switch in switches:
        switch._at_ns = at
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(30) == -signal.SIGKILL
    for switch in switches:
        switch.set()


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[str]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal the server and wait; returns its exit status (killed after ``timeout``)."""
        return stop_server(self, sig, timeout)


def start_server(db_path: Path, *extra_args: str, log_path: Path | None = None) -> HttpServer:
    """Start ``firstwrite engine serve --port 0`` and wait until ``GET /`` answers."""
    log_path = log_path or db_path.with_suffix(".log")
    log_file = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "firstwrite.cli",
            "engine",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--db",
            str(db_path),
            *extra_args,
        ],
        stdout=subprocess.PIPE,
        stderr=log_file,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log_file.close()
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.append(process.stdout.readline() if process.stdout else ""),
        daemon=True,
    )
    reader.start()
    reader.join(SERVER_START_TIMEOUT)
    line = lines[0] if lines else ""
    if not line.startswith(READY_PREFIX):
        process.kill()
        process.wait()
        raise RuntimeError(
            f"server did not report ready (got {line!r}); log:\n{log_path.read_text()}"
        )
    match = re.search(r"http://\S+", line)
    assert match, line
    server = HttpServer(match.group(0), process, log_path)
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while True:
        try:
            if httpx.get(server.url + "/", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            stop_server(server)
            raise RuntimeError(f"server never answered GET /; log:\n{server.log()}")
        time.sleep(0.05)


def stop_server(server: HttpServer, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
    """Signal the server and wait for it; returns its exit status (kills it after ``timeout``)."""
    if server.process.poll() is None:
        server.process.send_signal(sig)
        try:
            server.process.wait(timeout)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
    if server.process.stdout:
        server.process.stdout.close()
    return server.process.returncode


@dataclass
class Demo:
    process: subprocess.Popen[str]
    url: str
    endpoint: str
    banner: list[str]
    db: Path

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def balance(self, account: str) -> int:
        with self.client() as client:
            response = client.get(f"/accounts/{account}")
        assert response.status_code == 200, response.text
        return int(response.json()["balance"])

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.process.send_signal(sig)
        try:
            out, _ = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        return self.process.returncode, out


def start_demo(db: Path, *extra_args: str) -> Demo:
    """Start ``firstwrite demo`` on free ports (database ``db``) and wait for its banner."""
    process = subprocess.Popen(
        [
            sys.executable,  # `make run`'s command: `firstwrite demo ...`
            "-m",
            "firstwrite.cli",
            "demo",
            "--port",
            "0",
            "--engine-port",
            "0",
            "--db",
            str(db),
            *extra_args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    banner: list[str] = []
    done = threading.Event()

    def read() -> None:  # the banner ends with "Ctrl-C stops it."
        assert process.stdout is not None
        for line in process.stdout:
            banner.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C"):
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(SERVER_START_TIMEOUT) or not banner or "listening on" not in banner[0]:
        process.kill()
        raise RuntimeError(f"the demo did not start: {banner}")
    url = re.search(r"listening on (http://\S+)", banner[0])
    endpoint = next(
        re.search(r"(http://\S+)$", ln) for ln in banner if ln.startswith("DynamoDB endpoint")
    )
    assert url and endpoint
    return Demo(process, url.group(1), endpoint.group(1), banner, db)
