"""An endpoint without ``ReturnValuesOnConditionCheckFailure``: a failed conditional write
comes back without the stored item, and the layer reads it (one consistent GetItem) instead of
taking the silence for "nothing stored"."""

from __future__ import annotations

import time
from typing import Any

import pytest

from firstwrite.idempotency import CallCounter, Claim, IdempotencyConfig, LostClaimError, Replay
from firstwrite.idempotency.guard import Idempotency

from .faults import drop_response, without_returned_items


@pytest.fixture
def guard(ddb: Any, table_name: str) -> Idempotency:
    guard = Idempotency(IdempotencyConfig(table_name=table_name, lease=5), client=ddb)
    guard.ensure_table()
    without_returned_items(ddb)
    return guard


def test_a_duplicate_reads_the_stored_record(guard: Idempotency, ddb: Any) -> None:
    assert guard.run("dup", lambda: {"n": 1}) == {"n": 1}
    with CallCounter(ddb) as calls:
        assert guard.run("dup", lambda: {"n": 2}) == {"n": 1}
    assert dict(calls.by_operation) == {"PutItem": 1, "GetItem": 1}


@pytest.mark.parametrize("operation", ["complete", "fail", "renew"])
def test_our_own_write_whose_answer_was_lost_is_recognised(
    guard: Idempotency, ddb: Any, operation: str
) -> None:
    """The write applies, its answer is lost, the retry fails the fence and returns nothing:
    the consistent read shows our own write, so it is not a lost claim."""
    claim = guard.claim(operation, payload={"op": operation})
    assert isinstance(claim, Claim)
    lost = drop_response(ddb, "UpdateItem")
    with CallCounter(ddb) as calls:
        if operation == "complete":
            assert guard.complete(claim, {"done": True}).value() == {"done": True}
        elif operation == "fail":
            guard.fail(claim, "declined", retryable=False)
        else:
            assert guard.renew(claim).version == claim.version + 1
    assert lost == [1] and calls.by_operation["GetItem"] == 1
    stored = guard.get(operation)
    assert stored is not None
    assert (
        stored.status.name
        == {"complete": "COMPLETED", "fail": "FAILED", "renew": "PENDING"}[operation]
    )


def test_a_lost_claim_names_the_new_owner(guard: Idempotency, ddb: Any) -> None:
    """A fence that fails because another worker took over: the read shows who holds it now,
    for the plain and for the transactional completion."""
    stale = guard.claim("taken", payload={}, lease=0.001)
    assert isinstance(stale, Claim)
    time.sleep(0.01)
    fresh = guard.claim("taken", payload={})
    assert isinstance(fresh, Claim) and fresh.taken_over
    for complete in (
        lambda: guard.complete(stale, {"stale": True}),
        lambda: guard.complete_with(stale, [], {"stale": True}),
    ):
        with pytest.raises(LostClaimError) as lost:
            complete()
        assert lost.value.current_owner == fresh.owner
    assert isinstance(guard.complete(fresh, {"fresh": True}), Replay)
