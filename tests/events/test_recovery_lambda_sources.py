"""``reconcile=`` on every Lambda event source: a record whose earlier run marked a recovery
point and died (claimed, marked, never completed, its lease over on the engine's clock) is
settled by the source's hook, never run again; without a hook it is refused, reported for
redelivery and counted in ``firstwrite_recovery_takeovers_total``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from firstwrite.events import (
    DynamoDBStreamBatch,
    EventBridgeEvents,
    KinesisBatch,
    LambdaSource,
    NotAcknowledgedError,
    RecordOutcome,
    SNSEvents,
    SQSBatch,
)
from firstwrite.idempotency import (
    ConfigurationError,
    FailedFinally,
    Idempotency,
    Interrupted,
    NotDone,
    Status,
)
from firstwrite.testing.events import FakeContext

from ._recovery import PROVIDER, counted, ledger_hook
from ._recovery import died_after_marking as marked_and_died
from .conftest import sample


@pytest.fixture(autouse=True)
def _provider() -> None:
    PROVIDER.clear()


def died_after_marking(
    guard: Idempotency, engine: Any, source: LambdaSource[Any], record: Any, charged: bool
) -> str:
    return marked_and_died(guard, engine, source.consumer, record, charged)


class Handler:
    def __init__(self, id_of: Callable[[Any], str]) -> None:
        self.id_of, self.ran = id_of, []

    def __call__(self, record: Any) -> dict[str, str]:
        self.ran.append(self.id_of(record))
        return {"ran": self.id_of(record)}


def failures(response: Any) -> list[str]:
    return [item["itemIdentifier"] for item in response["batchItemFailures"]]


# -- SQS ---------------------------------------------------------------------------------------


def test_sqs_reconciles_a_message_whose_run_died_after_marking(
    guard: Idempotency, engine: Any
) -> None:
    event = sample("sqs_event")
    first, second = (r["messageId"] for r in event["Records"])
    batch = SQSBatch(guard, reconcile=ledger_hook)
    reference = died_after_marking(guard, engine, batch, event["Records"][0], charged=True)
    handler = Handler(lambda r: r["messageId"])
    assert batch.handle(event, FakeContext(), handler) == {"batchItemFailures": []}
    assert handler.ran == [second]  # the first message's charge was found, not made again
    record = guard.get(first)
    assert record is not None and record.status is Status.COMPLETED
    assert json.loads(str(record.result)) == {"charge": reference}
    assert counted(guard, "reconciled") == 1


def test_sqs_without_a_hook_refuses_the_message_and_a_hook_settles_its_redelivery(
    guard: Idempotency, engine: Any
) -> None:
    event = sample("sqs_event")
    first, second = (r["messageId"] for r in event["Records"])
    blind = SQSBatch(guard)
    died_after_marking(guard, engine, blind, event["Records"][0], charged=True)
    handler = Handler(lambda r: r["messageId"])
    assert failures(blind.handle(event, FakeContext(), handler)) == [first]
    assert handler.ran == [second]
    assert counted(guard, "refused") == 1
    record = guard.get(first)
    assert record is not None and record.status is Status.PENDING  # left for a hook
    total = guard.metrics.total  # type: ignore[attr-defined]
    assert total("firstwrite_event_records_total", source="sqs", outcome="failed") == 1
    # SQS delivers it again (a redelivery is read in one BatchGetItem first): now with a hook
    for r in event["Records"]:
        r["attributes"]["ApproximateReceiveCount"] = "2"
    batch = SQSBatch(guard, reconcile=ledger_hook)
    assert batch.handle(event, FakeContext(), handler) == {"batchItemFailures": []}
    assert handler.ran == [second]
    assert counted(guard, "reconciled") == 1


def test_not_done_runs_the_message_and_failed_finally_gives_it_up(
    guard: Idempotency, engine: Any
) -> None:
    event = sample("sqs_event")
    first, second = (r["messageId"] for r in event["Records"])
    batch = SQSBatch(guard, reconcile=ledger_hook)
    died_after_marking(guard, engine, batch, event["Records"][0], charged=False)
    handler = Handler(lambda r: r["messageId"])
    assert batch.handle(event, FakeContext(), handler) == {"batchItemFailures": []}
    assert handler.ran == [first, second]  # not charged: the handler runs, once
    assert counted(guard, "not_done") == 1

    declined = SQSBatch(guard, reconcile=lambda interrupted: FailedFinally("card declined"))
    other = sample("sqs_event")
    other["Records"] = other["Records"][:1]
    other["Records"][0]["messageId"] = "declined-1"
    died_after_marking(guard, engine, declined, other["Records"][0], charged=True)
    result = declined.process(other["Records"], FakeContext(), handler).results[0]
    assert result.outcome is RecordOutcome.FAILED_FINAL and result.acknowledged
    assert result.reason == "card declined"
    assert handler.ran == [first, second]
    record = guard.get("declined-1")
    assert record is not None and record.status is Status.FAILED and not record.retryable


# -- Kinesis: a refused record stops the shard ---------------------------------------------------


def test_kinesis_reconciles_and_without_a_hook_stops_the_shard_at_the_refused_record(
    guard: Idempotency, engine: Any
) -> None:
    event = sample("kinesis_event")
    seqs = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
    blind = KinesisBatch(guard)
    died_after_marking(guard, engine, blind, event["Records"][0], charged=True)
    handler = Handler(lambda r: r["kinesis"]["sequenceNumber"])
    assert failures(blind.handle(event, FakeContext(), handler)) == [seqs[0]]
    assert handler.ran == []  # the records after it wait for the redelivery
    assert counted(guard, "refused") == 1
    batch = KinesisBatch(guard, reconcile=ledger_hook)
    assert batch.handle(event, FakeContext(), handler) == {"batchItemFailures": []}
    assert handler.ran == seqs[1:]
    assert counted(guard, "reconciled") == 1


# -- every Lambda source passes its hook ---------------------------------------------------------


SOURCES: dict[str, tuple[type[LambdaSource[Any]], Callable[[], Any], Callable[[Any], Any]]] = {
    "sqs": (SQSBatch, lambda: sample("sqs_event"), lambda e: e["Records"]),
    "kinesis": (KinesisBatch, lambda: sample("kinesis_event"), lambda e: e["Records"]),
    "dynamodb_streams": (
        DynamoDBStreamBatch,
        lambda: sample("dynamodb_stream_event"),
        lambda e: e["Records"],
    ),
    "sns": (SNSEvents, lambda: sample("sns_event"), lambda e: e["Records"]),
    "eventbridge": (EventBridgeEvents, lambda: sample("eventbridge_event"), lambda e: [e]),
}


REKEY: dict[str, Callable[[Any], None]] = {  # another key for the source's sample record
    "sqs": lambda r: r.update(messageId="other-message"),
    "kinesis": lambda r: r["kinesis"].update(sequenceNumber="other-sequence"),
    "dynamodb_streams": lambda r: r.update(eventID="other-event"),
    "sns": lambda r: r["Sns"].update(MessageId="other-notification"),
    "eventbridge": lambda r: r.update(id="other-event"),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_lambda_source_settles_a_marked_record_with_its_hook(
    name: str, guard: Idempotency, engine: Any
) -> None:
    kind, make_event, records_of = SOURCES[name]
    event = make_event()
    records = records_of(event)
    source = kind(guard, reconcile=ledger_hook)
    died_after_marking(guard, engine, source, records[0], charged=True)
    ran: list[Any] = []
    result = source.process(records, FakeContext(), ran.append)
    assert result.results[0].outcome is RecordOutcome.REPLAYED
    assert records[0] not in ran and len(ran) == len(records) - 1
    # the same source without a hook, on another record: refused, not acknowledged (SNS and
    # EventBridge raise so that Lambda retries the invocation)
    fresh = make_event()
    first = records_of(fresh)[0]
    REKEY[name](first)
    if name not in ("sns", "eventbridge"):
        fresh["Records"] = [first]
    blind = kind(guard)
    died_after_marking(guard, engine, blind, first, charged=True)
    if name in ("sns", "eventbridge"):
        with pytest.raises(NotAcknowledgedError, match="recovery required"):
            blind.handle(fresh, FakeContext(), ran.append)
    else:
        response = blind.handle(fresh, FakeContext(), ran.append)
        assert len(response["batchItemFailures"]) == 1
    assert first not in ran
    assert counted(guard, "refused") == 1 and counted(guard, "reconciled") == 1


def test_a_synchronous_source_refuses_a_coroutine_hook(guard: Idempotency) -> None:
    async def hook(interrupted: Interrupted) -> NotDone:
        return NotDone()

    with pytest.raises(ConfigurationError, match="coroutine function"):
        SQSBatch(guard, reconcile=hook)


def test_consume_passes_its_hook(guard: Idempotency, engine: Any) -> None:
    from firstwrite.events import Consumer, consume

    record = {"id": "r-1"}
    key_of = lambda r: r["id"]  # noqa: E731
    marked_and_died(guard, engine, Consumer(guard, key_of), record, charged=True)
    ran: list[Any] = []
    blind = consume([record], ran.append, guard=guard, key=key_of)
    assert blind.redeliver == ["r-1"] and ran == []
    batch = consume([record], ran.append, guard=guard, key=key_of, reconcile=ledger_hook)
    assert batch.results[0].outcome is RecordOutcome.REPLAYED and ran == []
