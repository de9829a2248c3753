"""One time budget per guarded call, on the guard's injected monotonic clock (no waiting).

The engine answers 500s (its fault injection); botocore makes one attempt per call, so every
retry is the layer's and every sleep goes through the guard's ``sleep``, which moves the fake
monotonic clock. Timed outages against a real endpoint are in ``test_budget_outage.py``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from botocore.config import Config

from firstwrite.idempotency import (
    CallCounter,
    Claim,
    CompletionNotRecordedError,
    DeadlineExceededError,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    MemoryMetrics,
    RetryPolicy,
)
from firstwrite.idempotency._machine import budget

from .conftest import TABLE, Backend
from .faults import _Http, drop_response

ONE_ATTEMPT = Config(retries={"total_max_attempts": 1})
PATIENT = RetryPolicy(max_attempts=100, base=0.1, cap=0.5)  # the budget ends it, not attempts


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _guard(backend: Backend, clock: FakeMonotonic, **settings: Any) -> tuple[Idempotency, Any]:
    client = backend.new_client(config=ONE_ATTEMPT)
    metrics = MemoryMetrics()
    config = IdempotencyConfig(table_name=TABLE, retry=PATIENT, **settings)
    guard = Idempotency(
        config,
        client=client,
        clock=backend.now,
        metrics=metrics,
        sleep=clock.sleep,
        monotonic=clock,
        rng=lambda: 1.0,
    )
    return guard, client


def test_retries_stop_before_the_budget_with_a_retryable_error(
    backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeMonotonic()
    guard, client = _guard(backend, clock, budget=2.0)
    backend.engine.faults.error("InternalServerError", table=TABLE)
    logs = caplog.at_level(logging.ERROR, "firstwrite.idempotency")
    with logs, CallCounter(client) as calls, pytest.raises(DeadlineExceededError) as spent:
        guard.run("k", lambda: pytest.fail("the side effect ran"))
    error = spent.value
    assert clock.now - 100.0 <= 2.0  # every sleep ended inside the budget
    assert error.retryable and error.retry_after >= 1 and error.retry_after_header == "1"
    assert error.dynamo_error_code == "InternalServerError" and error.operation == "PutItem"
    assert error.budget == 2.0 and 0 < error.elapsed <= 2.0 and error.key == "k"
    assert calls.total > 3  # retried while the budget allowed
    assert guard.metrics.total("firstwrite_deadline_exceeded_total") == 1  # type: ignore[attr-defined]
    logged = [r for r in caplog.records if "time budget" in r.getMessage()]
    assert logged[0].dynamo_error_code == "InternalServerError"  # type: ignore[attr-defined]


def test_a_call_may_bring_its_own_budget(backend: Backend, table: str) -> None:
    clock = FakeMonotonic()
    guard, _ = _guard(backend, clock)  # the default: 10 s
    backend.engine.faults.error("InternalServerError", table=TABLE)
    with pytest.raises(DeadlineExceededError) as spent:
        guard.claim("k", budget=0.5)
    assert spent.value.budget == 0.5 and clock.now - 100.0 <= 0.5
    with pytest.raises(DeadlineExceededError) as default:
        guard.claim("k")
    assert default.value.budget == 10.0


def test_a_claim_written_before_the_budget_ran_out_is_never_run_twice(
    backend: Backend, table: str
) -> None:
    """The claim applies but its answer is lost; every retry then fails until the budget is
    spent. The claim stays under its lease: a retry is told "in progress" and the function
    runs once, after the lease, by whoever takes the key over."""
    clock = FakeMonotonic()
    guard, client = _guard(backend, clock, budget=1.0, lease=30)
    drop_response(client, "PutItem")  # the first claim applies; its answer is lost
    puts: list[int] = []

    def outage_after_the_first_claim(**_: Any) -> Any:
        puts.append(1)
        if len(puts) == 1:
            return None
        error = {"Code": "InternalServerError", "Message": "DynamoDB could not process"}
        return _Http(500), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 500}}

    client.meta.events.register(
        "before-call.dynamodb.PutItem", outage_after_the_first_claim, unique_id="outage"
    )
    runs: list[str] = []
    with pytest.raises(DeadlineExceededError):
        guard.run("k", lambda: runs.append("first"), payload={"n": 1})
    client.meta.events.unregister("before-call.dynamodb.PutItem", unique_id="outage")
    assert len(puts) > 2
    record = guard.get("k")
    assert record is not None and record.status.name == "PENDING"
    with pytest.raises(InProgressError):
        guard.run("k", lambda: runs.append("second"), payload={"n": 1}, wait=0)
    backend.advance(31)
    assert guard.run("k", lambda: runs.append("after the lease") or "ok", payload={"n": 1}) == "ok"
    assert runs == ["after the lease"]


def test_a_completion_past_the_budget_is_tried_once_and_carries_the_result(
    backend: Backend, table: str
) -> None:
    clock = FakeMonotonic()
    guard, client = _guard(backend, clock, budget=1.0)

    def slow_side_effect() -> dict[str, int]:
        clock.sleep(5.0)  # the function itself outlasts the call's budget
        backend.engine.faults.error("InternalServerError", table=TABLE, operation="UpdateItem")
        return {"charged": 1}

    with CallCounter(client) as calls, pytest.raises(CompletionNotRecordedError) as unrecorded:
        guard.run("k", slow_side_effect)
    assert unrecorded.value.result == {"charged": 1}
    assert calls.by_operation["UpdateItem"] == 1  # one attempt, none past the budget
    assert isinstance(unrecorded.value.__cause__, DeadlineExceededError)
    record = guard.get("k")
    assert record is not None and record.status.name == "PENDING"  # under its lease


def test_the_in_progress_wait_stays_inside_the_budget(backend: Backend, table: str) -> None:
    clock = FakeMonotonic()
    guard, _ = _guard(backend, clock, budget=0.3, in_progress_wait=5.0)
    held = guard.claim("busy")
    assert isinstance(held, Claim)
    with pytest.raises(InProgressError):
        guard.claim("busy")
    assert clock.now - 100.0 <= 0.3


def test_botocore_retries_are_cut_at_the_deadline() -> None:
    """The ``needs-retry`` hook: no retry whose longest backoff reaches the deadline, for the
    client's retry mode; nothing changes outside a guarded call."""

    class Meta:
        def __init__(self, mode: str) -> None:
            self.config = type("Config", (), {"retries": {"mode": mode}})()

    legacy = budget._Cut(budget.backoff_bound(type("C", (), {"meta": Meta("legacy")})()))
    standard = budget._Cut(budget.backoff_bound(type("C", (), {"meta": Meta("standard")})()))
    assert legacy(attempts=3) is None  # no deadline current: botocore decides
    now = [0.0]
    token = budget.CURRENT.set(budget.deadline_for(1.0, lambda: now[0]))
    try:
        assert legacy(attempts=3) is None  # 0.2 s of backoff fits in the 1 s left
        assert legacy(attempts=6) is False  # 1.6 s does not
        assert standard(attempts=1) is False  # up to 1 s: not strictly inside
        now[0] = -4.0  # 5 s left
        assert standard(attempts=2) is None and standard(attempts=4) is False
    finally:
        budget.CURRENT.reset(token)


