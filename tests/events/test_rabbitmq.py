"""The RabbitMQ consumer on a real broker (Debian's rabbitmq-server): duplicates published by a
retrying producer run once across two consumers in threads; a failure is nacked, redelivered
and run again; a message that keeps failing is given up and acked."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from firstwrite.events import RecordOutcome
from firstwrite.events.rabbitmq import Delivery, RabbitMQConsumer
from firstwrite.idempotency import Idempotency, Status

pika = pytest.importorskip("pika")
pytestmark = pytest.mark.xdist_group("rabbitmq")


def publish(params: Any, queue: str, messages: list[tuple[str, bytes]]) -> None:
    connection = pika.BlockingConnection(params)
    channel = connection.channel()
    channel.queue_declare(queue)
    for message_id, body in messages:
        channel.basic_publish("", queue, body, pika.BasicProperties(message_id=message_id))
    connection.close()


def queue_depth(params: Any, queue: str) -> int:
    connection = pika.BlockingConnection(params)
    depth = int(connection.channel().queue_declare(queue, passive=True).method.message_count)
    connection.close()
    return depth


def run_until(consumers: list[RabbitMQConsumer], done: Any, timeout: float = 30) -> None:
    threads = [threading.Thread(target=c.run) for c in consumers]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.1)
    finally:
        for c in consumers:
            c.stop()
        for t in threads:
            t.join(30)


def test_duplicates_run_once_across_two_consumers(guard: Idempotency, rabbitmq: Any) -> None:
    params = pika.ConnectionParameters("127.0.0.1", rabbitmq.port)
    queue = f"orders-{uuid.uuid4().hex[:8]}"
    messages = [(f"m-{i}", f'{{"n": {i}}}'.encode()) for i in range(30)]
    publish(params, queue, messages + messages[:15])  # half of them sent twice
    ran: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(delivery: Delivery) -> None:
        with lock:
            ran[str(delivery.properties.message_id)] += 1

    consumers = [RabbitMQConsumer(params, queue, guard, handler, prefetch=5) for _ in range(2)]
    run_until(consumers, lambda: sum(len(c.results) for c in consumers) >= 45)
    assert len(ran) == 30 and set(ran.values()) == {1}
    assert queue_depth(params, queue) == 0
    outcomes = Counter(r.outcome for c in consumers for r in c.results)
    assert outcomes[RecordOutcome.PROCESSED] == 30
    assert outcomes[RecordOutcome.REPLAYED] + outcomes[RecordOutcome.IN_PROGRESS] >= 15


def test_failures_are_redelivered_then_given_up(guard: Idempotency, rabbitmq: Any) -> None:
    params = pika.ConnectionParameters("127.0.0.1", rabbitmq.port)
    queue = f"flaky-{uuid.uuid4().hex[:8]}"
    publish(params, queue, [("once", b"{}"), ("never", b"{}")])
    attempts: Counter[str] = Counter()

    def handler(delivery: Delivery) -> None:
        message_id = str(delivery.properties.message_id)
        attempts[message_id] += 1
        if message_id == "never" or attempts[message_id] == 1:
            raise RuntimeError(f"{message_id} failed")

    consumer = RabbitMQConsumer(params, queue, guard, handler, max_attempts=3, retry_delay=0.05)
    run_until(
        [consumer],
        lambda: sum(r.acknowledged for r in consumer.results) >= 2,
    )
    assert attempts == {"once": 2, "never": 3}
    never = guard.get("never")
    assert never is not None and never.status is Status.FAILED and not never.retryable
    assert "gave up after 3 attempts" in (never.error or "")
    assert guard.get("once").status is Status.COMPLETED  # type: ignore[union-attr]
    assert queue_depth(params, queue) == 0
