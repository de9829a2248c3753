"""The asyncio SQS poller (aiobotocore) against a real SQS-API server (moto in server mode) and
the local engine: duplicates and redelivery, a visibility running out while the first consumer
still works, the heartbeat extending both the visibility and the claim's lease, a handler that
raises, task cancellation, SIGTERM and SIGKILL to a real subprocess, a FIFO group with a
failure in the middle."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine import Engine, local_client
from firstwrite.events import RecordOutcome
from firstwrite.events.async_sqs_poller import AsyncSQSPoller
from firstwrite.idempotency import (
    AsyncIdempotency,
    IdempotencyConfig,
    InProgressError,
    MemoryMetrics,
    Status,
)
from firstwrite.idempotency.aio import ThreadedClient

from ._processes import (
    Extensions,
    assert_group_order,
    fifo_queue,
    signal_at_mark,
    start_worker,
)

TABLE = "events-idem"


@pytest.fixture
def aguard(engine: Engine) -> AsyncIdempotency:
    guard = AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE),
        client=ThreadedClient(local_client(engine)),
        clock=engine.clock.now,
        metrics=MemoryMetrics(),
    )
    asyncio.run(guard.ensure_table())
    return guard


@asynccontextmanager
async def aio_sqs(url: str) -> AsyncIterator[Any]:
    from aiobotocore.session import get_session

    async with get_session().create_client(
        "sqs",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ) as client:
        yield client


async def drain(
    pollers: list[AsyncSQSPoller], sqs: Any, queue_url: str, timeout: float = 30
) -> None:
    """Run ``pollers`` as tasks until the queue is empty (visible and in flight)."""
    tasks = [asyncio.create_task(p.run(handle_signals=False)) for p in pollers]
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            attrs = (
                await sqs.get_queue_attributes(
                    QueueUrl=queue_url,
                    AttributeNames=[
                        "ApproximateNumberOfMessages",
                        "ApproximateNumberOfMessagesNotVisible",
                    ],
                )
            )["Attributes"]
            if all(v == "0" for v in attrs.values()):
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"queue not drained: {attrs}")
    finally:
        for p in pollers:
            p.stop()
        await asyncio.gather(*tasks)


def run(main: Callable[[Any], Awaitable[None]], moto_sqs: Any) -> None:
    async def go() -> None:
        async with aio_sqs(moto_sqs.url) as sqs:
            await main(sqs)

    asyncio.run(go())


def test_duplicates_run_once_and_every_message_is_deleted(
    aguard: AsyncIdempotency, sqs: Any, queue_url: str, moto_sqs: Any
) -> None:
    for i in range(20):  # each order sent twice, as a retrying producer would
        for _ in range(2):
            sqs.send_message(QueueUrl=queue_url, MessageBody=f'{{"order_id": "o-{i}"}}')
    ran: Counter[str] = Counter()

    async def handler(message: Any) -> None:
        ran[message["Body"]] += 1
        await asyncio.sleep(0.01)

    async def main(client: Any) -> None:
        pollers = [
            AsyncSQSPoller(client, queue_url, aguard, handler, key="order_id") for _ in range(2)
        ]
        await drain(pollers, client, queue_url)

    run(main, moto_sqs)
    assert len(ran) == 20 and set(ran.values()) == {1}
    metrics = aguard.metrics.total  # type: ignore[attr-defined]
    assert metrics("firstwrite_event_records_total", source="sqs_poller", outcome="replayed") >= 20


def test_visibility_running_out_mid_handler_does_not_run_it_twice(
    aguard: AsyncIdempotency, sqs: Any, queue_url: str, moto_sqs: Any
) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="slow")
    runs: list[str] = []
    outcomes: list[RecordOutcome] = []

    async def main(client: Any) -> None:
        redelivered = asyncio.Event()

        def slow(name: str) -> Callable[[Any], Awaitable[None]]:
            async def handler(message: Any) -> None:
                runs.append(name)
                if name == "first":
                    # Busy until the queue has handed the message to the second poller (its
                    # 2 s visibility ran out on SQS's clock), however long that takes.
                    await asyncio.wait_for(redelivered.wait(), 30)

            return handler

        # The first poller does not extend the message's visibility (it still renews the
        # claim's lease): the queue hands the message to the second poller meanwhile.
        first = AsyncSQSPoller(
            client, queue_url, aguard, slow("first"), visibility=2, extend_visibility=False
        )
        second = AsyncSQSPoller(client, queue_url, aguard, slow("second"), visibility=2)
        task = asyncio.create_task(first.poll_once())
        while not runs:
            await asyncio.sleep(0.05)
        deadline = time.monotonic() + 20
        try:
            while RecordOutcome.IN_PROGRESS not in outcomes and time.monotonic() < deadline:
                outcomes.extend(r.outcome for r in (await second.poll_once()).results)
        finally:
            redelivered.set()
        first_batch = await task
        assert [r.outcome for r in first_batch.results] == [RecordOutcome.PROCESSED]
        await drain([second], client, queue_url)

    run(main, moto_sqs)
    assert RecordOutcome.IN_PROGRESS in outcomes  # redelivered while the first still worked
    assert RecordOutcome.PROCESSED not in outcomes
    assert runs == ["first"]


def test_heartbeat_extends_both_the_visibility_and_the_lease(
    aguard: AsyncIdempotency, sqs: Any, queue_url: str, moto_sqs: Any
) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="slow")
    seen: list[str] = []
    checks: list[object] = []
    beats = 4  # 4 x 1 s: past the 3 s visibility and lease the message was claimed with

    async def main(client: Any) -> None:
        counted = Extensions(client)
        checked = asyncio.Event()

        async def handler(message: Any) -> str:
            seen.append(message["MessageId"])
            await asyncio.wait_for(checked.wait(), 30)
            return "done"

        # (A visibility of 3 s, renewed every second: a renewal may be 2 s late on a busy
        # machine before the message shows again. With 1 s, 0.67 s late failed a full run.)
        # The check comes once the heartbeat has beaten `beats` times, not after a span of
        # wall-clock time.
        poller = AsyncSQSPoller(counted, queue_url, aguard, handler, visibility=3)
        task = asyncio.create_task(poller.poll_once())
        deadline = time.monotonic() + 30
        while counted.count < beats and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        checks.append(counted.count >= beats)
        # the queue does not show it again...
        again = await client.receive_message(QueueUrl=queue_url, WaitTimeSeconds=0)
        checks.append("Messages" in again)
        # ...and the claim's lease is still live: another claim of the key is refused
        try:
            await aguard.claim(seen[0], "slow", wait=0)
        except InProgressError:
            checks.append("in progress")
        checked.set()
        batch = await task
        checks.append(batch.results[0].outcome)

    run(main, moto_sqs)
    assert checks == [True, False, "in progress", RecordOutcome.PROCESSED]
    record = asyncio.run(aguard.get(seen[0]))
    assert record is not None and record.status is Status.COMPLETED
    assert (
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"][
            "ApproximateNumberOfMessagesNotVisible"
        ]
        == "0"
    )  # deleted after completion


def test_a_handler_that_raises_is_redelivered_then_given_up(
    aguard: AsyncIdempotency, sqs: Any, queue_url: str, moto_sqs: Any
) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="flaky")
    sqs.send_message(QueueUrl=queue_url, MessageBody="broken")
    calls: Counter[str] = Counter()
    body_of: dict[str, str] = {}
    outcomes: dict[str, list[RecordOutcome]] = {"flaky": [], "broken": []}

    async def handler(message: Any) -> str:
        body_of[message["MessageId"]] = message["Body"]
        calls[message["Body"]] += 1
        if message["Body"] == "broken" or calls["flaky"] == 1:
            raise RuntimeError(f"boom {message['Body']}")
        return "ok"

    async def main(client: Any) -> None:
        poller = AsyncSQSPoller(client, queue_url, aguard, handler, visibility=1, max_attempts=2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            RecordOutcome.PROCESSED in outcomes["flaky"]
            and RecordOutcome.FAILED_FINAL in outcomes["broken"]
        ):
            for result in (await poller.poll_once()).results:
                outcomes[body_of[result.id]].append(result.outcome)
        await drain([poller], client, queue_url)  # both deleted: nothing comes back

    run(main, moto_sqs)
    assert calls == {"flaky": 2, "broken": 2}  # each redelivered once; broken given up at 2
    assert outcomes["flaky"] == [RecordOutcome.FAILED, RecordOutcome.PROCESSED]
    assert outcomes["broken"] == [RecordOutcome.FAILED, RecordOutcome.FAILED_FINAL]


def test_cancelling_the_task_frees_the_key_of_the_message_in_hand(
    aguard: AsyncIdempotency, sqs: Any, queue_url: str, moto_sqs: Any
) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="job")
    runs: list[str] = []

    async def handler(message: Any) -> str:
        runs.append(message["MessageId"])
        if len(runs) == 1:
            await asyncio.sleep(3600)  # cancelled here
        return "ok"

    async def main(client: Any) -> None:
        poller = AsyncSQSPoller(client, queue_url, aguard, handler, visibility=1)
        task = asyncio.create_task(poller.run(handle_signals=False))
        while not runs:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        record = await aguard.get(runs[0])
        assert record is not None and record.status is Status.FAILED  # retryable, not held
        # the message was not deleted: it comes back and runs at once (no lease to wait out)
        await drain(
            [AsyncSQSPoller(client, queue_url, aguard, handler, visibility=1)], client, queue_url
        )
        record = await aguard.get(runs[0])
        assert record is not None and record.status is Status.COMPLETED

    run(main, moto_sqs)
    assert len(runs) == 2 and runs[0] == runs[1]


def test_sigterm_finishes_the_message_in_hand_then_stops(
    sqs: Any, queue_url: str, moto_sqs: Any, tmp_path: Path
) -> None:
    from firstwrite.idempotency import Idempotency

    db = tmp_path / "events.db"
    engine = Engine(str(db))
    guard = Idempotency(IdempotencyConfig(table_name=TABLE), client=local_client(engine))
    guard.ensure_table()
    message_id = sqs.send_message(QueueUrl=queue_url, MessageBody="job-1")["MessageId"]
    marks = tmp_path / "marks.txt"
    worker = start_worker("_async_poller_worker.py", db, moto_sqs.url, queue_url, marks)
    assert signal_at_mark(worker, marks, "start job-1", signal.SIGTERM) == 0  # mid-handler
    assert marks.read_text().splitlines() == ["start job-1", "done job-1", "stopped"]
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert (
        attrs["ApproximateNumberOfMessages"]
        == attrs["ApproximateNumberOfMessagesNotVisible"]
        == "0"
    )
    record = guard.get(message_id)
    assert record is not None and record.status is Status.COMPLETED
    engine.close()


def test_sigkilled_consumer_record_runs_once_after_its_lease(
    aguard: AsyncIdempotency, sqs: Any, queue_url: str, moto_sqs: Any, tmp_path: Path
) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="hang-1")
    marks = tmp_path / "marks.txt"
    args = (tmp_path / "events.db", moto_sqs.url, queue_url, marks, 2)  # aguard's engine file
    worker = start_worker("_async_poller_worker.py", *args)
    # mid-record: claimed, started, never finished
    assert signal_at_mark(worker, marks, "start hang-1", signal.SIGKILL) == -signal.SIGKILL
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"  # not deleted: it comes back
    done: list[tuple[str, str]] = []
    outcomes: list[RecordOutcome] = []
    counted: list[int] = []

    async def finish(message: Any) -> None:
        done.append((message["Body"], message["MessageId"]))

    async def main(client: Any) -> None:
        poller = AsyncSQSPoller(client, queue_url, aguard, finish, visibility=2, wait=1)
        deadline = time.monotonic() + 20
        while not done and time.monotonic() < deadline:
            outcomes.extend(r.outcome for r in (await poller.poll_once()).results)
        await drain([poller], client, queue_url)
        if done:  # the abandoned run is counted, read back through the asyncio guard
            counted.append(await poller.consumer.consumer.attempts.acount(done[0][1]))

    run(main, moto_sqs)
    # ran by the survivor, once, after the killed worker's lease ran out
    assert [body for body, _ in done] == ["hang-1"], outcomes
    assert outcomes[-1] is RecordOutcome.PROCESSED
    assert marks.read_text().count("start hang-1") == 1
    record = asyncio.run(aguard.get(done[0][1]))
    assert record is not None and record.status is Status.COMPLETED
    assert counted == [1]


def test_fifo_group_with_a_failure_in_the_middle(
    aguard: AsyncIdempotency, sqs: Any, moto_sqs: Any
) -> None:
    url = fifo_queue(sqs, "A", 5)
    order: list[str] = []
    failed = {"A2"}
    batches: list[list[RecordOutcome]] = []

    async def handler(message: Any) -> None:
        order.append(message["Body"])
        if message["Body"] in failed:
            failed.discard(message["Body"])  # fails once
            raise RuntimeError("boom")

    async def main(client: Any) -> None:
        poller = AsyncSQSPoller(client, url, aguard, handler, visibility=1, wait=1)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and sorted(set(order)) != [f"A{i}" for i in range(5)]:
            batches.append([r.outcome for r in (await poller.poll_once()).results])
        await drain([poller], client, url, timeout=20)

    run(main, moto_sqs)
    assert_group_order(order, batches, "A", 5, failed="A2")


def test_the_attempt_ledger_counts_through_an_asyncio_guard(aguard: AsyncIdempotency) -> None:
    from firstwrite.events.aio import adrive
    from firstwrite.events.attempts import AttemptLedger

    ledger = AttemptLedger(aguard, 3)

    async def no_handler(record: Any) -> None:
        raise AssertionError("no handler runs")

    async def main() -> list[int]:
        seen = [await ledger.acount("k")]
        for reason in ("boom 1", "boom 2"):
            await adrive(ledger.note_steps("k", reason), aguard, no_handler)
            seen.append(await ledger.acount("k"))
        seen.append(await ledger.acount("other"))
        return seen

    assert asyncio.run(main()) == [0, 1, 2, 0]
    with pytest.raises(TypeError, match="asyncio guard"):
        ledger.count("k")  # the synchronous count refuses an asyncio guard
