"""Consumers survive their brokers' ordinary errors (issue 39): a stale receipt handle, a
message no longer in flight, a receive that fails, a RabbitMQ broker restarted under the
consumer. Each error is logged with the message's id and touches no other message; the
pollers keep polling and the RabbitMQ consumer reconnects.

The stale handle is SQS's own answer from moto's server: poller B holds a message whose
visibility ran out, poller A receives it (in progress under B), B completes and deletes it,
and A's ``ChangeMessageVisibility`` with its now stale handle gets ``ReceiptHandleIsInvalid``.
moto never answers ``MessageNotInflight`` and accepts a delete of a deleted message, so those
answers (and a dropped connection) are injected at the client by :class:`Refusing`, a thin
wrapper raising botocore's own exceptions where real SQS would.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from firstwrite.engine import Engine, local_client
from firstwrite.events import RecordOutcome
from firstwrite.events.async_sqs_poller import AsyncSQSPoller
from firstwrite.events.sqs_poller import SQSPoller
from firstwrite.idempotency import AsyncIdempotency, Idempotency, IdempotencyConfig
from firstwrite.idempotency.aio import ThreadedClient

from .test_async_sqs_poller import aio_sqs

TABLE = "events-idem"


@pytest.fixture
def aguard(engine: Engine, guard: Idempotency) -> AsyncIdempotency:
    """The asyncio guard on ``guard``'s engine (and table)."""
    return AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE),
        client=ThreadedClient(local_client(engine)),
        clock=engine.clock.now,
    )


def sqs_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"injected {code}"}}, operation)


class Refusing:
    """An SQS client that raises the next error queued for a method (``refuse``) instead of
    calling it; every other call is the client's own. ``calls`` counts the refusals made."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.queued: dict[str, list[Exception]] = {}
        self.refused = 0

    def refuse(self, method: str, *errors: Exception) -> None:
        self.queued.setdefault(method, []).extend(errors)

    def _next(self, method: str) -> Exception | None:
        errors = self.queued.get(method)
        if errors:
            self.refused += 1
            return errors.pop(0)
        return None

    def __getattr__(self, name: str) -> Any:
        original = getattr(self.client, name)

        def call(**params: Any) -> Any:
            error = self._next(name)
            if error is not None:
                raise error
            return original(**params)

        return call


class AsyncRefusing(Refusing):
    def __getattr__(self, name: str) -> Any:
        original = getattr(self.client, name)

        async def call(**params: Any) -> Any:
            error = self._next(name)
            if error is not None:
                raise error
            return await original(**params)

        return call


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def visible_again(sqs: Any, queue_url: str, body: str) -> None:
    """Wait until ``body``'s message is visible (its visibility ran out), leaving it visible."""

    def visible() -> bool:
        answer = sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=0, WaitTimeSeconds=1)
        return any(m["Body"] == body for m in answer.get("Messages", []))

    wait_for(visible, f"{body} to be visible again")


def failed_settles(caplog: pytest.LogCaptureFixture, code: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"({code}:" in r.getMessage()]


class Holder:
    """Poller B: takes ``slow`` with a 1 s visibility it does not extend, and holds it in its
    handler until released; then completes it and deletes it."""

    def __init__(self, sqs: Any, queue_url: str, guard: Idempotency, ran: Counter[str]) -> None:
        self.started, self.release = threading.Event(), threading.Event()

        def hold(message: Any) -> None:
            ran[message["Body"]] += 1
            self.started.set()
            assert self.release.wait(30)

        poller = SQSPoller(
            sqs, queue_url, guard, hold, visibility=1, wait=1, batch_size=1, extend_visibility=False
        )
        self.thread = threading.Thread(target=poller.poll_once)
        self.thread.start()
        assert self.started.wait(15)

    def finish(self) -> None:
        self.release.set()
        self.thread.join(30)