def test_by_default_a_duplicate_waits_briefly_and_replays(backend: Backend, table: str) -> None:
    """The default ``in_progress_wait`` (1 s, seed 001's "wait and poll briefly"): a duplicate
    of a live request polls with consistent reads and gets its result if it finishes in time;
    one that does not gets "in progress" after a second, never later."""
    clock = FakeMonotonic()
    first, _ = _guard(backend, clock)
    live = first.claim("k", payload={"n": 1})
    assert isinstance(live, Claim)
    finishing = FakeMonotonic()

    def sleep_then_finish(seconds: float) -> None:
        finishing.sleep(seconds)
        if finishing.now - 100.0 > 0.05:
            first.complete(live, {"done": True})

    client = backend.new_client(config=ONE_ATTEMPT)
    duplicate = Idempotency(
        IdempotencyConfig(table_name=TABLE),
        client=client,
        clock=backend.now,
        sleep=sleep_then_finish,
        monotonic=finishing,
    )
    with CallCounter(client) as calls:
        replay = duplicate.claim("k", payload={"n": 1})
    assert not isinstance(replay, Claim) and replay.value() == {"done": True}
    assert calls.by_operation["GetItem"] >= 1 and finishing.now - 100.0 <= 1.0

    waiting = FakeMonotonic()
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE),
        client=client,
        clock=backend.now,
        sleep=waiting.sleep,
        monotonic=waiting,
    )
    assert isinstance(guard.claim("still-live"), Claim)
    with CallCounter(client) as calls, pytest.raises(InProgressError):
        guard.claim("still-live")
    assert waiting.now - 100.0 == pytest.approx(1.0) and calls.by_operation["GetItem"] <= 6
