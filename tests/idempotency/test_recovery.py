"""Recovery points: fenced marks, and takeovers that reconcile instead of rerunning.

A "dead worker" here is a claim that was marked and then left alone past its lease (the
engine's clock moved); tests/proof/test_recovery_kill.py kills real processes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from firstwrite.http.problems import Problem, answer_for
from firstwrite.idempotency import (
    FailedFinally,
    Interrupted,
    NotDone,
    Reconciled,
    arecovery_point,
    recovery_point,
)
from firstwrite.idempotency.aio import AsyncIdempotency, ThreadedClient
from firstwrite.idempotency.config import IdempotencyConfig
from firstwrite.idempotency.errors import (
    ConfigurationError,
    LostClaimError,
    RecoveryFailedError,
    RecoveryRequiredError,
    ReplayedFailureError,
)
from firstwrite.idempotency.guard import Claim, Idempotency, Replay
from firstwrite.idempotency.layout import RecordLayout
from firstwrite.idempotency.metrics import MemoryMetrics
from firstwrite.idempotency.record import Status
from firstwrite.idempotency.recovery import points_of

from .conftest import TABLE, Backend, create_table

LEASE = 30.0


def stored(backend: Backend, guard: Idempotency, key: str) -> dict[str, Any]:
    item = backend.client.get_item(
        TableName=TABLE, Key=guard.dynamodb_key(key), ConsistentRead=True
    )["Item"]
    assert isinstance(item, dict)
    return item


def abandoned(backend: Backend, guard: Idempotency, key: str, *steps: tuple[str, str]) -> Claim:
    """A claim of ``key`` whose worker marked ``steps`` and died: its lease is over."""
    claim = guard.claim(key, {"amount": 10}, lease=LEASE)
    assert isinstance(claim, Claim)
    for step, reference in steps:
        guard.mark(claim, step, reference)
    backend.advance(LEASE + 2)
    return claim


def test_marks_are_kept_in_order_with_references_and_times(
    backend: Backend, guard: Idempotency
) -> None:
    def work() -> str:
        recovery_point("reserve", "res-1")
        recovery_point("charge", "ch-1")
        recovery_point("notify")
        return "done"

    before = backend.now()
    assert guard.run("k", work) == "done"
    points = points_of(stored(backend, guard, "k"), "marks")
    assert [(p.step, p.reference) for p in points] == [
        ("reserve", "res-1"),
        ("charge", "ch-1"),
        ("notify", None),
    ]
    assert all(before <= p.at <= backend.now() + 1 for p in points)
    assert len({p.mark_id for p in points}) == 3


def test_a_takeover_reconciled_by_the_hook_is_completed_and_not_rerun(
    backend: Backend, table: str
) -> None:
    seen: list[Interrupted] = []

    def reconcile(interrupted: Interrupted) -> Reconciled:
        seen.append(interrupted)
        return Reconciled({"charge": interrupted.last.reference})

    metrics = MemoryMetrics()
    guard = backend.guard(reconcile=reconcile, metrics=metrics)
    abandoned(backend, guard, "k", ("reserve", "r-1"), ("charge", "ch-9"))
    runs: list[int] = []
    result = guard.run("k", lambda: runs.append(1) or {"charge": "rerun"}, {"amount": 10})
    assert result == {"charge": "ch-9"} and runs == []
    (interrupted,) = seen
    assert interrupted.key == "k"
    assert [p.step for p in interrupted.points] == ["reserve", "charge"]
    assert interrupted.record.status is Status.PENDING
    record = guard.get("k")
    assert record is not None and record.status is Status.COMPLETED
    assert guard.run("k", lambda: {"charge": "again"}, {"amount": 10}) == {"charge": "ch-9"}
    assert metrics.total("firstwrite_recovery_takeovers_total", outcome="reconciled") == 1


def test_not_done_runs_the_work_and_keeps_the_earlier_points_first(
    backend: Backend, table: str
) -> None:
    guard = backend.guard(reconcile=lambda interrupted: NotDone())
    abandoned(backend, guard, "k", ("charge", "ch-1"))

    def rerun() -> str:
        recovery_point("charge", "ch-2")
        return "charged once"

    assert guard.run("k", rerun, {"amount": 10}) == "charged once"
    points = points_of(stored(backend, guard, "k"), "marks")
    assert [p.reference for p in points] == ["ch-1", "ch-2"]


def test_failed_finally_fails_the_record_for_good(backend: Backend, table: str) -> None:
    guard = backend.guard(reconcile=lambda interrupted: FailedFinally("card declined"))
    abandoned(backend, guard, "k", ("charge", "ch-1"))
    with pytest.raises(RecoveryFailedError, match="card declined") as caught:
        guard.run("k", lambda: pytest.fail("must not run"), {"amount": 10})
    assert caught.value.reason == "card declined"
    record = guard.get("k")
    assert record is not None and record.status is Status.FAILED and not record.retryable
    with pytest.raises(ReplayedFailureError, match="card declined"):
        guard.run("k", lambda: pytest.fail("must not run"), {"amount": 10})


def test_without_a_hook_the_takeover_is_refused_counted_and_left_for_a_hook(
    backend: Backend, table: str
) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    abandoned(backend, guard, "k", ("charge", "ch-1"))
    for _ in range(2):  # refused at once each time: the record is put back, lease over
        with pytest.raises(RecoveryRequiredError) as caught:
            guard.run("k", lambda: pytest.fail("must not run"), {"amount": 10})
        assert [p.reference for p in caught.value.points] == ["ch-1"]
    assert metrics.total("firstwrite_recovery_takeovers_total", outcome="refused") == 2
    record = guard.get("k")
    assert record is not None and record.status is Status.PENDING
    assert [p.reference for p in points_of(stored(backend, guard, "k"), "marks")] == ["ch-1"]
    healer = backend.guard(reconcile=lambda i: Reconciled("found " + (i.last.reference or "")))
    assert healer.run("k", lambda: pytest.fail("must not run"), {"amount": 10}) == "found ch-1"


def test_a_worker_that_lost_its_claim_cannot_mark(backend: Backend, table: str) -> None:
    guard = backend.guard(reconcile=lambda interrupted: NotDone())
    first = abandoned(backend, guard, "k", ("charge", "ch-1"))
    second = guard.claim("k", {"amount": 10})
    assert isinstance(second, Claim) and second.owner != first.owner
    with pytest.raises(LostClaimError):
        guard.mark(first, "charge", "ch-stale")
    guard.mark(second, "charge", "ch-2")
    refs = [p.reference for p in points_of(stored(backend, guard, "k"), "marks")]
    assert refs == ["ch-1", "ch-2"]


def test_a_finished_claim_cannot_mark(backend: Backend, guard: Idempotency) -> None:
    claim = guard.claim("k")
    assert isinstance(claim, Claim)
    guard.complete(claim, "ok")
    with pytest.raises(LostClaimError):
        guard.mark(claim, "late")


def test_a_retryable_failure_after_a_mark_is_reconciled_not_rerun(
    backend: Backend, table: str
) -> None:
    asked: list[Interrupted] = []

    def reconcile(interrupted: Interrupted) -> Reconciled:
        asked.append(interrupted)
        return Reconciled("charged before the timeout")

    guard = backend.guard(reconcile=reconcile)

    def times_out() -> str:
        recovery_point("charge", "ch-1")
        raise TimeoutError("provider did not answer")

    with pytest.raises(TimeoutError):
        guard.run("k", times_out)
    assert guard.run("k", lambda: pytest.fail("must not run")) == "charged before the timeout"
    assert [p.reference for p in asked[0].points] == ["ch-1"]


def test_a_hook_that_raises_leaves_the_points_for_the_next_takeover(
    backend: Backend, table: str
) -> None:
    def broken(interrupted: Interrupted) -> Reconciled:
        raise ConnectionError("ledger down")

    guard = backend.guard(reconcile=broken)
    abandoned(backend, guard, "k", ("charge", "ch-1"))
    with pytest.raises(ConnectionError):
        guard.run("k", lambda: pytest.fail("must not run"))
    healer = backend.guard(reconcile=lambda i: Reconciled(i.last.reference))
    assert healer.run("k", lambda: pytest.fail("must not run")) == "ch-1"


def test_a_wrong_answer_is_a_configuration_error(backend: Backend, table: str) -> None:
    guard = backend.guard(reconcile=lambda interrupted: "done")  # type: ignore[arg-type,return-value]
    abandoned(backend, guard, "k", ("charge", "ch-1"))
    with pytest.raises(ConfigurationError, match="NotDone"):
        guard.run("k", lambda: pytest.fail("must not run"))
    assert points_of(stored(backend, guard, "k"), "marks")


def test_recovery_point_outside_guarded_work_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="outside a guarded call"):
        recovery_point("charge")


def test_a_layout_without_marks_refuses_them(backend: Backend) -> None:
    config = IdempotencyConfig(table_name="plain", layout=RecordLayout(name="plain", marks=None))
    create_table(backend.client, config)
    guard = backend.guard(config)
    claim = guard.claim("k")
    assert isinstance(claim, Claim)
    with pytest.raises(ConfigurationError, match="marks=None"):
        guard.mark(claim, "charge")


def test_seed_layout_keeps_points_in_its_own_attribute(backend: Backend) -> None:
    layout = RecordLayout.seed_001()
    config = IdempotencyConfig(table_name="seed", layout=layout)
    create_table(backend.client, config)
    guard = backend.guard(config, reconcile=lambda i: Reconciled(i.last.reference))
    claim = guard.claim("k", lease=LEASE)
    assert isinstance(claim, Claim)
    guard.mark(claim, "charge", "ch-1")
    item = backend.client.get_item(TableName="seed", Key=guard.dynamodb_key("k"))["Item"]
    assert [p.reference for p in points_of(item, "recoveryPoints")] == ["ch-1"]
    assert item["version"] == {"N": "1"}  # a mark does not move the version
    backend.advance(LEASE + 2)
    assert guard.run("k", lambda: pytest.fail("must not run")) == "ch-1"


def test_a_coroutine_hook_on_a_blocking_guard_is_refused(backend: Backend, table: str) -> None:
    async def hook(interrupted: Interrupted) -> NotDone:
        return NotDone()

    with pytest.raises(ConfigurationError, match="coroutine"):
        backend.guard(reconcile=hook)


def test_the_http_answers() -> None:
    refused = answer_for(RecoveryRequiredError("k", ()))
    assert refused is not None and refused.problem is Problem.RECOVERY_REQUIRED
    assert refused.problem.status == 503 and refused.retry_after == 1.0
    failed = answer_for(RecoveryFailedError("k", "declined"))
    assert failed is not None and failed.problem is Problem.RESPONSE_NOT_STORED
    assert "declined" in failed.detail


# -- asyncio ---------------------------------------------------------------------------------


def aguard(backend: Backend, **kwargs: Any) -> AsyncIdempotency:
    return AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE),
        client=ThreadedClient(backend.client),
        clock=backend.now,
        **kwargs,
    )


def test_async_marks_and_an_async_hook(backend: Backend, table: str) -> None:
    async def reconcile(interrupted: Interrupted) -> Reconciled:
        await asyncio.sleep(0)
        return Reconciled([p.reference for p in interrupted.points])

    async def scenario() -> None:
        guard = aguard(backend, reconcile=reconcile)
        claim = await guard.claim("k", lease=LEASE)
        assert isinstance(claim, Claim)

        async def work() -> None:
            await arecovery_point("a", "1")
            await arecovery_point("b", "2")

        # the work's points, made through run's context, then its death: a second claim
        await guard.mark(claim, "a", "1")
        await guard.mark(claim, "b", "2")
        backend.advance(LEASE + 2)
        assert await guard.run("k", work) == ["1", "2"]
        other = await guard.run("k2", work)
        assert other is None
        refs = [p.reference for p in points_of(stored(backend, backend.guard(), "k2"), "marks")]
        assert refs == ["1", "2"]

    asyncio.run(scenario())


def test_async_fence_and_refusal(backend: Backend, table: str) -> None:
    async def scenario() -> None:
        metrics = MemoryMetrics()
        guard = aguard(backend, metrics=metrics)
        first = await guard.claim("k", lease=LEASE)
        assert isinstance(first, Claim)
        await guard.mark(first, "charge", "ch-1")
        backend.advance(LEASE + 2)
        with pytest.raises(RecoveryRequiredError):
            await guard.run("k", asyncio.sleep)  # type: ignore[arg-type]
        healer = aguard(backend, reconcile=lambda i: NotDone())  # a blocking hook, threaded
        second = await healer.claim("k")
        assert isinstance(second, Claim)
        with pytest.raises(LostClaimError):
            await guard.mark(first, "charge", "stale")
        assert not isinstance(second, Replay)
        assert metrics.total("firstwrite_recovery_takeovers_total", outcome="refused") == 1

    asyncio.run(scenario())
