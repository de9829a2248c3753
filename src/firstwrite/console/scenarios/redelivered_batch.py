"""Scenario 8: a redelivered batch. An SQS batch with duplicates and failures, handled exactly once.

An SQS batch (the Lambda event shape) is handled by :class:`firstwrite.events.SQSBatch`,
delivered three times: first with a duplicate inside it and two records that fail; then the
two records its partial batch response reported; then the whole batch again, as after a lost
deletion. Each record's outcome is shown, and the verdict is computed from the side effects.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from firstwrite.events import BatchResult, RecordOutcome, SQSBatch
from firstwrite.events.shapes import SQSRecord
from firstwrite.idempotency import IdempotencyConfig, Status

from .stage import Stage

TABLE = "orders-idempotency"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:orders"
MAX_ATTEMPTS = 2
# (messageId, order): m-3 is a producer's duplicate of m-2 (same order, another message);
# o-3 fails at its first run only, o-4 at every run.
MESSAGES = (("m-1", "o-1"), ("m-2", "o-2"), ("m-3", "o-2"), ("m-4", "o-3"), ("m-5", "o-4"))
FLAKY, POISON = "o-3", "o-4"

_SAID = {
    RecordOutcome.PROCESSED: "ran",
    RecordOutcome.REPLAYED: "replayed (ran before: not run again)",
    RecordOutcome.REPLAYED_FAILURE: "replayed (given up before: not run again)",
    RecordOutcome.FAILED: "reported for redelivery",
    RecordOutcome.FAILED_FINAL: "FAILED final",
}


def _record(message_id: str, order: str, receives: int) -> SQSRecord:
    body = json.dumps({"order_id": order, "amount": 10})
    return {
        "messageId": message_id,
        "receiptHandle": f"rh-{message_id}-{receives}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receives),
            "SentTimestamp": "1700000000000",
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": "1700000000000",
        },
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def run(stage: Stage) -> str:
    config = IdempotencyConfig(table_name=TABLE)
    guard = stage.guard(config)
    guard.ensure_table()
    for order in (FLAKY, POISON):
        stage.watch_record(f"the record of order {order}", config, order)
    orders = SQSBatch(guard, key="order_id", max_attempts=MAX_ATTEMPTS)
    shipped: Counter[str] = Counter()  # the side effect: runs that finished
    runs: Counter[str] = Counter()  # every run, finished or not

    def ship(record: SQSRecord) -> dict[str, object]:
        order = json.loads(record["body"])["order_id"]
        runs[order] += 1
        if order == POISON or (order == FLAKY and runs[order] == 1):
            stage.note(f"handler for {order}: raised (run {runs[order]})")
            raise RuntimeError(f"the warehouse refused {order}")
        shipped[order] += 1
        stage.note(f"side effect: order {order} shipped")
        return {"shipped": order}

    def deliver(n: int, records: Sequence[SQSRecord]) -> tuple[BatchResult, list[str]]:
        with stage.actor(f"invocation {n}"):
            batch = orders.process(records, None, ship)
        for record, result in zip(records, batch.results, strict=True):
            order = json.loads(record["body"])["order_id"]
            said = _SAID.get(result.outcome, result.outcome.value)
            if result.outcome is RecordOutcome.FAILED_FINAL:
                said += f" after {result.attempts} attempts ({result.reason})"
            stage.note(f"record {result.id} (order {order}): {said}")
        failures = batch.item_failures
        stage.note(f"partial batch response: batchItemFailures = {failures}")
        return batch, failures

    everything = [_record(m, o, 1) for m, o in MESSAGES]
    with stage.step(
        "The first delivery",
        "Five messages in one batch. m-3 is a producer's duplicate of m-2 (the same order, "
        "another message id), so it is replayed, not run. o-3 and o-4 raise: their claims are "
        "stored FAILED (retryable) with the attempt counted, and the partial batch response "
        "reports them, so SQS deletes the three others and delivers those two again.",
    ) as delivered:
        first, first_failures = deliver(1, everything)
    with stage.step(
        "The reported records, redelivered",
        "SQS delivers m-4 and m-5 again. o-3 runs and succeeds. o-4 fails a second time: with "
        f"max_attempts={MAX_ATTEMPTS} it is given up, stored FAILED for good with its reason, "
        "and acknowledged so that it stops coming back (it is logged at ERROR).",
    ) as redelivered:
        again = [_record(m, o, 2) for m, o in MESSAGES if m in first_failures]
        second, second_failures = deliver(2, again)
    with stage.step(
        "The whole batch, once more",
        "A deletion was lost (or the function timed out after its work): the whole batch comes "
        "back. Every record is answered from its stored outcome; nothing runs.",
    ) as once_more:
        runs_before = sum(runs.values())
        third, third_failures = deliver(3, [_record(m, o, 3) for m, o in MESSAGES])

    def outcomes(batch: BatchResult) -> list[RecordOutcome]:
        return [r.outcome for r in batch.results]

    stage.check(
        "each record's side effect ran exactly once (o-1, o-2, o-3 shipped once each)",
        dict(shipped) == {"o-1": 1, "o-2": 1, "o-3": 1},
    )
    stage.check(
        "the duplicate inside the batch was replayed, not run",
        outcomes(first)[2] is RecordOutcome.REPLAYED,
        shown_by=delivered,
    )
    stage.check(
        "the first response reported exactly the two records that failed",
        first_failures == ["m-4", "m-5"],
        shown_by=delivered,
    )
    stage.check(
        "on redelivery o-3 ran, o-4 was given up after max_attempts and acknowledged",
        outcomes(second) == [RecordOutcome.PROCESSED, RecordOutcome.FAILED_FINAL]
        and second_failures == [],
        shown_by=redelivered,
    )
    stage.check(
        f"o-4 ran {MAX_ATTEMPTS} times and no more",
        runs[POISON] == MAX_ATTEMPTS,
        shown_by=redelivered,
    )
    poison = guard.get(POISON)
    stage.check(
        "o-4's record is FAILED for good, with its reason",
        poison is not None and poison.status is Status.FAILED and "refused" in (poison.error or ""),
        shown_by=redelivered,
    )
    stage.check(
        "the whole batch redelivered ran nothing and reported nothing",
        sum(runs.values()) == runs_before
        and set(outcomes(third)) <= {RecordOutcome.REPLAYED, RecordOutcome.REPLAYED_FAILURE}
        and third_failures == [],
        shown_by=once_more,
    )
    return (
        "Each record's side effect ran exactly once: through a duplicate, failures and two "
        "redeliveries, o-1, o-2 and o-3 shipped once and o-4 was given up, never run again."
    )


STORY = (
    "An SQS batch of five order messages reaches a Lambda function three times: with a "
    "duplicate inside it and two orders whose handler raises; then the two records its partial "
    "batch response reported; then all of it again, as after a lost deletion. Each record is "
    "guarded on its own key: it runs once, a redelivery of a finished record is replayed, and "
    "a record that keeps failing is given up after max_attempts."
)
STAGE = (
    "a scratch engine with its clock frozen at t0",
    "one idempotency table",
    f'SQSBatch(guard, key="order_id", max_attempts={MAX_ATTEMPTS})',
    "a handler that ships an order, failing o-3 once and o-4 always",
)
