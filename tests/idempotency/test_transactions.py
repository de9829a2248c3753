"""Variant 3: the claim (and, separately, the completion) in one TransactWriteItems with the
caller's business writes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.idempotency import (
    IdempotencyConfig,
    ItemCollectionSizeLimitError,
    RetryPolicy,
    TransactionConflictError,
    TransactionValidationError,
)
from firstwrite.idempotency.errors import (
    BusinessConditionFailedError,
    InProgressError,
    LostClaimError,
    PayloadMismatchError,
)
from firstwrite.idempotency.guard import Claim, Idempotency, Replay
from firstwrite.idempotency.metrics import MemoryMetrics

from .conftest import TABLE, Backend
from .faults import cancel_transaction

CANCELLATIONS = "transact_write_cancellations_total"


def put_order(order: str, state: str = "new") -> dict[str, Any]:
    return {
        "Put": {
            "TableName": TABLE,
            "Item": {"pk": {"S": f"ORDER#{order}"}, "state": {"S": state}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def set_state(order: str, old: str, new: str) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": f"ORDER#{order}"}},
            "UpdateExpression": "SET #s = :new",
            "ConditionExpression": "#s = :old",
            "ExpressionAttributeNames": {"#s": "state"},
            "ExpressionAttributeValues": {":new": {"S": new}, ":old": {"S": old}},
        }
    }


def order_state(client: Any, order: str) -> str | None:
    item = client.get_item(
        TableName=TABLE, Key={"pk": {"S": f"ORDER#{order}"}}, ConsistentRead=True
    )
    return item.get("Item", {}).get("state", {}).get("S")


def test_claim_and_business_write_commit_together(guard: Idempotency) -> None:
    claim = guard.claim_with("t1", [put_order("1")], {"order": 1})
    assert isinstance(claim, Claim)
    assert order_state(guard.client, "1") == "new"
    guard.complete(claim, {"order": 1})
    duplicate = guard.claim_with("t1", [put_order("1")], {"order": 1})
    assert isinstance(duplicate, Replay) and duplicate.value() == {"order": 1}


def test_business_condition_failure_leaves_no_claim(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    guard.client.put_item(TableName=TABLE, Item={"pk": {"S": "ORDER#2"}, "state": {"S": "x"}})
    with pytest.raises(BusinessConditionFailedError) as info:
        guard.claim_with("t2", [put_order("2")])
    assert list(info.value.reasons) == [0]
    assert info.value.reasons[0]["Code"] == "ConditionalCheckFailed"
    assert guard.get("t2") is None  # nothing orphaned: the key is still free
    assert (
        metrics.total(CANCELLATIONS, transact_write_cancellation_reason="business_condition_failed")
        == 1
    )
    assert guard.run("t2", lambda: "later") == "later"


def test_duplicate_reported_as_duplicate_not_business_failure(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    claim = guard.claim_with("t3", [put_order("3")], {"order": 3})
    assert isinstance(claim, Claim)
    # The business write would fail too now, but the duplicate is what the caller must hear.
    with pytest.raises(InProgressError):
        guard.claim_with("t3", [put_order("3")], {"order": 3})
    assert metrics.total(CANCELLATIONS, transact_write_cancellation_reason="duplicate") == 1
    with pytest.raises(PayloadMismatchError):
        guard.claim_with("t3", [put_order("3")], {"other": True})


def test_transactional_completion_is_fenced(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    guard.client.put_item(TableName=TABLE, Item={"pk": {"S": "ORDER#4"}, "state": {"S": "new"}})
    stale = guard.claim("t4", lease=5)
    assert isinstance(stale, Claim)
    backend.advance(6)
    fresh = guard.claim("t4")
    assert isinstance(fresh, Claim)
    with pytest.raises(LostClaimError):
        guard.complete_with(stale, [set_state("4", "new", "paid-by-stale")], "stale")
    assert order_state(guard.client, "4") == "new"  # the business write was not applied either
    assert metrics.total(CANCELLATIONS, transact_write_cancellation_reason="fence") == 1
    assert metrics.total(CANCELLATIONS, transact_write_cancellation_reason="duplicate") == 0
    guard.complete_with(fresh, [set_state("4", "new", "paid")], "fresh")
    assert order_state(guard.client, "4") == "paid"
    assert guard.run("t4", lambda: "again") == "fresh"


def test_transactional_completion_business_failure_keeps_claim(guard: Idempotency) -> None:
    claim = guard.claim("t5")
    assert isinstance(claim, Claim)
    with pytest.raises(BusinessConditionFailedError):
        guard.complete_with(claim, [set_state("5", "new", "paid")], "x")  # no such order
    record = guard.get("t5")
    assert record is not None and record.status.value == "PENDING"
    guard.fail(claim, "order missing", retryable=True)


# -- every reason of every item has its own branch (issue 14, defect 1) -----------------------

NONE = {"Code": "None"}
CONFLICT = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item."}
THROTTLED = {
    "Code": "ThrottlingError",
    "Message": "Throughput exceeds the current capacity of your table or index.",
}
PROVISIONED = {
    "Code": "ProvisionedThroughputExceeded",
    "Message": "The level of configured provisioned throughput for the table was exceeded.",
}
COLLECTION = {"Code": "ItemCollectionSizeLimitExceeded", "Message": "Collection size exceeded."}


def quiet_guard(backend: Backend, **kwargs: Any) -> tuple[Idempotency, list[float]]:
    sleeps: list[float] = []
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, retry=RetryPolicy(max_attempts=4)),
        sleep=sleeps.append,
        **kwargs,
    )
    return guard, sleeps


@pytest.mark.parametrize("reason", [CONFLICT, THROTTLED, PROVISIONED], ids=lambda r: r["Code"])
def test_conflict_or_throttling_on_a_business_item_is_retried(
    backend: Backend, table: str, reason: dict[str, Any]
) -> None:
    guard, sleeps = quiet_guard(backend)
    hits = cancel_transaction(guard.client, [NONE, reason], times=2)
    claim = guard.claim_with("r1", [put_order("r1")], {"order": 1})
    assert isinstance(claim, Claim)  # the third attempt went through
    assert hits == [1, 1] and len(sleeps) == 2
    assert order_state(guard.client, "r1") == "new"


@pytest.mark.parametrize("reason", [CONFLICT, THROTTLED, PROVISIONED], ids=lambda r: r["Code"])
def test_conflict_or_throttling_that_persists_is_a_retryable_error(
    backend: Backend, table: str, reason: dict[str, Any]
) -> None:
    metrics = MemoryMetrics()
    guard, sleeps = quiet_guard(backend, metrics=metrics)
    cancel_transaction(guard.client, [NONE, reason], times=100)
    with pytest.raises(TransactionConflictError) as info:
        guard.claim_with("r2", [put_order("r2")], {"order": 2})
    assert info.value.retryable and not isinstance(info.value, BusinessConditionFailedError)
    assert info.value.items == {0: reason}  # keyed by the caller's item index
    assert len(sleeps) == 3  # four attempts, backing off between them
    assert guard.get("r2") is None and order_state(guard.client, "r2") is None
    assert metrics.total(CANCELLATIONS, transact_write_cancellation_reason=reason["Code"]) == 4


def test_conflict_on_the_claim_item_is_retried_then_a_duplicate_is_answered(
    backend: Backend, table: str
) -> None:
    guard, sleeps = quiet_guard(backend)
    first = guard.claim_with("r3", [put_order("r3")], {"order": 3})
    assert isinstance(first, Claim)
    guard.complete(first, "done")
    cancel_transaction(guard.client, [CONFLICT, NONE], times=1)
    replay = guard.claim_with("r3", [put_order("r3")], {"order": 3})
    assert isinstance(replay, Replay) and replay.value() == "done" and len(sleeps) == 1


def test_a_duplicate_wins_over_a_throttled_business_item(backend: Backend, table: str) -> None:
    guard, sleeps = quiet_guard(backend)
    first = guard.claim_with("r4", [put_order("r4")], {"order": 4})
    assert isinstance(first, Claim)
    guard.complete(first, "four")
    stored = guard.client.get_item(
        TableName=TABLE, Key=guard.dynamodb_key("r4"), ConsistentRead=True
    )["Item"]
    failed = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
    cancel_transaction(guard.client, [{**failed, "Item": stored}, THROTTLED], times=1)
    replay = guard.claim_with("r4", [put_order("r4")], {"order": 4})
    assert isinstance(replay, Replay) and replay.value() == "four" and sleeps == []


def test_a_business_condition_wins_over_a_conflict_elsewhere(backend: Backend, table: str) -> None:
    guard, sleeps = quiet_guard(backend)
    failed = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
    cancel_transaction(guard.client, [NONE, CONFLICT, failed], times=1)
    with pytest.raises(BusinessConditionFailedError) as info:
        guard.claim_with("r5", [put_order("r5a"), put_order("r5b")])
    assert info.value.reasons == {1: failed} and sleeps == []


def test_item_collection_size_limit_is_its_own_error(backend: Backend, table: str) -> None:
    guard, sleeps = quiet_guard(backend)
    cancel_transaction(guard.client, [NONE, COLLECTION], times=100)
    with pytest.raises(ItemCollectionSizeLimitError) as info:
        guard.claim_with("r6", [put_order("r6")])
    assert not info.value.retryable and info.value.items == {0: COLLECTION}
    assert sleeps == []  # not retried: it cannot succeed


def test_a_validation_error_on_a_business_item_is_its_own_error(
    backend: Backend, table: str
) -> None:
    """A real engine cancellation: the business Put's key has the wrong type."""
    guard, sleeps = quiet_guard(backend)
    bad = {"Put": {"TableName": TABLE, "Item": {"pk": {"N": "7"}, "state": {"S": "new"}}}}
    with pytest.raises(TransactionValidationError) as info:
        guard.claim_with("r7", [bad])
    assert [r["Code"] for r in info.value.reasons] == ["None", "ValidationError"]
    assert not info.value.retryable and sleeps == [] and guard.get("r7") is None


