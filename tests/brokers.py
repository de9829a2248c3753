"""Real brokers for the events tests and docs: moto's SQS server and Debian's RabbitMQ.

``start_moto()`` runs ``python -m moto.server`` (SQS's real wire API, answered by moto) on a
free loopback port; ``start_rabbitmq()`` runs ``rabbitmq-server`` with a unique node name,
its data and logs in a fresh directory under /tmp, listening on 127.0.0.1 only; each returns a :class:`Broker`
whose ``stop()`` ends it (``rabbitmqctl stop`` for RabbitMQ) and, for RabbitMQ, whose
``restart()`` stops and starts the same node (its durable queues kept).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tools import tool_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} not listening after {timeout}s: {log.read_text()[-2000:]}")


@dataclass
class Broker:
    port: int
    process: subprocess.Popen[bytes]
    env: dict[str, str] = field(default_factory=dict)
    kind: str = "moto"
    base: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restart(self, *, node: bool = True) -> None:
        """Stop RabbitMQ (``rabbitmqctl stop``) and start it again on the same port and data
        directory: durable queues and their persistent messages survive, connections do not.
        ``node=False`` restarts the broker application inside its running Erlang node
        (``rabbitmqctl stop_app``, ``start_app``): the same for clients, and faster."""
        assert self.kind == "rabbitmq" and self.base is not None
        if not node:
            for command in ("stop_app", "start_app"):
                subprocess.run(
                    ["rabbitmqctl", command],
                    env=self.env,
                    capture_output=True,
                    timeout=120,
                    check=True,
                )
            return
        self._halt()
        log = self.base / "server.log"
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                ["rabbitmq-server"], env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        wait_for_port(self.port, self.process, 90, log)

    def stop(self) -> None:
        self._halt()
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)

    def _halt(self) -> None:
        if self.process.poll() is None:
            if self.kind == "rabbitmq":
                subprocess.run(
                    ["rabbitmqctl", "stop"], env=self.env, capture_output=True, timeout=60
                )
            else:
                self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_moto(log_dir: Path) -> Broker:
    port = free_port()
    log = log_dir / f"moto-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-p", str(port), "-H", "127.0.0.1"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_for_port(port, process, 30, log)
    return Broker(port, process)


def rabbitmq_available() -> bool:
    return tool_path("rabbitmq-server") is not None


def start_rabbitmq() -> Broker:
    """As root, Debian's scripts run the node as the ``rabbitmq`` user: its directory is a
    fresh one under /tmp that user can write (pytest's tmp_path is private to root)."""
    port = free_port()
    base = Path(tempfile.mkdtemp(prefix="firstwrite-rabbitmq-"))
    base.chmod(0o777)
    name = f"fw{uuid.uuid4().hex[:10]}@localhost"
    env = {
        **os.environ,
        "PATH": f"/usr/sbin:/usr/bin:{os.environ.get('PATH', '')}",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_NODENAME": name,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_DIST_PORT": str(free_port()),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_FEATURE_FLAGS_FILE": str(base / "feature_flags"),
        "RABBITMQ_PLUGINS_EXPAND_DIR": str(base / "plugins-expand"),
        "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        "RABBITMQ_LOGS": str(base / "log" / "rabbit.log"),
        "ERL_CRASH_DUMP": str(base / "erl_crash.dump"),
        "RABBITMQ_SERVER_START_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }
    (base / "enabled_plugins").write_text("[].\n")
    log = base / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["rabbitmq-server"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    wait_for_port(port, process, 90, log)
    return Broker(port, process, env, "rabbitmq", base)
