"""A completion that cannot be written after the side effect ran (issue 14, defect 8).

The side effect has happened; if its completion is not recorded, the record stays PENDING and,
once the lease is over, a retry takes the key over and runs the side effect again. The layer
keeps trying to record it, renewing the lease, for as long as the lease allows, and then raises
:class:`CompletionNotRecordedError` carrying the result. Staged with the engine's injected
errors, and with a real ``firstwrite engine serve`` killed and restarted between the side
effect and its completion.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config

from firstwrite.idempotency import (
    ClockSkewPolicy,
    CompletionNotRecordedError,
    Idempotency,
    IdempotencyConfig,
    MemoryMetrics,
)

from .conftest import TABLE, Backend, OffsetClock

ONE_ATTEMPT = Config(retries={"total_max_attempts": 1})  # as docs/operating-on-aws.md suggests


def test_half_the_completions_failing_runs_no_side_effect_twice(
    backend: Backend, table: str
) -> None:
    """50% of UpdateItem calls answered with a 500 by the engine; botocore makes one attempt.
    Every key's side effect runs once: no completion is left PENDING for a retry to take over."""
    client = backend.new_client(config=ONE_ATTEMPT)
    metrics = MemoryMetrics()
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE),
        client=client,
        clock=backend.now,
        metrics=metrics,
        sleep=lambda s: None,
    )
    runs: Counter[str] = Counter()

    def side_effect(key: str) -> Any:
        runs[key] += 1
        return {"charged": key}

    backend.engine.faults.error(
        "InternalServerError", operation="UpdateItem", table=TABLE, rate=0.5, seed=7
    )
    keys = [f"k-{i}" for i in range(80)]
    for key in keys:
        assert guard.run(key, lambda key=key: side_effect(key)) == {"charged": key}
    backend.engine.faults.clear()
    backend.advance(61)  # every lease is over: an unrecorded completion would be taken over
    for key in keys:
        assert guard.run(key, lambda key=key: side_effect(key)) == {"charged": key}
    assert set(runs.values()) == {1}
    assert metrics.total("firstwrite_dynamodb_retries_total", operation="UpdateItem") > 0


def test_a_completion_that_cannot_be_written_says_the_side_effect_ran(
    backend: Backend, table: str
) -> None:
    """Every UpdateItem fails: after a lease of trying, the error carries the result and the
    claim, and says the side effect happened."""
    client = backend.new_client(config=ONE_ATTEMPT)
    metrics = MemoryMetrics()
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE, lease=1.0),
        client=client,
        clock=backend.now,
        metrics=metrics,
    )
    backend.engine.faults.error("InternalServerError", operation="UpdateItem", table=TABLE)
    with pytest.raises(CompletionNotRecordedError) as info:
        guard.run("doomed", lambda: {"receipt": 42})
    error = info.value
    assert error.result == {"receipt": 42} and error.key == "doomed"
    assert "ran" in str(error) and "'doomed'" in str(error)
    assert error.tried_for >= 1.0 and error.__cause__ is not None
    assert metrics.total("firstwrite_completions_not_recorded_total") == 1
    backend.engine.faults.clear()
    guard.complete(error.claim, error.result)  # the caller may record it later itself
    assert guard.run("doomed", lambda: {"receipt": 0}) == {"receipt": 42}


def test_the_lease_is_renewed_while_the_completion_is_retried(backend: Backend, table: str) -> None:
    """While the completion keeps failing, the claim's lease is kept ahead (renewals go
    through; completions do not), so no other worker can take the key over meanwhile."""
    client = backend.new_client(config=ONE_ATTEMPT)
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE, lease=1.0), client=client, clock=backend.now
    )
    claim = guard.claim("renewing")
    # Fail exactly the completions: an UpdateItem whose expression stores a result.
    hits: list[int] = []

    def fail_completions(params: Any = None, **_: Any) -> Any:
        if "SET #res" in str(params):
            hits.append(1)
            return (
                _Http500(),
                {
                    "Error": {"Code": "InternalServerError", "Message": "x"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
            )
        return None

    client.meta.events.register("before-call.dynamodb.UpdateItem", fail_completions)
    with pytest.raises(CompletionNotRecordedError) as info:
        guard.complete(claim, "done")  # type: ignore[arg-type]
    assert len(hits) >= 2
    renewed = info.value.claim
    assert renewed.version > 1  # renewed at least once while trying
    record = guard.get("renewing")
    assert record is not None and record.version == renewed.version
    assert record.lease_expires_at == renewed.lease_expires_at


class _Http500:
    status_code = 500
    headers: dict[str, str] = {}
    content = b""


# -- a real server, killed and restarted between the side effect and its completion --------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``firstwrite engine serve`` on a fixed port and database, restartable."""

    def __init__(self, db: Path, port: int) -> None:
        self.db, self.port = db, port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "firstwrite.cli",
                "engine",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--db",
                str(self.db),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("firstwrite engine listening on "), line

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        if self.process.stdout:
            self.process.stdout.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path / "restart.db", _free_port())
    s.start()
    yield s
    s.stop()


@pytest.mark.slow
@pytest.mark.crash
def test_a_server_restart_between_side_effect_and_completion_runs_nothing_twice(
    server: Server,
) -> None:
    import boto3

    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=server.url,
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=5),
    )
    clock = OffsetClock()
    # The clock moved below stands for time passing: the guard's own (not DynamoDB's estimated).
    config = IdempotencyConfig(table_name="restart", clock_skew=ClockSkewPolicy(enabled=False))
    guard = Idempotency(config, client=client, clock=clock.now)
    guard.ensure_table()
    runs: Counter[str] = Counter()
    restarts: list[threading.Thread] = []

    def side_effect(key: str) -> dict[str, str]:
        runs[key] += 1
        server.kill()  # the side effect has happened; the database goes away before completion
        restart = threading.Thread(target=lambda: (time.sleep(0.5), server.start()))
        restart.start()
        restarts.append(restart)
        return {"charged": key}

    keys = [f"r-{i}" for i in range(4)]
    for key in keys:
        assert guard.run(key, lambda key=key: side_effect(key)) == {"charged": key}
        restarts[-1].join(60)
    clock.advance(61)  # past every lease: an unrecorded completion would now be taken over
    for key in keys:
        assert guard.run(key, lambda key=key: side_effect(key)) == {"charged": key}
    assert set(runs.values()) == {1}