def test_a_top_level_transaction_conflict_is_the_documented_error(
    backend: Backend, table: str
) -> None:
    """The engine itself answers TransactionConflictException (HTTP 400, not retried by
    botocore): retried by the retry policy, then TransactionConflictError."""
    guard, sleeps = quiet_guard(backend)
    backend.engine.faults.error("TransactionConflictException", operation="TransactWriteItems")
    with pytest.raises(TransactionConflictError) as info:
        guard.claim_with("r8", [put_order("r8")])
    assert isinstance(info.value.__cause__, ClientError) and len(sleeps) == 3
    backend.engine.faults.clear()
    backend.engine.faults.error(
        "TransactionConflictException", operation="TransactWriteItems", count=2
    )
    assert isinstance(guard.claim_with("r8", [put_order("r8")]), Claim)


def test_transactional_completion_retries_conflicts_on_business_items(
    backend: Backend, table: str
) -> None:
    guard, sleeps = quiet_guard(backend)
    guard.client.put_item(TableName=TABLE, Item={"pk": {"S": "ORDER#r9"}, "state": {"S": "new"}})
    claim = guard.claim("r9")
    assert isinstance(claim, Claim)
    cancel_transaction(guard.client, [NONE, THROTTLED], times=1)
    guard.complete_with(claim, [set_state("r9", "new", "paid")], "paid")
    assert order_state(guard.client, "r9") == "paid" and len(sleeps) == 1
    cancel_transaction(guard.client, [NONE, COLLECTION], times=1)
    other = guard.claim("r10")
    assert isinstance(other, Claim)
    with pytest.raises(ItemCollectionSizeLimitError):
        guard.complete_with(other, [set_state("r9", "paid", "x")], "x")