def test_sync_poller_survives_a_stale_receipt_handle(
    guard: Idempotency, sqs: Any, queue_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="firstwrite.events")
    ran: Counter[str] = Counter()
    slow_id = sqs.send_message(QueueUrl=queue_url, MessageBody="slow")["MessageId"]
    b = Holder(sqs, queue_url, guard, ran)
    visible_again(sqs, queue_url, "slow")
    sqs.send_message(QueueUrl=queue_url, MessageBody="next")

    def a_handler(message: Any) -> None:
        ran[message["Body"]] += 1
        if message["Body"] == "next":  # meanwhile B completes "slow" and deletes it
            b.finish()

    a = SQSPoller(sqs, queue_url, guard, a_handler, visibility=30, wait=1)
    thread = threading.Thread(target=a.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        wait_for(lambda: ran["next"] == 1, "A to handle next")
        sqs.send_message(QueueUrl=queue_url, MessageBody="after")
        wait_for(lambda: ran["after"] == 1 or not thread.is_alive(), "A to handle after")
        assert thread.is_alive(), "poller A stopped"
    finally:
        a.stop()
        thread.join(30)
    stale = failed_settles(caplog, "ReceiptHandleIsInvalid")
    assert stale and slow_id in stale[0] and "change_message_visibility" in stale[0]
    assert ran == {"slow": 1, "next": 1, "after": 1}


def test_async_poller_survives_a_stale_receipt_handle(
    aguard: AsyncIdempotency, guard: Idempotency, sqs: Any, queue_url: str, moto_sqs: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, logger="firstwrite.events")
    ran: Counter[str] = Counter()
    slow_id = sqs.send_message(QueueUrl=queue_url, MessageBody="slow")["MessageId"]
    b = Holder(sqs, queue_url, guard, ran)
    visible_again(sqs, queue_url, "slow")
    sqs.send_message(QueueUrl=queue_url, MessageBody="next")

    async def a_handler(message: Any) -> None:
        ran[message["Body"]] += 1
        if message["Body"] == "next":
            await asyncio.to_thread(b.finish)

    async def scenario() -> bool:
        async with aio_sqs(moto_sqs.url) as client:
            a = AsyncSQSPoller(client, queue_url, aguard, a_handler, visibility=30, wait=1)
            task = asyncio.create_task(a.run(handle_signals=False))
            try:
                deadline = time.monotonic() + 30
                while ran["next"] < 1 and time.monotonic() < deadline and not task.done():
                    await asyncio.sleep(0.05)
                await client.send_message(QueueUrl=queue_url, MessageBody="after")
                while ran["after"] < 1 and time.monotonic() < deadline and not task.done():
                    await asyncio.sleep(0.05)
                return not task.done()
            finally:
                a.stop()
                await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)

    assert asyncio.run(scenario()), "poller A stopped"
    stale = failed_settles(caplog, "ReceiptHandleIsInvalid")
    assert stale and slow_id in stale[0] and "change_message_visibility" in stale[0]
    assert ran == {"slow": 1, "next": 1, "after": 1}


def refuse_all(client: Refusing, queue_url: str) -> None:
    """One of each error a settle or a receive meets: SQS's answers for a message settled or
    received elsewhere, and a connection that fails."""
    client.refuse(
        "receive_message",
        EndpointConnectionError(endpoint_url=queue_url),
        sqs_error("InternalError", "ReceiveMessage"),
    )
    client.refuse("delete_message", sqs_error("ReceiptHandleIsInvalid", "DeleteMessage"))
    client.refuse(
        "change_message_visibility",
        sqs_error("AWS.SimpleQueueService.MessageNotInflight", "ChangeMessageVisibility"),
    )


SLOW = '{"n": 1}'  # runs past a third of its 1 s visibility: the keepalive extends it


def send_numbered(sqs: Any, queue_url: str, n: int) -> dict[str, str]:
    """``n`` messages, the first sent twice (a retrying producer): id -> body."""
    ids = {}
    for i in range(n):
        for _ in range(2 if i == 0 else 1):
            body = f'{{"n": {i}}}'
            ids[sqs.send_message(QueueUrl=queue_url, MessageBody=body)["MessageId"]] = body
    return ids


def test_sync_poller_survives_refused_settles_and_receives(
    guard: Idempotency, sqs: Any, queue_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="firstwrite.events")
    send_numbered(sqs, queue_url, 6)
    client = Refusing(sqs)
    refuse_all(client, queue_url)
    ran: Counter[str] = Counter()

    def handler(message: Any) -> None:
        ran[message["Body"]] += 1
        if message["Body"] == SLOW:  # the keepalive extends the visibility: refused once
            time.sleep(0.8)

    poller = SQSPoller(client, queue_url, guard, handler,
                       key="n", visibility=1, wait=1, retry_delay=0)  # fmt: skip
    from .test_sqs_poller import drain

    drain([poller], sqs, queue_url)
    assert client.refused == 4 and not any(client.queued.values())
    assert ran == Counter({f'{{"n": {i}}}': 1 for i in range(6)})
    assert failed_settles(caplog, "ReceiptHandleIsInvalid")
    assert failed_settles(caplog, "MessageNotInflight")
    receives = [r for r in caplog.records if r.getMessage().startswith("receiving from")]
    assert len(receives) == 2


