"""Consumers in their own processes, for the crash and signal tests of both SQS pollers.

``start_worker(script, *args)`` starts ``tests/events/<script>`` with this checkout's sources
first on ``PYTHONPATH``; ``signal_at_mark(worker, marks, mark, sig)`` waits until the worker's
handler has written ``mark`` to its marks file, then sends ``sig`` (SIGKILL: a crash
mid-record) and waits for the process to end, returning its exit code. ``fifo_queue`` and
``assert_group_order`` are the FIFO scenario the two pollers share. ``Extensions`` wraps an
SQS client (boto3 or aiobotocore) and counts the visibility extensions made through it, so a
test waits for the poller's keepalive beats rather than for a span of wall-clock time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from firstwrite.events import RecordOutcome

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def start_worker(script: str, *args: object) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    return subprocess.Popen([sys.executable, str(HERE / script), *map(str, args)], env=env)


def signal_at_mark(
    worker: subprocess.Popen[bytes], marks: Path, mark: str, sig: signal.Signals
) -> int:
    """Send ``sig`` once ``mark`` is in ``marks``; the worker's exit code (killed if it hangs)."""
    try:
        deadline = time.monotonic() + 30
        while not (marks.exists() and mark in marks.read_text()):
            assert time.monotonic() < deadline and worker.poll() is None, "no mark from the worker"
            time.sleep(0.05)
        os.kill(worker.pid, sig)
        return worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def fifo_queue(sqs: Any, group: str, n: int) -> str:
    """A new FIFO queue (content-based deduplication) holding ``<group>0`` .. ``<group>n-1``
    in one message group."""
    url: str = sqs.create_queue(
        QueueName=f"orders-{os.getpid()}-{time.monotonic_ns()}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    for i in range(n):
        sqs.send_message(QueueUrl=url, MessageBody=f"{group}{i}", MessageGroupId=group)
    return url


def assert_group_order(
    order: list[str], batches: list[list[RecordOutcome]], group: str, n: int, failed: str
) -> None:
    """Every message ran once except ``failed`` (twice: it failed once); the messages up to the
    failure ran in order; within a receive, nothing after a failure ran (moto, unlike SQS,
    hands out a group's later messages while earlier ones are in flight, so the order across
    receives is not the poller's to keep)."""
    bodies = [f"{group}{i}" for i in range(n)]
    assert sorted(order) == sorted([*bodies, failed])
    upto = bodies[: bodies.index(failed) + 1]
    assert [order.index(b) for b in upto] == sorted(order.index(b) for b in upto)
    for outcomes in batches:
        if RecordOutcome.FAILED in outcomes:
            after = outcomes[outcomes.index(RecordOutcome.FAILED) + 1 :]
            assert set(after) <= {RecordOutcome.SKIPPED}, outcomes


class Extensions:
    """An SQS client whose ``change_message_visibility`` calls are counted (``count``) before
    they are made; everything else is the client's own. For boto3 and aiobotocore alike: the
    call returns whatever the client's does (a coroutine under aiobotocore)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.count = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def change_message_visibility(self, **params: Any) -> Any:
        self.count += 1
        return self.client.change_message_visibility(**params)