# -- the cancellation is logged, every reason, with the key (issue 14, defect 2) ----------------


def _cancellation_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if hasattr(r, "cancellation_reasons")]


def test_a_cancellation_is_logged_with_every_reason_and_the_key(
    backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    guard, _ = quiet_guard(backend)
    guard.client.put_item(TableName=TABLE, Item={"pk": {"S": "ORDER#l1b"}, "state": {"S": "x"}})
    caplog.set_level(logging.INFO, logger="firstwrite.idempotency")
    with pytest.raises(BusinessConditionFailedError):
        guard.claim_with("order-l1", [put_order("l1a"), put_order("l1b")], scope="tenant-a")
    (record,) = _cancellation_logs(caplog)
    assert record.name == "firstwrite.idempotency" and record.levelno == logging.INFO
    assert record.idempotency_key == "order-l1"  # type: ignore[attr-defined]
    assert record.record_id == guard.record_id("order-l1", scope="tenant-a")  # type: ignore[attr-defined]
    assert record.dynamo_error_code == "TransactionCanceledException"  # type: ignore[attr-defined]
    assert record.operation == "claim"  # type: ignore[attr-defined]
    assert record.cancellation_reasons == [  # type: ignore[attr-defined]
        {"Code": "None"},
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"},
    ]
    assert "order-l1" in record.getMessage() and "ConditionalCheckFailed" in record.getMessage()


def test_each_retried_cancellation_is_logged_as_a_warning(
    backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    guard, _ = quiet_guard(backend)
    cancel_transaction(guard.client, [NONE, THROTTLED], times=2)
    caplog.set_level(logging.INFO, logger="firstwrite.idempotency")
    guard.claim_with("order-l2", [put_order("l2")])
    logged = _cancellation_logs(caplog)
    assert [r.levelno for r in logged] == [logging.WARNING, logging.WARNING]
    assert all(
        r.cancellation_reasons == [NONE, THROTTLED]  # type: ignore[attr-defined]
        for r in logged
    )


def test_a_returned_item_is_noted_not_logged(
    backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The stored record returned with a duplicate's reason may hold a result: the log says
    it came back, and leaves it out."""
    guard, _ = quiet_guard(backend)
    first = guard.claim_with("order-l3", [put_order("l3")])
    assert isinstance(first, Claim)
    guard.complete(first, {"card": "4242 4242 4242 4242"})
    caplog.set_level(logging.INFO, logger="firstwrite.idempotency")
    guard.claim_with("order-l3", [put_order("l3")])
    (record,) = _cancellation_logs(caplog)
    assert record.cancellation_reasons[0] == {  # type: ignore[attr-defined]
        "Code": "ConditionalCheckFailed",
        "Message": "The conditional request failed",
        "ItemReturned": True,
    }
    assert "4242 4242" not in repr(record.__dict__)


def test_more_items_than_fit_beside_the_claim_are_refused_before_any_call(
    ddb: Any, table_name: str
) -> None:
    """DynamoDB takes at most 100 actions per TransactWriteItems and the claim (or the
    completion) is one: 99 business items fit, 100 are refused with the layer's own error,
    which names the limit, before any request."""
    from firstwrite.idempotency import CallCounter, TooManyTransactItemsError

    guard = Idempotency(IdempotencyConfig(table_name=table_name), client=ddb)
    guard.ensure_table()

    def puts(n: int, tag: str) -> list[dict[str, Any]]:
        return [
            {"Put": {"TableName": table_name, "Item": {"pk": {"S": f"ORDER#{tag}{i}"}}}}
            for i in range(n)
        ]

    with CallCounter(ddb) as calls, pytest.raises(TooManyTransactItemsError) as refused:
        guard.claim_with("big", puts(100, "a"))
    assert calls.total == 0 and guard.get("big") is None
    assert refused.value.limit == 100 and refused.value.given == 100
    assert "at most 100" in str(refused.value) and "99 of yours" in str(refused.value)
    assert isinstance(refused.value, ValueError)

    claim = guard.claim_with("fits", puts(99, "b"))
    assert isinstance(claim, Claim)
    with CallCounter(ddb) as calls, pytest.raises(TooManyTransactItemsError):
        guard.complete_with(claim, puts(100, "c"), {"ok": True})
    assert calls.total == 0
    assert guard.get("fits").status.name == "PENDING"  # type: ignore[union-attr]
    guard.complete_with(claim, puts(99, "d"), {"ok": True})
    assert guard.get("fits").status.name == "COMPLETED"  # type: ignore[union-attr]
