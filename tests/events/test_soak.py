"""Soak: many records, duplicates and redeliveries, 4 consumers in threads on one table.

Each record is published once, a quarter of them twice (a retrying producer), and a tenth of
the acknowledged deliveries come back anyway (a lost acknowledgement); one record in twenty
fails its first run, and a few poison records fail every run. Every delivery not acknowledged
is delivered again. At the end: no record ran twice, and every record ran once or is stored
FAILED for good with its reason. The short form runs always; the full one (10,000 records) is
``slow``.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from firstwrite.events import Consumer, RecordOutcome
from firstwrite.idempotency import Idempotency, Status


@dataclass(frozen=True)
class Message:
    key: str
    body: str
    delivery: int


def soak(make_guard: Callable[..., Idempotency], n: int, consumers: int = 4) -> dict[str, Any]:
    rng = random.Random(29)
    guard = make_guard(lease=30)
    keys = [f"rec-{i}" for i in range(n)]
    poison = set(rng.sample(keys, max(1, n // 500)))
    flaky = set(rng.sample(keys, n // 20)) - poison
    inbox: queue.Queue[Message | None] = queue.Queue()
    published = 0
    for key in keys:
        inbox.put(Message(key, f"body of {key}", 1))
        published += 1
        if rng.random() < 0.25:
            inbox.put(Message(key, f"body of {key}", 1))  # a duplicate publish
            published += 1
    lock = threading.Lock()
    executed: Counter[str] = Counter()
    tried: Counter[str] = Counter()
    outcomes: Counter[RecordOutcome] = Counter()
    deliveries = [published]
    acknowledged_keys: set[str] = set()
    redeliver_after_ack = random.Random(7)

    def handler(message: Message) -> None:
        with lock:
            tried[message.key] += 1
            first_try = tried[message.key] == 1
        if message.key in poison or (message.key in flaky and first_try):
            raise RuntimeError(f"{message.key} cannot be handled")
        with lock:
            executed[message.key] += 1  # the side effect, committed

    def work() -> None:
        consumer: Consumer[Message] = Consumer(
            guard, key=lambda m: m.key, payload=lambda m: m.body, source="soak", max_attempts=3
        )
        while True:
            batch: list[Message] = []
            try:
                while len(batch) < 10:
                    item = inbox.get(timeout=0.05 if batch else 2)
                    if item is None:
                        inbox.put(None)
                        break
                    batch.append(item)
            except queue.Empty:
                pass
            if not batch:
                if inbox.empty() and pending() == 0:
                    return
                continue
            result = consumer.consume(batch, handler)
            again = []
            for message, record in zip(batch, result.results, strict=True):
                with lock:
                    outcomes[record.outcome] += 1
                    if record.acknowledged:
                        acknowledged_keys.add(message.key)
                if not record.acknowledged:
                    again.append(message)
                elif redeliver_after_ack.random() < 0.10 and message.delivery < 3:
                    again.append(message)  # the ack was lost: the broker delivers it again
            for message in again:
                with lock:
                    deliveries[0] += 1
                inbox.put(Message(message.key, message.body, message.delivery + 1))
            with lock:
                in_flight[0] -= len(batch)
                in_flight[0] += len(again)

    in_flight = [published]

    def pending() -> int:
        with lock:
            return in_flight[0]

    started = time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    elapsed = time.monotonic() - started
    double = {k: c for k, c in executed.items() if c > 1}
    lost = []
    given_up = 0
    for key in keys:
        if executed[key] == 1:
            continue
        record = guard.get(key)
        if record is not None and record.status is Status.FAILED and not record.retryable:
            assert "gave up after" in (record.error or ""), record.error
            given_up += 1
        else:
            lost.append(key)
    extra = deliveries[0] - n
    return {
        "records": n,
        "deliveries": deliveries[0],
        "duplicates_and_redeliveries": extra,
        "double": double,
        "lost": lost,
        "given_up": given_up,
        "poison": len(poison),
        "outcomes": outcomes,
        "seconds": elapsed,
    }


def check(report: dict[str, Any]) -> None:
    assert report["double"] == {}
    assert report["lost"] == []
    assert report["given_up"] == report["poison"]
    assert report["duplicates_and_redeliveries"] >= 0.2 * report["records"]
    assert report["outcomes"][RecordOutcome.REPLAYED] > 0
    assert report["outcomes"][RecordOutcome.FAILED] > 0


def test_soak_short(make_guard: Callable[..., Idempotency]) -> None:
    check(soak(make_guard, 600))


@pytest.mark.slow
def test_soak_10k(make_guard: Callable[..., Idempotency]) -> None:
    report = soak(make_guard, 10_000)
    print({k: (dict(v) if isinstance(v, Counter) else v) for k, v in report.items() if k != "lost"})
    check(report)