def test_async_poller_survives_refused_settles_and_receives(
    aguard: AsyncIdempotency, sqs: Any, queue_url: str, moto_sqs: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, logger="firstwrite.events")
    send_numbered(sqs, queue_url, 6)
    ran: Counter[str] = Counter()

    async def handler(message: Any) -> None:
        ran[message["Body"]] += 1
        if message["Body"] == SLOW:
            await asyncio.sleep(0.8)

    async def scenario() -> AsyncRefusing:
        from .test_async_sqs_poller import drain

        async with aio_sqs(moto_sqs.url) as raw:
            client = AsyncRefusing(raw)
            refuse_all(client, queue_url)
            poller = AsyncSQSPoller(client, queue_url, aguard, handler,
                                    key="n", visibility=1, wait=1, retry_delay=0)  # fmt: skip
            await drain([poller], raw, queue_url)
            return client

    client = asyncio.run(scenario())
    assert client.refused == 4 and not any(client.queued.values())
    assert ran == Counter({f'{{"n": {i}}}': 1 for i in range(6)})
    assert failed_settles(caplog, "ReceiptHandleIsInvalid")
    assert failed_settles(caplog, "MessageNotInflight")
    receives = [r for r in caplog.records if r.getMessage().startswith("receiving from")]
    assert len(receives) == 2


@pytest.mark.xdist_group("rabbitmq")
def test_rabbitmq_consumer_reconnects_after_a_broker_restart(guard: Idempotency) -> None:
    pika = pytest.importorskip("pika")
    from brokers import rabbitmq_available, start_rabbitmq
    from firstwrite.events.rabbitmq import Delivery, RabbitMQConsumer

    if not rabbitmq_available():
        pytest.skip("missing tool: rabbitmq-server (install: apt-get install -y rabbitmq-server)")
    broker = start_rabbitmq()
    try:
        params = pika.ConnectionParameters("127.0.0.1", broker.port, connection_attempts=1)
        queue = f"orders-{uuid.uuid4().hex[:8]}"
        connection = pika.BlockingConnection(params)
        channel = connection.channel()
        channel.queue_declare(queue, durable=True)
        for i in range(40):
            channel.basic_publish(
                "", queue, b"{}", pika.BasicProperties(message_id=f"m-{i}", delivery_mode=2)
            )
        connection.close()
        ran: Counter[str] = Counter()

        def handler(delivery: Delivery) -> None:
            ran[str(delivery.properties.message_id)] += 1
            time.sleep(0.05)

        consumer = RabbitMQConsumer(params, queue, guard, handler, prefetch=5)
        thread = threading.Thread(target=consumer.run)
        thread.start()
        try:
            wait_for(lambda: len(ran) >= 10, "the first deliveries")
            broker.restart()
            wait_for(lambda: len(ran) == 40 or not thread.is_alive(), "the rest", timeout=60)
            assert thread.is_alive(), "the consumer stopped"
            done = {r.outcome for r in consumer.results}
            assert done <= {RecordOutcome.PROCESSED, RecordOutcome.REPLAYED}
        finally:
            consumer.stop()
            thread.join(30)
        assert set(ran) == {f"m-{i}" for i in range(40)} and set(ran.values()) == {1}
        connection = pika.BlockingConnection(params)
        depth = connection.channel().queue_declare(queue, passive=True).method.message_count
        connection.close()
        assert depth == 0
    finally:
        broker.stop()


def test_a_refused_visibility_extension_does_not_cost_the_claim(
    guard: Idempotency, sqs: Any, queue_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Poller A's every extension is refused (``MessageNotInflight``), so the queue hands the
    message to poller B after A's 1 s visibility while A's handler still works; A keeps
    renewing its claim regardless, so B finds it in progress and never runs it."""
    caplog.set_level(logging.INFO, logger="firstwrite.events")
    message_id = sqs.send_message(QueueUrl=queue_url, MessageBody="slow")["MessageId"]
    refusing = Refusing(sqs)
    refused = sqs_error("AWS.SimpleQueueService.MessageNotInflight", "ChangeMessageVisibility")
    refusing.refuse("change_message_visibility", *[refused] * 100)
    ran: list[str] = []
    b_outcomes: list[RecordOutcome] = []
    started = threading.Event()

    def slow(message: Any) -> None:
        ran.append(threading.current_thread().name)
        started.set()
        deadline = time.monotonic() + 30  # until B met it in progress, past A's lease
        while RecordOutcome.IN_PROGRESS not in b_outcomes and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)  # B tries again meanwhile: the claim must still be A's

    a = SQSPoller(refusing, queue_url, guard, slow, visibility=1, wait=1, retry_delay=0)
    b = SQSPoller(sqs, queue_url, guard, slow, visibility=1, wait=1, retry_delay=0)
    thread = threading.Thread(target=a.poll_once, name="A")
    thread.start()
    assert started.wait(15)
    while thread.is_alive():
        b_outcomes += [r.outcome for r in b.poll_once().results]
    thread.join()
    assert RecordOutcome.IN_PROGRESS in b_outcomes
    assert RecordOutcome.PROCESSED not in b_outcomes
    assert ran == ["A"]
    refusals = failed_settles(caplog, "MessageNotInflight")
    assert refusals and message_id in refusals[0]
