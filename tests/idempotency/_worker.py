"""A worker process for the multi-process tests (run as a script, one JSON argument).

It talks to DynamoDB through boto3 only: either an engine opened on a shared database file
(``db``) or an HTTP endpoint (``endpoint``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from firstwrite.idempotency import Idempotency, MemoryMetrics


def client_for(spec: dict[str, Any]) -> Any:
    if spec.get("endpoint"):
        import boto3

        return boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=spec["endpoint"],
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret",
        )
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    return local_client(Engine(spec["db"]), region="us-east-1")


def effect(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class _Waits(MemoryMetrics):
    """The guard's metrics, and a file ``waited-<pid>`` in ``marks`` at the first read made
    while waiting on the key in progress (this process met the race's winner mid-flight)."""

    def __init__(self, marks: Path) -> None:
        super().__init__()
        self.marks = marks

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        super().count(name, value, **labels)
        if name == "firstwrite_in_progress_polls_total":
            (self.marks / f"waited-{os.getpid()}").touch()


def run_raced(spec: dict[str, Any], config: Any) -> None:
    """One participant of a race on ``spec["key"]``: ready (connected, imported), then told the
    start instant on stdin, then ``guard.run`` at that instant. The side effect (of the one
    that wins) lasts until every other participant has waited on it (``waited-*`` files, at
    most 20 s), so that, with the start held, the race really is one. Prints what it saw."""
    marks = Path(spec["marks"])
    metrics = _Waits(marks)
    guard = Idempotency(config, client=client_for(spec), metrics=metrics)
    print("ready", flush=True)
    command, _, start_text = sys.stdin.readline().partition(" ")
    arrived = time.time()
    assert command == "go", command
    start = float(start_text)
    while time.time() < start:  # line the processes up on the same instant
        time.sleep(0.001)
    began = time.time()

    def side_effect() -> dict[str, Any]:
        effect(spec["effects"], str(os.getpid()))
        others = spec["participants"] - 1
        deadline = time.monotonic() + 20
        while len(list(marks.glob("waited-*"))) < others and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"pid": os.getpid()}

    result = guard.run(spec["key"], side_effect, {"p": 1})
    report = {
        "result": result,
        "pid": os.getpid(),
        "arrived": arrived,
        "start": start,
        "began": began,
        "ended": time.time(),
        "polls": metrics.total("firstwrite_in_progress_polls_total"),
    }
    print(json.dumps(report), flush=True)


def main() -> None:
    spec = json.loads(sys.argv[1])
    from firstwrite.idempotency import Claim, IdempotencyConfig, LostClaimError

    config = IdempotencyConfig(table_name=spec["table"], in_progress_wait=spec.get("wait", 0.0))
    mode = spec["mode"]
    if mode == "run":
        run_raced(spec, config)
        return
    guard = Idempotency(config, client=client_for(spec))
    if mode in ("hold", "stall"):
        claim = guard.claim(spec["key"], {"p": 1}, lease=spec["lease"])
        assert isinstance(claim, Claim)
        effect(spec["effects"], f"started {os.getpid()}")
        print(
            json.dumps(
                {
                    "record_id": claim.record_id,
                    "key": claim.key,
                    "owner": claim.owner,
                    "version": claim.version,
                    "fingerprint": claim.fingerprint,
                    "claimed_at": claim.claimed_at,
                    "lease_expires_at": claim.lease_expires_at,
                }
            ),
            flush=True,
        )
        if mode == "hold":
            time.sleep(3600)  # killed with SIGKILL while holding the claim
        sys.stdin.readline()  # stalled (a GC pause, a partition) until the parent says go
        try:
            guard.complete(claim, {"by": "stalled"})
            print("completed", flush=True)
        except LostClaimError:
            print("lost", flush=True)


if __name__ == "__main__":
    main()
