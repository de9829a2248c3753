"""A batch's redelivered records (SQS ``ApproximateReceiveCount`` above 1) are read first, in one
consistent BatchGetItem: those stored done are replayed without a claim, every other one is
claimed exactly as on a first delivery. On the local engine through a real boto3 client whose
calls are recorded; the sync and the asyncio consumer."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from firstwrite.engine import Engine, local_client
from firstwrite.events import Consumer, RecordOutcome, SQSBatch
from firstwrite.events.aio import AsyncConsumer
from firstwrite.idempotency import (
    AsyncIdempotency,
    Idempotency,
    IdempotencyConfig,
    MemoryMetrics,
    Replay,
)
from firstwrite.idempotency.aio import ThreadedClient
from firstwrite.testing.events import FakeContext

from .conftest import sample

TABLE = "events-idem"


class Calls:
    """The DynamoDB operations a client makes, with each one's key (or keys)."""

    def __init__(self, client: Any) -> None:
        self.made: list[tuple[str, list[str]]] = []
        client.meta.events.register("provide-client-params.dynamodb.*", self._note)

    def _note(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if "RequestItems" in params:
            keys = [k["pk"]["S"] for spec in params["RequestItems"].values() for k in spec["Keys"]]
        else:
            keys = [(params.get("Item") or params.get("Key") or {}).get("pk", {}).get("S", "")]
        self.made.append((model.name, keys))

    def of(self, operation: str) -> list[list[str]]:
        return [keys for name, keys in self.made if name == operation]


@pytest.fixture
def client(engine: Engine) -> Any:
    return local_client(engine)


@pytest.fixture
def calls(client: Any) -> Calls:
    return Calls(client)


def make_guard(engine: Engine, client: Any, **config: Any) -> Idempotency:
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE, **config),
        client=client,
        clock=engine.clock.now,
        metrics=MemoryMetrics(),
    )
    guard.ensure_table()
    return guard


def messages(*names: str, receive_count: int) -> list[dict[str, Any]]:
    template = sample("sqs_event")["Records"][0]
    records = []
    for name in names:
        record = json.loads(json.dumps(template))
        record["messageId"] = f"m-{name}"
        record["body"] = json.dumps({"order_id": name})
        record["attributes"]["ApproximateReceiveCount"] = str(receive_count)
        records.append(record)
    return records


class Handler:
    def __init__(self, fail: set[str] | None = None) -> None:
        self.ran: list[str] = []
        self.fail = fail or set()

    def __call__(self, record: Any) -> str:
        self.ran.append(record["messageId"])
        if record["messageId"] in self.fail:
            raise RuntimeError("boom")
        return "ok"


def test_done_records_replay_from_one_read_and_the_others_are_claimed(
    engine: Engine, client: Any, calls: Calls
) -> None:
    guard = make_guard(engine, client)
    batch = SQSBatch(guard)
    handler = Handler(fail={"m-failed"})
    first = batch.process(messages("done", "failed", receive_count=1), FakeContext(), handler)
    assert [r.outcome for r in first.results] == [RecordOutcome.PROCESSED, RecordOutcome.FAILED]
    held = guard.claim("m-running", json.dumps({"order_id": "running"}))  # another invocation
    other = guard.claim("m-mismatch", json.dumps({"order_id": "something else"}))
    guard.complete(other, "theirs")  # type: ignore[arg-type]
    assert calls.of("BatchGetItem") == []  # a first delivery never reads first
    calls.made.clear()
    handler.fail.clear()

    names = ("done", "failed", "running", "mismatch", "fresh")
    again = batch.process(messages(*names, receive_count=2), FakeContext(), handler)

    assert [r.outcome for r in again.results] == [
        RecordOutcome.REPLAYED,  # from the read: no claim
        RecordOutcome.PROCESSED,  # failed before, retryable: claimed and run again
        RecordOutcome.IN_PROGRESS,  # another invocation holds it: not run
        RecordOutcome.MISMATCH,  # another payload under its key: not run
        RecordOutcome.PROCESSED,  # never seen (lost before its claim): claimed and run
    ]
    assert handler.ran == ["m-done", "m-failed", "m-failed", "m-fresh"]
    assert calls.of("BatchGetItem") == [[f"IDEMPOTENCY#m-{n}" for n in names]]
    claimed = [keys[0] for keys in calls.of("PutItem")]
    assert "IDEMPOTENCY#m-done" not in claimed
    assert {f"IDEMPOTENCY#m-{n}" for n in names[1:]} <= set(claimed)
    assert again.item_failures == ["m-running", "m-mismatch"]
    guard.complete(held, "elsewhere")  # type: ignore[arg-type]
    once_more = batch.process(messages(*names, receive_count=3), FakeContext(), handler)
    assert once_more.count(RecordOutcome.REPLAYED) == 4  # all but the mismatch, from the read
    assert [keys[0] for keys in calls.of("PutItem")] == [*claimed, "IDEMPOTENCY#m-mismatch"]
    counted = guard.metrics.total  # type: ignore[attr-defined]
    assert counted("firstwrite_event_records_total", source="sqs", outcome="replayed") == 5


