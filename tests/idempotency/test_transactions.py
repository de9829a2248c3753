"""Variant 3: the claim (and, separately, the completion) in one TransactWriteItems with the
caller's business writes."""

from __future__ import annotations

from typing import Any

import pytest

from firstwrite.idempotency.errors import (
    BusinessConditionFailedError,
    InProgressError,
    LostClaimError,
    PayloadMismatchError,
)
from firstwrite.idempotency.guard import Claim, Idempotency, Replay
from firstwrite.idempotency.metrics import MemoryMetrics

from .conftest import TABLE, Backend


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
        metrics.total("transact_write_cancellation_reason", reason="business_condition_failed") == 1
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
    assert metrics.total("transact_write_cancellation_reason", reason="duplicate") == 1
    with pytest.raises(PayloadMismatchError):
        guard.claim_with("t3", [put_order("3")], {"other": True})


def test_transactional_completion_is_fenced(backend: Backend, table: str) -> None:
    guard = backend.guard()
    guard.client.put_item(TableName=TABLE, Item={"pk": {"S": "ORDER#4"}, "state": {"S": "new"}})
    stale = guard.claim("t4", lease=5)
    assert isinstance(stale, Claim)
    backend.advance(6)
    fresh = guard.claim("t4")
    assert isinstance(fresh, Claim)
    with pytest.raises(LostClaimError):
        guard.complete_with(stale, [set_state("4", "new", "paid-by-stale")], "stale")
    assert order_state(guard.client, "4") == "new"  # the business write was not applied either
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
