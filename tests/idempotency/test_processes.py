"""Real processes on one engine: exactly-once across processes, SIGKILL mid-flight, fencing.

The engine is shared either as a database file that every process opens (SQLite makes each
conditional write linearizable across them) or as the HTTP server. Time is the engine's clock in
the parent, advanced past the lease instead of sleeping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig, LostClaimError

from .conftest import create_table

WORKER = str(Path(__file__).with_name("_worker.py"))
pytestmark = pytest.mark.slow


def spawn(spec: dict[str, Any], stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        text=True,
    )


@pytest.fixture
def shared(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """(spec for workers, parent Engine or None, parent boto3 client)."""
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    transport = getattr(request, "param", "file")
    table = f"procs-{os.getpid()}-{time.monotonic_ns()}"
    if transport == "http":
        import boto3

        url = request.getfixturevalue("http_server").url
        client = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=url,
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret",
        )
        spec: dict[str, Any] = {"endpoint": url, "table": table}
        engine = None
    else:
        db = str(tmp_path / "shared.db")
        engine = Engine(db)
        client = local_client(engine, region="us-east-1")
        spec = {"db": db, "table": table}
    create_table(client, IdempotencyConfig(table_name=table))
    spec["effects"] = str(tmp_path / "effects.log")
    yield spec, engine, client
    if engine is not None:
        engine.close()


@pytest.mark.parametrize("shared", ["file", "http"], indirect=True)
def test_processes_run_the_side_effect_once(shared: Any, tmp_path: Path) -> None:
    spec, _, _ = shared
    n = 6
    marks = tmp_path / "marks"
    marks.mkdir()
    race = {**spec, "mode": "run", "key": "p-key", "wait": 30.0}
    procs = [spawn({**race, "participants": n, "marks": str(marks)}, stdin=True) for _ in range(n)]
    try:
        for p in procs:  # every interpreter up, imported and connected before the start
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        start = time.time() + 0.5
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"go {start!r}\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0] * n, outputs
    seen = [json.loads(out.splitlines()[-1]) for out in outputs]
    effects = Path(spec["effects"]).read_text().split()
    assert len(effects) == 1  # exactly one process ran it
    assert [s["result"] for s in seen] == [{"pid": int(effects[0])}] * n
    # The race happened: everyone was told the start before it came (the barrier held)...
    late = [round(s["arrived"] - s["start"], 3) for s in seen if s["arrived"] >= s["start"]]
    assert late == [], f"the start barrier was missed by {late} s"
    # ...and every loser met the winner's claim in flight and waited on it, then replayed.
    losers = [s for s in seen if s["pid"] != int(effects[0])]
    assert len(losers) == n - 1
    assert [s["polls"] for s in losers if s["polls"] < 1] == [], seen
    winner = next(s for s in seen if s["pid"] == int(effects[0]))
    assert all(s["began"] < winner["ended"] for s in losers), seen


@pytest.mark.crash
def test_killed_worker_is_taken_over_and_its_late_completion_refused(shared: Any) -> None:
    spec, engine, client = shared
    lease = 30.0
    worker = spawn({**spec, "mode": "hold", "key": "k-key", "lease": lease})
    line = worker.stdout.readline() if worker.stdout else ""
    dead = json.loads(line)
    worker.send_signal(signal.SIGKILL)  # mid-flight, holding the claim
    worker.wait(10)
    assert worker.returncode == -signal.SIGKILL

    config = IdempotencyConfig(table_name=spec["table"])
    clock = engine.clock if engine is not None else None
    offset = [0.0]

    def now() -> float:
        return (clock.now() if clock else time.time()) + offset[0]

    guard = Idempotency(config, client=client, clock=now)
    with pytest.raises(Exception, match="in progress"):
        guard.claim("k-key", {"p": 1})
    if clock is not None:
        clock.advance(lease + 2)
    else:
        offset[0] = lease + 2
    takeover = guard.claim("k-key", {"p": 1})
    assert isinstance(takeover, Claim) and takeover.taken_over

    # The dead worker's claim, completed late (as a zombie would), is refused.
    late = Claim(
        record_id=dead["record_id"],
        key=dead["key"],
        owner=dead["owner"],
        version=dead["version"],
        fingerprint=dead["fingerprint"],
        claimed_at=dead["claimed_at"],
        lease_expires_at=dead["lease_expires_at"],
    )
    with pytest.raises(LostClaimError):
        guard.complete(late, {"by": "zombie"})
    guard.complete(takeover, {"by": "takeover"})
    assert guard.run("k-key", lambda: {"by": "nobody"}, {"p": 1}) == {"by": "takeover"}
    assert Path(spec["effects"]).read_text().startswith("started")


@pytest.mark.crash
def test_stalled_worker_resumes_after_takeover_and_is_fenced(shared: Any) -> None:
    spec, engine, client = shared
    lease = 30.0
    worker = spawn({**spec, "mode": "stall", "key": "s-key", "lease": lease}, stdin=True)
    assert worker.stdout is not None and worker.stdin is not None
    json.loads(worker.stdout.readline())
    os.kill(worker.pid, signal.SIGSTOP)  # frozen mid-flight
    assert engine is not None
    engine.clock.advance(lease + 2)
    guard = Idempotency(
        IdempotencyConfig(table_name=spec["table"]), client=client, clock=engine.clock.now
    )
    takeover = guard.claim("s-key", {"p": 1})
    assert isinstance(takeover, Claim) and takeover.taken_over
    os.kill(worker.pid, signal.SIGCONT)
    worker.stdin.write("go\n")
    worker.stdin.flush()
    assert worker.stdout.readline().strip() == "lost"
    worker.wait(30)
    record = guard.get("s-key")
    assert record is not None and record.owner == takeover.owner  # untouched by the stale one
    guard.complete(takeover, {"by": "takeover"})
    assert guard.run("s-key", lambda: None, {"p": 1}) == {"by": "takeover"}
