"""``reconcile=`` on the long-running consumers, against real brokers: the SQS poller and the
asyncio SQS poller on moto in server mode, the RabbitMQ consumer on Debian's rabbitmq-server.

A message whose earlier run marked a recovery point and died (claimed, marked, never
completed, its lease over on the engine's clock) is reconciled by the consumer's hook and
deleted (acked) without its handler running again; without a hook it is refused, left on the
queue (not deleted, nacked) and counted in ``firstwrite_recovery_takeovers_total``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from firstwrite.events import RecordOutcome, RecordResult
from firstwrite.events.sqs_poller import SQSPoller
from firstwrite.idempotency import AsyncIdempotency, Idempotency, Status

from ._recovery import (
    PROVIDER,
    adied_after_marking,
    aledger_hook,
    counted,
    died_after_marking,
    ledger_hook,
)


@pytest.fixture(autouse=True)
def _provider() -> None:
    PROVIDER.clear()


def send(sqs: Any, queue_url: str, *orders: str) -> dict[str, dict[str, str]]:
    """Send one message per order: ``{order: {"MessageId": ..., "Body": ...}}``."""
    sent = {}
    for order in orders:
        body = json.dumps({"order": order})
        answer = sqs.send_message(QueueUrl=queue_url, MessageBody=body)
        sent[order] = {"MessageId": answer["MessageId"], "Body": body}
    return sent


def depth(sqs: Any, queue_url: str) -> tuple[int, int]:
    """(visible, in flight) messages of the queue."""
    attrs = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


def poll_until(
    poll: Callable[[], list[RecordResult]], done: Callable[[list[RecordResult]], bool]
) -> list[RecordResult]:
    results: list[RecordResult] = []
    deadline = time.monotonic() + 30
    while not done(results):
        assert time.monotonic() < deadline, f"timed out: {results}"
        results += poll()
    return results


def test_sqs_poller_refuses_without_a_hook_then_its_hook_reconciles_and_deletes(
    guard: Idempotency, engine: Any, sqs: Any, queue_url: str
) -> None:
    sent = send(sqs, queue_url, "paid", "other")
    handled: list[str] = []

    def handler(message: Any) -> None:
        handled.append(message["MessageId"])

    paid = sent["paid"]["MessageId"]
    blind = SQSPoller(sqs, queue_url, guard, handler, visibility=2, wait=1)
    died_after_marking(guard, engine, blind.consumer, sent["paid"], charged=True)
    results = poll_until(
        lambda: list(blind.poll_once().results), lambda rs: len({r.id for r in rs}) == 2
    )
    refused = [r for r in results if r.id == paid]
    assert refused and all(r.outcome is RecordOutcome.FAILED for r in refused)
    assert "recovery required" in (refused[0].reason or "")
    assert handled == [sent["other"]["MessageId"]]
    assert depth(sqs, queue_url) == (0, 1)  # not deleted: in flight until its visibility ends
    assert counted(guard, "refused") >= 1
    record = guard.get(paid)
    assert record is not None and record.status is Status.PENDING

    poller = SQSPoller(sqs, queue_url, guard, handler, visibility=2, wait=1, reconcile=ledger_hook)
    results = poll_until(
        lambda: list(poller.poll_once().results), lambda rs: any(r.id == paid for r in rs)
    )
    assert [r.outcome for r in results if r.id == paid] == [RecordOutcome.REPLAYED]
    assert handled == [sent["other"]["MessageId"]]  # the charge was found, not made again
    assert depth(sqs, queue_url) == (0, 0)  # deleted
    assert counted(guard, "reconciled") == 1
    record = guard.get(paid)
    assert record is not None and record.status is Status.COMPLETED
    assert json.loads(str(record.result)) == {"charge": f"charge-{paid}"}


def test_async_sqs_poller_takes_an_async_hook(
    engine: Any, sqs: Any, queue_url: str, moto_sqs: Any
) -> None:
    from firstwrite.engine import local_client
    from firstwrite.events.async_sqs_poller import AsyncSQSPoller
    from firstwrite.idempotency import IdempotencyConfig, MemoryMetrics
    from firstwrite.idempotency.aio import ThreadedClient

    from .test_async_sqs_poller import aio_sqs

    aguard = AsyncIdempotency(
        IdempotencyConfig(table_name="events-idem"),
        client=ThreadedClient(local_client(engine)),
        clock=engine.clock.now,
        metrics=MemoryMetrics(),
    )
    sent = send(sqs, queue_url, "paid", "unpaid")
    handled: list[str] = []

    async def handler(message: Any) -> None:
        handled.append(message["MessageId"])

    async def main() -> None:
        await aguard.ensure_table()
        async with aio_sqs(moto_sqs.url) as client:
            blind = AsyncSQSPoller(client, queue_url, aguard, handler, visibility=2, wait=1)
            for order, charged in (("paid", True), ("unpaid", False)):
                await adied_after_marking(
                    aguard, engine, blind.consumer.consumer, sent[order], charged
                )
            results: list[RecordResult] = []
            deadline = time.monotonic() + 30
            while len({r.id for r in results}) < 2:
                assert time.monotonic() < deadline, results
                results += (await blind.poll_once()).results
            assert {r.outcome for r in results} == {RecordOutcome.FAILED}
            assert handled == [] and depth(sqs, queue_url) == (0, 2)

            poller = AsyncSQSPoller(
                client, queue_url, aguard, handler, visibility=2, wait=1, reconcile=aledger_hook
            )
            results = []
            while len({r.id for r in results if r.acknowledged}) < 2:
                assert time.monotonic() < deadline + 30, results
                results += (await poller.poll_once()).results
            outcomes = {r.id: r.outcome for r in results if r.acknowledged}
            assert outcomes == {
                sent["paid"]["MessageId"]: RecordOutcome.REPLAYED,  # reconciled
                sent["unpaid"]["MessageId"]: RecordOutcome.PROCESSED,  # not done: it ran
            }

    asyncio.run(main())
    assert handled == [sent["unpaid"]["MessageId"]]
    assert depth(sqs, queue_url) == (0, 0)
    assert counted(aguard, "refused") == 2
    assert counted(aguard, "reconciled") == 1 and counted(aguard, "not_done") == 1


def test_rabbitmq_consumer_nacks_without_a_hook_and_acks_what_its_hook_reconciles(
    guard: Idempotency, engine: Any, rabbitmq: Any
) -> None:
    pika = pytest.importorskip("pika")
    from firstwrite.events.rabbitmq import Delivery, RabbitMQConsumer

    from .test_rabbitmq import publish, queue_depth, run_until

    params = pika.ConnectionParameters("127.0.0.1", rabbitmq.port)
    queue = f"recovery-{uuid.uuid4().hex[:8]}"
    body = b'{"order": "paid"}'
    handled: list[str] = []
    lock = threading.Lock()

    def handler(delivery: Delivery) -> None:
        with lock:
            handled.append(str(delivery.properties.message_id))

    blind = RabbitMQConsumer(params, queue, guard, handler, retry_delay=0.05)
    props = SimpleNamespace(message_id="paid-1")
    died_after_marking(guard, engine, blind.consumer, Delivery(body, props, 0, False, queue), True)
    publish(params, queue, [("other-1", b'{"order": "other"}'), ("paid-1", body)])
    run_until([blind], lambda: sum(r.key == "paid-1" for r in blind.results) >= 2)
    refused = [r for r in blind.results if r.key == "paid-1"]
    assert all(r.outcome is RecordOutcome.FAILED for r in refused)  # nacked, delivered again
    assert handled == ["other-1"]
    assert queue_depth(params, queue) == 1  # still there
    assert counted(guard, "refused") >= 2

    consumer = RabbitMQConsumer(params, queue, guard, handler, reconcile=ledger_hook)
    run_until([consumer], lambda: any(r.acknowledged for r in consumer.results))
    assert [r.outcome for r in consumer.results] == [RecordOutcome.REPLAYED]
    assert handled == ["other-1"] and queue_depth(params, queue) == 0
    assert counted(guard, "reconciled") == 1
