"""Consumed capacity with ``return_consumed_capacity=True`` (issue 14, defect 4): what DynamoDB
reports is counted as ``source="reported"``; a failed conditional write, which DynamoDB charges
but reports nothing for, is estimated (``source="estimated"``)."""

from __future__ import annotations

import pytest

from firstwrite.idempotency import (
    Claim,
    IdempotencyConfig,
    InProgressError,
    LostClaimError,
    MemoryMetrics,
    PayloadMismatchError,
)

from .conftest import TABLE, Backend

CAPACITY = "firstwrite_consumed_capacity_total"


def test_first_request_reports_what_dynamodb_reports(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, return_consumed_capacity=True), metrics=metrics
    )
    guard.run("c1", lambda: {"ok": True})
    assert metrics.total(CAPACITY, operation="PutItem", source="reported") == 1
    assert metrics.total(CAPACITY, operation="UpdateItem", source="reported") == 1
    assert metrics.total(CAPACITY, source="estimated") == 0


def test_duplicates_are_charged_and_estimated(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, return_consumed_capacity=True), metrics=metrics
    )
    big = "x" * 3000  # a 3 KB result: the stored record is 4 write units' worth
    guard.run("c2", lambda: big, {"p": 1})
    reported = metrics.total(CAPACITY, source="reported")
    assert guard.run("c2", lambda: "again", {"p": 1}) == big  # a duplicate
    with pytest.raises(PayloadMismatchError):
        guard.run("c2", lambda: "other", {"p": 2})  # a mismatch: a failed write too
    assert metrics.total(CAPACITY, source="reported") == reported  # nothing reported...
    estimated = metrics.total(CAPACITY, operation="PutItem", source="estimated")
    # ...but charged: the same PutItem, had it replaced the record, is what DynamoDB (here the
    # engine's accounting) charges, by the larger of the stored and the written item.
    stored = guard.client.get_item(
        TableName=TABLE, Key=guard.dynamodb_key("c2"), ConsistentRead=True
    )["Item"]
    probe = guard.client.put_item(TableName=TABLE, Item=stored, ReturnConsumedCapacity="TOTAL")
    assert estimated == 2 * probe["ConsumedCapacity"]["CapacityUnits"] == 8


def test_in_progress_and_lost_claims_are_estimated(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, return_consumed_capacity=True), metrics=metrics
    )
    stale = guard.claim("c3", lease=5)
    assert isinstance(stale, Claim)
    with pytest.raises(InProgressError):
        guard.claim("c3")
    assert metrics.total(CAPACITY, operation="PutItem", source="estimated") == 1
    backend.advance(6)
    fresh = guard.claim("c3")
    assert isinstance(fresh, Claim)
    with pytest.raises(LostClaimError):
        guard.complete(stale, "late")
    assert metrics.total(CAPACITY, operation="UpdateItem", source="estimated") == 1


def test_nothing_is_estimated_unless_asked(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    guard.run("c4", lambda: 1)
    guard.run("c4", lambda: 1)
    assert metrics.total(CAPACITY) == 0
