"""The Lambda event sources on AWS's sample events: keys, partial batch responses, ordering,
giving up after max_attempts, leases capped by the invocation's time, per-record metrics."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from firstwrite.events import (
    DynamoDBStreamBatch,
    EventBridgeEvents,
    KinesisBatch,
    NotAcknowledgedError,
    RecordOutcome,
    SNSEvents,
    SQSBatch,
    consume,
    sqs_key,
)
from firstwrite.events.attempts import AttemptLedger
from firstwrite.idempotency import Idempotency, Status
from firstwrite.testing.events import FakeContext

from .conftest import sample


class Flaky(Exception):
    pass


class Recorder:
    """A handler that records every run and fails for the ids in ``fail``."""

    def __init__(self, id_of: Any, fail: set[str] | None = None) -> None:
        self.id_of, self.fail, self.ran = id_of, fail or set(), []

    def __call__(self, record: Any) -> dict[str, str]:
        rid = self.id_of(record)
        self.ran.append(rid)
        if rid in self.fail:
            raise Flaky(f"cannot handle {rid}")
        return {"done": rid}


def failures(response: Any) -> list[str]:
    return [item["itemIdentifier"] for item in response["batchItemFailures"]]


# -- SQS standard ------------------------------------------------------------------------------


def test_sqs_batch_runs_each_message_once_and_acknowledges_replays(guard: Idempotency) -> None:
    event = sample("sqs_event")
    ids = [r["messageId"] for r in event["Records"]]
    handler = Recorder(lambda r: r["messageId"])
    batch = SQSBatch(guard)
    assert batch.handle(event, FakeContext(), handler) == {"batchItemFailures": []}
    assert batch.handle(event, FakeContext(), handler) == {"batchItemFailures": []}  # redelivered
    assert handler.ran == ids
    assert guard.get(ids[0]).status is Status.COMPLETED
    counted = guard.metrics.total  # type: ignore[attr-defined]
    assert counted("firstwrite_event_records_total", source="sqs", outcome="processed") == 2
    assert counted("firstwrite_event_records_total", source="sqs", outcome="replayed") == 2


def test_a_failed_message_is_reported_and_its_neighbours_are_not(guard: Idempotency) -> None:
    event = sample("sqs_event")
    first, second = (r["messageId"] for r in event["Records"])
    handler = Recorder(lambda r: r["messageId"], fail={first})
    batch = SQSBatch(guard)
    assert failures(batch.handle(event, FakeContext(), handler)) == [first]
    handler.fail.clear()
    assert failures(batch.handle(event, FakeContext(), handler)) == []
    assert handler.ran == [first, second, first]  # the retry ran only the failed one


def test_a_message_in_progress_elsewhere_is_reported_not_acknowledged(guard: Idempotency) -> None:
    event = sample("sqs_event")
    first = event["Records"][0]
    held = guard.claim(first["messageId"], first["body"])  # another invocation is running it
    handler = Recorder(lambda r: r["messageId"])
    result = SQSBatch(guard).process(event["Records"], FakeContext(), handler)
    assert [r.outcome for r in result.results] == [
        RecordOutcome.IN_PROGRESS,
        RecordOutcome.PROCESSED,
    ]
    assert result.item_failures == [first["messageId"]]
    assert first["messageId"] not in handler.ran
    guard.complete(held, {"done": "elsewhere"})  # type: ignore[arg-type]
    again = SQSBatch(guard).process(event["Records"], FakeContext(), handler)
    assert again.count(RecordOutcome.REPLAYED) == 2 and len(handler.ran) == 1


def test_key_selected_from_the_json_body_and_payload_mismatch(guard: Idempotency) -> None:
    event = sample("sqs_event")
    event["Records"][1]["body"] = event["Records"][0]["body"]  # same order sent twice
    handler = Recorder(lambda r: r["messageId"])
    batch = SQSBatch(guard, key="order_id")
    assert failures(batch.handle(event, FakeContext(), handler)) == []
    assert len(handler.ran) == 1 and guard.get("o-1") is not None
    # the same order id with another body is not a duplicate: reported, never run
    event["Records"][1]["body"] = json.dumps({"order_id": "o-1", "amount": 999})
    result = batch.process(event["Records"][1:], FakeContext(), handler)
    assert result.results[0].outcome is RecordOutcome.MISMATCH and len(handler.ran) == 1


def test_a_record_without_its_key_is_reported_never_run_unguarded(guard: Idempotency) -> None:
    event = sample("sqs_event")
    event["Records"][0]["body"] = json.dumps({"amount": 1})
    handler = Recorder(lambda r: r["messageId"])
    result = SQSBatch(guard, key="order_id").process(event["Records"], FakeContext(), handler)
    assert result.results[0].outcome is RecordOutcome.INVALID
    assert result.redeliver == [event["Records"][0]["messageId"]]
    assert handler.ran == [event["Records"][1]["messageId"]]


def test_a_message_that_keeps_failing_is_given_up_after_max_attempts(
    guard: Idempotency, caplog: pytest.LogCaptureFixture
) -> None:
    event = sample("sqs_event")
    event["Records"] = event["Records"][:1]
    mid = event["Records"][0]["messageId"]
    handler = Recorder(lambda r: r["messageId"], fail={mid})
    batch = SQSBatch(guard, max_attempts=3)
    assert failures(batch.handle(event, FakeContext(), handler)) == [mid]
    assert failures(batch.handle(event, FakeContext(), handler)) == [mid]
    with caplog.at_level(logging.ERROR, logger="firstwrite.events"):
        assert failures(batch.handle(event, FakeContext(), handler)) == []  # acknowledged
    assert len(handler.ran) == 3
    record = guard.get(mid)
    assert record is not None and record.status is Status.FAILED and not record.retryable
    assert "gave up after 3 attempts" in (record.error or "") and "Flaky" in (record.error or "")
    assert any("gave up after 3 attempts" in m for m in caplog.messages)
    assert AttemptLedger(guard, 3).count(mid) == 3
    # later deliveries are acknowledged without running
    assert failures(batch.handle(event, FakeContext(), handler)) == [] and len(handler.ran) == 3


def test_non_retryable_errors_and_invalid_records_are_given_up_at_once(guard: Idempotency) -> None:
    event = sample("sqs_event")
    first, second = (r["messageId"] for r in event["Records"])

    def validate(record: Any) -> None:
        if json.loads(record["body"])["amount"] > 15:
            raise ValueError("amount over the limit")

    handler = Recorder(lambda r: r["messageId"], fail={first})
    batch = SQSBatch(guard, validate=validate, non_retryable=(Flaky,))
    result = batch.process(event["Records"], FakeContext(), handler)
    assert [r.outcome for r in result.results] == [RecordOutcome.FAILED_FINAL] * 2
    assert handler.ran == [first]  # the invalid one never ran
    assert "amount over the limit" in (guard.get(second).error or "")  # type: ignore[union-attr]


def test_leases_are_capped_by_the_remaining_time_and_late_records_skipped(
    guard: Idempotency,
) -> None:
    event = sample("sqs_event")
    seen: list[int] = []

    def handler(record: Any) -> None:
        claimed = guard.get(record["messageId"])
        assert claimed is not None and claimed.lease_expires_at is not None
        seen.append(claimed.lease_expires_at)

    now_ms = guard.config.lease  # the guard's own lease is 60 s
    start = int(guard._machine.clock() * 1000)  # type: ignore[attr-defined]
    result = SQSBatch(guard, lease_margin=1.0).process(event["Records"], FakeContext(5.0), handler)
    assert result.count(RecordOutcome.PROCESSED) == 2 and now_ms == 60
    # Capped at ~4 s, not 60 s: written from the latest DynamoDB time the answers' Date (whole
    # seconds) allows, up to a second past the guard's clock.
    assert all(lease - start <= 5_500 for lease in seen)
    # with less than min_time (1 s) left, nothing is started: everything is reported
    skipped = SQSBatch(guard, lease_margin=1.0).process(
        sample("sqs_fifo_event")["Records"], FakeContext(1.5), handler
    )
    assert skipped.count(RecordOutcome.SKIPPED) == 5 and len(skipped.item_failures) == 5


# -- SQS FIFO ----------------------------------------------------------------------------------


def test_fifo_keys_on_the_deduplication_id() -> None:
    record = sample("sqs_fifo_event")["Records"][0]
    assert sqs_key(record) == "dedup-1"
    standard = sample("sqs_event")["Records"][0]
    assert sqs_key(standard) == standard["messageId"]


def test_fifo_failure_holds_back_the_rest_of_its_group_only(guard: Idempotency) -> None:
    event = sample("sqs_fifo_event")  # groups: A B A B A
    ids = [r["messageId"] for r in event["Records"]]
    handler = Recorder(lambda r: r["messageId"], fail={ids[2]})  # the middle of group A
    response = SQSBatch(guard).handle(event, FakeContext(), handler)
    assert failures(response) == [ids[2], ids[4]]  # it, and A's later message
    assert handler.ran == [ids[0], ids[1], ids[2], ids[3]]
    handler.fail.clear()
    assert failures(SQSBatch(guard).handle(event, FakeContext(), handler)) == []
    assert handler.ran[4:] == [ids[2], ids[4]]  # redelivered: A resumes in order, once each
    counted = guard.metrics.total  # type: ignore[attr-defined]
    assert counted("firstwrite_event_records_total", source="sqs_fifo", outcome="skipped") == 1


# -- Kinesis and DynamoDB Streams --------------------------------------------------------------


def test_kinesis_stops_at_the_first_failure_and_reports_only_it(guard: Idempotency) -> None:
    event = sample("kinesis_event")
    seqs = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
    handler = Recorder(lambda r: r["kinesis"]["sequenceNumber"], fail={seqs[1]})
    batch = KinesisBatch(guard)
    assert failures(batch.handle(event, FakeContext(), handler)) == [seqs[1]]
    assert handler.ran == seqs[:2]  # nothing after the checkpoint ran
    handler.fail.clear()
    # Lambda resumes the shard at the reported sequence number: records 1.. come again
    event["Records"] = event["Records"][1:]
    assert failures(batch.handle(event, FakeContext(), handler)) == []
    assert handler.ran == [seqs[0], seqs[1], seqs[1], seqs[2], seqs[3]]


def test_kinesis_key_from_base64_json_data(guard: Idempotency) -> None:
    event = sample("kinesis_event")
    event["Records"][1]["kinesis"]["data"] = event["Records"][0]["kinesis"]["data"]
    handler = Recorder(lambda r: r["kinesis"]["sequenceNumber"])
    result = KinesisBatch(guard, key="order_id").process(event["Records"], None, handler)
    assert [r.outcome for r in result.results][:2] == [
        RecordOutcome.PROCESSED,
        RecordOutcome.REPLAYED,
    ]
    decoded = json.loads(base64.b64decode(event["Records"][0]["kinesis"]["data"]))
    assert guard.get(decoded["order_id"]) is not None


def test_dynamodb_stream_reports_the_sequence_number_and_keys_on_event_id(
    guard: Idempotency,
) -> None:
    event = sample("dynamodb_stream_event")
    records = event["Records"]
    handler = Recorder(lambda r: r["eventID"], fail={records[0]["eventID"]})
    response = DynamoDBStreamBatch(guard).handle(event, FakeContext(), handler)
    assert failures(response) == [records[0]["dynamodb"]["SequenceNumber"]]
    assert handler.ran == [records[0]["eventID"]]
    handler.fail.clear()
    assert failures(DynamoDBStreamBatch(guard).handle(event, FakeContext(), handler)) == []
    assert guard.get(records[2]["eventID"]) is not None
    by_image = DynamoDBStreamBatch(guard, key="NewImage.Message.S", scope="image")
    assert by_image.process(records, None, handler).count(RecordOutcome.PROCESSED) == 3


# -- single events -----------------------------------------------------------------------------


def test_sns_runs_once_and_raises_for_lambda_to_retry(guard: Idempotency) -> None:
    event = sample("sns_event")
    handler = Recorder(
        lambda r: r["Sns"]["MessageId"], fail={"95df01b4-ee98-5cb9-9903-4c221d41eb5e"}
    )
    sns = SNSEvents(guard)
    with pytest.raises(NotAcknowledgedError) as raised:
        sns.handle(event, FakeContext(), handler)
    assert raised.value.result.outcome is RecordOutcome.FAILED
    handler.fail.clear()
    assert sns.handle(event, FakeContext(), handler).count(RecordOutcome.PROCESSED) == 1
    assert sns.handle(event, FakeContext(), handler).count(RecordOutcome.REPLAYED) == 1
    assert len(handler.ran) == 2


def test_eventbridge_in_progress_raises_and_replay_returns(guard: Idempotency) -> None:
    event = sample("eventbridge_event")
    handler = Recorder(lambda e: e["id"])
    held = guard.claim(event["id"], event["detail"])
    with pytest.raises(NotAcknowledgedError) as raised:
        EventBridgeEvents(guard).handle(event, FakeContext(), handler)
    assert raised.value.result.outcome is RecordOutcome.IN_PROGRESS and handler.ran == []
    guard.fail(held, "crashed", retryable=True)  # type: ignore[arg-type]
    assert EventBridgeEvents(guard).handle(event, None, handler).outcome is RecordOutcome.PROCESSED
    assert EventBridgeEvents(guard).handle(event, None, handler).outcome is RecordOutcome.REPLAYED
    assert handler.ran == [event["id"]]


# -- the core on any records -------------------------------------------------------------------


def test_consume_any_broker(guard: Idempotency) -> None:
    records = [{"id": "m1", "v": 1}, {"id": "m2", "v": 2}, {"id": "m1", "v": 1}]
    ran: list[str] = []
    result = consume(
        records,
        lambda r: ran.append(r["id"]),
        guard=guard,
        key=lambda r: r["id"],
        payload=lambda r: r["v"],
        source="mine",
    )
    assert [r.outcome for r in result.results] == [
        RecordOutcome.PROCESSED,
        RecordOutcome.PROCESSED,
        RecordOutcome.REPLAYED,
    ]
    assert ran == ["m1", "m2"] and result.redeliver == []


def test_with_the_disable_switch_every_message_just_runs(
    make_guard: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guard built with FIRSTWRITE_IDEMPOTENCY_DISABLED: a redelivered message runs again, a
    failure is still reported for redelivery, and no record is written."""
    monkeypatch.setenv("FIRSTWRITE_IDEMPOTENCY_DISABLED", "1")
    guard = make_guard()
    event = sample("sqs_event")
    first, second = (r["messageId"] for r in event["Records"])
    handler = Recorder(lambda r: r["messageId"], fail={second})
    batch = SQSBatch(guard, key="body.no_such_field")  # no key needed either
    assert failures(batch.handle(event, FakeContext(), handler)) == [second]
    assert failures(batch.handle(event, FakeContext(), handler)) == [second]
    assert handler.ran == [first, second, first, second]
    assert guard.get(first) is None and guard.get(second) is None
    counted = guard.metrics.total  # type: ignore[attr-defined]
    assert counted("firstwrite_event_records_total", source="sqs", outcome="processed") == 2
    assert counted("firstwrite_event_records_total", source="sqs", outcome="failed") == 2