def test_a_done_record_past_its_retention_is_claimed_not_replayed(
    engine: Engine, client: Any, calls: Calls
) -> None:
    guard = make_guard(engine, client)
    batch = SQSBatch(guard)
    handler = Handler()
    batch.process(messages("old", receive_count=1), FakeContext(), handler)
    engine.clock.advance(2 * 24 * 3600)  # still stored, but past its retention (24 h)
    calls.made.clear()
    again = batch.process(messages("old", receive_count=2), FakeContext(), handler)
    assert calls.of("BatchGetItem") == [["IDEMPOTENCY#m-old"]]
    assert calls.of("PutItem") == [["IDEMPOTENCY#m-old"]]  # the claim decided
    assert [r.outcome for r in again.results] == [RecordOutcome.PROCESSED]
    assert handler.ran == ["m-old", "m-old"]


class Unreadable(Idempotency):
    """A guard whose batch read fails (DynamoDB throttling it, say)."""

    def replays(self, requests: Any, *, scope: str | None = None, budget: Any = None) -> Any:
        raise RuntimeError("throttled")


def test_a_failed_read_leaves_every_record_to_its_claim(
    engine: Engine, client: Any, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    guard = Unreadable(IdempotencyConfig(table_name=TABLE), client=client, clock=engine.clock.now)
    guard.ensure_table()
    batch = SQSBatch(guard)
    handler = Handler()
    batch.process(messages("a", "b", receive_count=1), FakeContext(), handler)
    with caplog.at_level(logging.WARNING, logger="firstwrite.events"):
        again = batch.process(messages("a", "b", "c", receive_count=2), FakeContext(), handler)
    assert [r.outcome for r in again.results] == [
        RecordOutcome.REPLAYED,
        RecordOutcome.REPLAYED,
        RecordOutcome.PROCESSED,
    ]
    assert handler.ran == ["m-a", "m-b", "m-c"]
    assert any("could not read 3 redelivered records" in m for m in caplog.messages)


def test_more_than_a_hundred_redelivered_records_are_read_in_chunks(
    engine: Engine, client: Any, calls: Calls
) -> None:
    guard = make_guard(engine, client)
    consumer: Consumer[dict[str, Any]] = Consumer(
        guard, key=lambda r: r["messageId"], redelivered=lambda r: True
    )
    records = [{"messageId": f"k{i}"} for i in range(150)]
    for record in records[:120]:
        guard.complete(guard.claim(record["messageId"]), "done")  # type: ignore[arg-type]
    calls.made.clear()
    ran: list[str] = []
    result = consumer.consume(records, lambda r: ran.append(r["messageId"]))
    assert [len(keys) for keys in calls.of("BatchGetItem")] == [100, 50]
    assert result.count(RecordOutcome.REPLAYED) == 120 and ran == [f"k{i}" for i in range(120, 150)]
    assert len(calls.of("PutItem")) == 30


@pytest.fixture
def aguard(engine: Engine, client: Any) -> Iterator[AsyncIdempotency]:
    guard = AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE), client=ThreadedClient(client), clock=engine.clock.now
    )
    asyncio.run(guard.ensure_table())
    yield guard


def test_the_asyncio_consumer_reads_redelivered_records_first(
    aguard: AsyncIdempotency, calls: Calls
) -> None:
    consumer = AsyncConsumer(
        Consumer(aguard, key=lambda r: r["id"], redelivered=lambda r: r["count"] > 1)
    )
    ran: list[str] = []

    async def handler(record: Any) -> str:
        ran.append(record["id"])
        return "ok"

    async def main() -> list[RecordOutcome]:
        await consumer.consume([{"id": "a", "count": 1}], handler)
        calls.made.clear()
        again = [{"id": "a", "count": 2}, {"id": "b", "count": 2}]
        return [r.outcome for r in (await consumer.consume(again, handler)).results]

    assert asyncio.run(main()) == [RecordOutcome.REPLAYED, RecordOutcome.PROCESSED]
    assert ran == ["a", "b"]
    assert calls.of("BatchGetItem") == [["IDEMPOTENCY#a", "IDEMPOTENCY#b"]]
    assert [keys[0] for keys in calls.of("PutItem")] == ["IDEMPOTENCY#b"]
    replays = asyncio.run(aguard.replays([("a", None), ("b", None), ("c", None)]))
    assert [type(r) for r in replays] == [Replay, Replay, type(None)]


class WithoutBatchReads:
    """A client that has every operation the layer calls but ``BatchGetItem``."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        if name == "batch_get_item":
            raise AttributeError(name)
        return getattr(self._client, name)


def test_a_client_without_batch_reads_claims_every_record(
    engine: Engine, client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(engine, WithoutBatchReads(client))
    batch = SQSBatch(guard)
    handler = Handler()
    batch.process(messages("a", receive_count=1), FakeContext(), handler)
    with caplog.at_level(logging.WARNING, logger="firstwrite.events"):
        again = batch.process(messages("a", "b", receive_count=2), FakeContext(), handler)
    assert [r.outcome for r in again.results] == [RecordOutcome.REPLAYED, RecordOutcome.PROCESSED]
    assert handler.ran == ["m-a", "m-b"]
    assert any("could not read 2 redelivered records" in m for m in caplog.messages)


def test_a_missing_table_is_named_by_the_batch_read(engine: Engine, client: Any) -> None:
    from firstwrite.idempotency import TableNotFoundError

    guard = Idempotency(IdempotencyConfig(table_name="nowhere"), client=client)
    with pytest.raises(TableNotFoundError, match="nowhere"):
        guard.replays([("a", None)])
