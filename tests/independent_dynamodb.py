"""DynamoDB implementations written by others, started for tests that compare against them.

* :func:`dynalite`: dynalite 4.0.0 (Node; pinned in tests/cli/dynalite/package-lock.json,
  installed with ``npm ci``), in memory, on a free loopback port.
* :func:`moto_server`: moto's ``ThreadedMotoServer`` (the dev lock's moto, with Flask: its
  server mode) on an ephemeral loopback port, in this process.

Both are context managers yielding the endpoint URL. dynalite needs node and npm: without them
the test skips with a reason starting ``missing tool: `` (the suite's convention, which CI,
having installed every tool, turns into a failure).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from brokers import free_port, wait_for_port
from npm_packages import npm_ci

DYNALITE_PACKAGE = Path(__file__).parent / "cli" / "dynalite"


def need_node() -> None:
    """Skip the calling test when node or npm is missing (the suite's tool-skip convention)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"missing tool: {tool} (dynalite runs on it; .ci/run installs it)")


@contextmanager
def dynalite(workdir: Path) -> Iterator[str]:
    """A dynalite server (in memory) on a free port, stopped on exit; its URL."""
    need_node()
    binary = npm_ci(DYNALITE_PACKAGE) / ".bin" / "dynalite"
    port = free_port()
    log = workdir / "dynalite.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            ["node", str(binary), "--port", str(port), "--host", "127.0.0.1"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, server, 30, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's server on an ephemeral loopback port, stopped on exit; its URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
