"""The state machine on our engine, through boto3: costs, duplicates, leases, fencing,
failures, expiry, lost responses, throttling, serialisation, cache, scopes, threads."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from firstwrite.idempotency.config import IdempotencyConfig, RetryPolicy
from firstwrite.idempotency.errors import (
    InProgressError,
    LostClaimError,
    PayloadMismatchError,
    ReplayedFailureError,
    ResultTooLargeError,
)
from firstwrite.idempotency.guard import Claim, Idempotency, Replay
from firstwrite.idempotency.metrics import CallCounter, MemoryMetrics
from firstwrite.idempotency.record import Status

from .conftest import TABLE, Backend
from .faults import drop_response, throttle


def test_first_call_is_two_writes_and_a_duplicate_one_write(guard: Idempotency) -> None:
    with CallCounter(guard.client) as calls:
        claim = guard.claim("order-1", {"amount": 10})
        assert isinstance(claim, Claim) and claim.previous is None
        guard.complete(claim, {"charged": 10})
        assert dict(calls.by_operation) == {"PutItem": 1, "UpdateItem": 1}
        calls.reset()
        replay = guard.claim("order-1", {"amount": 10})
        assert dict(calls.by_operation) == {"PutItem": 1}
    assert isinstance(replay, Replay) and replay.status is Status.COMPLETED
    assert replay.value() == {"charged": 10}


def test_run_executes_once_and_replays(guard: Idempotency) -> None:
    runs: list[int] = []

    def charge() -> dict[str, int]:
        runs.append(1)
        return {"charged": len(runs)}

    assert guard.run("order-2", charge, {"amount": 5}) == {"charged": 1}
    assert guard.run("order-2", charge, {"amount": 5}) == {"charged": 1}
    assert len(runs) == 1


def test_fingerprint_mismatch(guard: Idempotency) -> None:
    guard.run("order-3", lambda: 1, {"amount": 5})
    with pytest.raises(PayloadMismatchError):
        guard.run("order-3", lambda: 2, {"amount": 6})
    # Canonical JSON: key order and 5 vs 5.0 do not matter.
    assert guard.run("order-3", lambda: 3, {"amount": 5.0}) == 1


def test_mismatch_also_guards_a_live_claim(guard: Idempotency) -> None:
    guard.claim("order-4", {"amount": 5})
    with pytest.raises(PayloadMismatchError):
        guard.claim("order-4", {"amount": 6})


def test_live_pending_is_in_progress_without_waiting(guard: Idempotency) -> None:
    guard.claim("order-5", lease=30)
    with CallCounter(guard.client) as calls, pytest.raises(InProgressError) as info:
        guard.claim("order-5", wait=0)
    assert calls.total == 1  # no wait: same cost as Powertools
    # Retry-After follows the policy (default: about a second), not the whole lease. The lease
    # left is read on DynamoDB's clock as the answers' Date tells it (whole seconds): at most
    # a second more than the lease.
    assert 0.9 < info.value.retry_after <= 1.0 and 25 < info.value.lease_remaining <= 31


def test_waiting_duplicate_gets_the_result(backend: Backend, table: str) -> None:
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, in_progress_wait=5.0))
    claim = guard.claim("order-6")
    assert isinstance(claim, Claim)
    answers: list[object] = []
    waiter = threading.Thread(target=lambda: answers.append(guard.run("order-6", lambda: "dup")))
    waiter.start()
    guard.complete(claim, "first")
    waiter.join(10)
    assert answers == ["first"]


def test_waiting_is_bounded(backend: Backend, table: str) -> None:
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, poll_interval=0.01))
    guard.claim("order-7")
    with CallCounter(backend.client) as calls, pytest.raises(InProgressError):
        guard.claim("order-7", wait=0.5)
    # Polls back off (0.01, 0.02, 0.04, ... s): a handful within the budget, never a busy loop.
    assert 2 <= calls.by_operation["GetItem"] <= 10
    assert calls.by_operation["PutItem"] == 1


def test_abandoned_claim_is_taken_over_and_late_completion_refused(
    backend: Backend, table: str
) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    stale = guard.claim("order-8", {"n": 1}, lease=10)
    assert isinstance(stale, Claim)
    with pytest.raises(InProgressError):
        guard.claim("order-8", {"n": 1})
    backend.advance(11)
    fresh = guard.claim("order-8", {"n": 1})
    assert isinstance(fresh, Claim) and fresh.taken_over and fresh.owner != stale.owner
    with pytest.raises(LostClaimError) as info:
        guard.complete(stale, "stale result")
    assert info.value.current_owner == fresh.owner
    with pytest.raises(LostClaimError):
        guard.fail(stale, RuntimeError("late"), retryable=True)
    with pytest.raises(LostClaimError):
        guard.renew(stale)
    record = guard.get("order-8")
    assert record is not None and record.owner == fresh.owner and record.status is Status.PENDING
    guard.complete(fresh, "fresh result")
    assert guard.run("order-8", lambda: "again", {"n": 1}) == "fresh result"
    assert metrics.total("firstwrite_lost_claims_total") == 3
    assert metrics.total("firstwrite_claims_total", outcome="takeover") == 1


def test_abandoned_claim_cannot_be_taken_over_by_another_request(
    backend: Backend, table: str
) -> None:
    guard = backend.guard()
    guard.claim("order-9", {"n": 1}, lease=10)
    backend.advance(11)
    with pytest.raises(PayloadMismatchError):
        guard.claim("order-9", {"n": 2})


def test_late_completion_without_takeover_is_kept(backend: Backend, table: str) -> None:
    guard = backend.guard()
    claim = guard.claim("order-10", lease=5)
    assert isinstance(claim, Claim)
    backend.advance(6)  # lease over, but nobody took the key: the work is still recorded
    guard.complete(claim, 7)
    assert guard.run("order-10", lambda: 8) == 7


def test_renewal_keeps_the_claim_alive(backend: Backend, table: str) -> None:
    guard = backend.guard()
    first = guard.claim("order-11", lease=10)
    assert isinstance(first, Claim)
    backend.advance(8)
    claim = guard.renew(first, lease=10)
    assert claim.version == 2 and claim.fencing_token == f"{first.owner}:2"
    backend.advance(8)
    with pytest.raises(InProgressError):
        guard.claim("order-11")
    with pytest.raises(LostClaimError):  # the copy from before the renewal is fenced off
        guard.complete(first, "stale")
    guard.complete(claim, "done")
    record = guard.get("order-11")
    # Completion is terminal and keeps the version; nothing fenced moves the record on.
    assert record is not None and record.version == 2 and record.status is Status.COMPLETED
    with pytest.raises(LostClaimError):
        guard.fail(claim, RuntimeError("after the fact"), retryable=True)
    with pytest.raises(LostClaimError):
        guard.renew(claim)
    assert guard.run("order-11", lambda: "again") == "done"


class Declined(Exception):
    pass


def test_retryable_failure_runs_again(backend: Backend, table: str) -> None:
    guard = backend.guard()
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise TimeoutError("upstream timed out")
        return "ok"

    with pytest.raises(TimeoutError):
        guard.run("order-12", flaky, {"a": 1})
    record = guard.get("order-12")
    assert record is not None and record.status is Status.FAILED and record.retryable
    assert guard.run("order-12", flaky, {"a": 1}) == "ok"
    assert guard.run("order-12", flaky, {"a": 1}) == "ok"
    assert len(attempts) == 2
    with pytest.raises(PayloadMismatchError):  # a failed key stays bound to its request
        guard.run("order-12", flaky, {"a": 2})


def test_non_retryable_failure_is_replayed(backend: Backend, table: str) -> None:
    guard = backend.guard(non_retryable=(Declined,))
    attempts: list[int] = []

    def decline() -> str:
        attempts.append(1)
        raise Declined("card declined")

    with pytest.raises(Declined):
        guard.run("order-13", decline)
    for _ in range(2):
        with pytest.raises(ReplayedFailureError) as info:
            guard.run("order-13", decline)
        assert (info.value.error_type, info.value.message) == ("Declined", "card declined")
    assert len(attempts) == 1


def test_expired_but_not_deleted_is_claimable(backend: Backend, table: str) -> None:
    if backend.engine is not None:
        # The premise is a record TTL has not deleted yet: the engine's background sweeper
        # (1 s ticks) would otherwise race the claim below on a loaded machine.
        backend.engine.ttl.stop()
    metrics = MemoryMetrics()
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, retention=120, client_retry_ceiling=60),
        metrics=metrics,
    )
    assert guard.run("order-14", lambda: "old") == "old"
    backend.advance(100)
    assert guard.run("order-14", lambda: "new") == "old"  # within retention
    backend.advance(30)
    record = guard.get("order-14")
    assert record is not None and record.expired(backend.now())  # TTL has not removed it
    assert guard.run("order-14", lambda: "new") == "new"
    assert metrics.total("firstwrite_claims_total", outcome="reclaimed_expired") == 1


def test_lost_claim_response_is_recognised_as_ours(guard: Idempotency) -> None:
    hits = drop_response(guard.client, "PutItem")
    claim = guard.claim("order-15")
    assert hits == [1]
    assert isinstance(claim, Claim)  # our own write, not "in progress" to ourselves
    drop = drop_response(guard.client, "UpdateItem")
    guard.complete(claim, "done")  # the retried completion sees its own COMPLETED record
    assert drop == [1]
    assert guard.run("order-15", lambda: "again") == "done"


def test_throttling_is_retried_with_backoff(backend: Backend, table: str) -> None:
    sleeps: list[float] = []
    metrics = MemoryMetrics()
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, retry=RetryPolicy(max_attempts=4, base=0.01, cap=0.02)),
        sleep=sleeps.append,
        metrics=metrics,
    )
    hits = throttle(backend.client, "PutItem", 2, code="ProvisionedThroughputExceededException")
    assert guard.run("order-16", lambda: 1) == 1
    assert len(hits) == 2 and len(sleeps) == 2
    assert all(0 <= s <= 0.02 for s in sleeps)
    assert metrics.total("firstwrite_dynamodb_throttles_total", operation="PutItem") == 2


def test_throttling_retries_are_bounded(backend: Backend, table: str) -> None:
    from botocore.exceptions import ClientError

    sleeps: list[float] = []
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, retry=RetryPolicy(max_attempts=3)), sleep=sleeps.append
    )
    throttle(backend.client, "PutItem", 10)
    with pytest.raises(ClientError) as info:
        guard.claim("order-17")
    assert info.value.response["Error"]["Code"] == "ThrottlingException"
    assert len(sleeps) == 2


def test_condition_failures_are_never_retried(backend: Backend, table: str) -> None:
    sleeps: list[float] = []
    guard = backend.guard(sleep=sleeps.append)
    guard.claim("order-18")
    with CallCounter(guard.client) as calls, pytest.raises(InProgressError):
        guard.claim("order-18", wait=0)
    assert calls.total == 1 and sleeps == []


def test_server_errors_are_retried(backend: Backend, table: str) -> None:
    guard = backend.guard(sleep=lambda s: None)
    hits = throttle(backend.client, "UpdateItem", 1, code="InternalServerError", status=500)
    assert guard.run("order-19", lambda: 1) == 1
    assert hits == [1]


@dataclass
class Receipt:
    order: str
    cents: int


def test_dataclass_and_pydantic_results_round_trip(guard: Idempotency) -> None:
    import pydantic

    class Charge(pydantic.BaseModel):
        id: str
        receipts: list[Receipt]

    value = Charge(id="c1", receipts=[Receipt("o", 5)])
    assert guard.run("order-20", lambda: value, result_type=Charge) == value
    replayed = guard.run("order-20", lambda: None, result_type=Charge)
    assert replayed == value and isinstance(replayed.receipts[0], Receipt)
    assert guard.run("order-21", lambda: Receipt("x", 1), result_type=Receipt) == Receipt("x", 1)
    assert guard.run("order-21", lambda: None, result_type=Receipt) == Receipt("x", 1)


def test_containers_replay_as_returned_and_as_annotated(guard: Idempotency) -> None:
    """JSON-native annotations replay what json gives back; anything JSON cannot say (a
    container of dataclasses, a tuple) is still rebuilt into the annotated type."""
    value = {"a": 1, "b": 1.0, "c": [True, None, "x"]}
    assert guard.run("order-30", lambda: value, result_type=dict[str, Any]) == value
    replayed = guard.run("order-30", lambda: None, result_type=dict[str, Any])
    assert replayed == value and type(replayed["b"]) is float and type(replayed["a"]) is int
    receipts = [Receipt("o", 1)]
    assert guard.run("order-31", lambda: receipts, result_type=list[Receipt]) == receipts
    assert guard.run("order-31", lambda: None, result_type=list[Receipt]) == receipts
    assert guard.run("order-32", lambda: (1, "a"), result_type=tuple[int, str]) == (1, "a")
    assert guard.run("order-32", lambda: None, result_type=tuple[int, str]) == (1, "a")


def test_large_results_are_compressed(guard: Idempotency) -> None:
    big = {"rows": ["the same line of text"] * 20000}  # ~500 KB of JSON
    assert guard.run("order-22", lambda: big) == big
    raw = guard.get("order-22")
    assert raw is not None and isinstance(raw.result, bytes) and len(raw.result) < 20000
    assert guard.run("order-22", lambda: None) == big


def test_too_large_results_fail_for_good_with_a_way_out(guard: Idempotency) -> None:
    import os

    runs: list[int] = []

    def export() -> bytes:
        runs.append(1)
        return os.urandom(500 * 1024)  # incompressible

    with pytest.raises(ResultTooLargeError) as info:
        guard.run("order-23", export)
    assert "result_id" in str(info.value)
    with pytest.raises(ReplayedFailureError) as replay:
        guard.run("order-23", export)
    assert replay.value.error_type == "ResultTooLargeError"
    assert runs == [1]  # the side effect never runs twice


def test_local_cache_answers_duplicates_without_calls(backend: Backend, table: str) -> None:
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, local_cache_size=10))
    guard.run("order-24", lambda: 1, {"p": 1})
    with CallCounter(backend.client) as calls:
        assert guard.run("order-24", lambda: 2, {"p": 1}) == 1
        assert calls.total == 0
        with pytest.raises(PayloadMismatchError):  # a mismatch goes to DynamoDB for the answer
            guard.run("order-24", lambda: 2, {"p": 2})
        assert calls.total == 1


def test_scopes_isolate_callers(guard: Idempotency) -> None:
    assert guard.run("k", lambda: "alice", scope="tenant-a") == "alice"
    assert guard.run("k", lambda: "bob", scope="tenant-b") == "bob"
    assert guard.run("b#k", lambda: "x", scope="tenant") == "x"
    assert guard.run("k", lambda: "y", scope="tenant#b") == "y"


def test_threads_share_one_execution(backend: Backend, table: str) -> None:
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, in_progress_wait=20.0))
    runs: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)
    answers: list[object] = []

    def side_effect() -> dict[str, int]:
        with lock:
            runs.append(1)
        return {"ran": len(runs)}

    def worker() -> None:
        client = backend.new_client()  # each thread its own client, as services do
        g = Idempotency(guard.config, client=client, clock=backend.now)
        barrier.wait()
        answers.append(g.run("hot-key", side_effect, {"same": True}))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(runs) == 1
    assert answers == [{"ran": 1}] * 8


def test_ensure_table_creates_on_demand_with_ttl(backend: Backend) -> None:
    guard = backend.guard(IdempotencyConfig(table_name="fresh-table"))
    assert guard.ensure_table() is True
    assert guard.ensure_table() is False  # idempotent itself
    table = backend.client.describe_table(TableName="fresh-table")["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    ttl = backend.client.describe_time_to_live(TableName="fresh-table")["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}


def _stored(guard: Idempotency, key: str) -> dict[str, dict[str, object]]:
    dkey, _ = (guard.dynamodb_key(key), None)
    item = guard.client.get_item(TableName=TABLE, Key=dkey, ConsistentRead=True)["Item"]
    return dict(item)


def test_the_record_carries_only_what_cannot_be_derived(backend: Backend, table: str) -> None:
    guard = backend.guard()
    claim = guard.claim("lean-1", {"a": 1})
    assert isinstance(claim, Claim)
    pending = _stored(guard, "lean-1")
    assert set(pending) == {"pk", "owner", "lease_expires_at", "expires_at", "fingerprint"}
    assert pending["owner"] == {"S": claim.fencing_token}
    assert claim.fencing_token == f"{claim.owner}:1" and len(claim.owner) == 32
    record = guard.get("lean-1")
    assert record is not None and record.status is Status.PENDING
    assert record.claimed_at is not None and abs(record.claimed_at - claim.claimed_at) < 0.002
    assert record.lease_expires_at == claim.lease_expires_at  # ms, stored as decimal seconds
    expires = pending["expires_at"]
    backend.advance(5)
    guard.complete(claim, {"ok": True})
    done = _stored(guard, "lean-1")
    assert set(done) == {"pk", "owner", "expires_at", "fingerprint", "result"}
    assert done["expires_at"] == expires  # retention counts from the claim


def test_retryable_failure_keeps_a_free_lease_and_a_final_one_none(
    backend: Backend, table: str
) -> None:
    guard = backend.guard()
    first = guard.claim("lean-2", {"a": 1})
    assert isinstance(first, Claim)
    guard.fail(first, RuntimeError("try again"), retryable=True)
    retryable = _stored(guard, "lean-2")
    assert retryable["lease_expires_at"] == {"N": "0"} and "result" not in retryable
    assert retryable["owner"] == {"S": f"{first.owner}:2"}
    record = guard.get("lean-2")
    assert record is not None and record.status is Status.FAILED and record.retryable
    with pytest.raises(LostClaimError):  # the failure bumped the version: the old claim is out
        guard.complete(first, "late")
    second = guard.claim("lean-2", {"a": 1})
    assert isinstance(second, Claim) and second.previous is Status.FAILED
    guard.fail(second, RuntimeError("no"), retryable=False)
    final = guard.get("lean-2")
    assert final is not None and final.status is Status.FAILED and not final.retryable
    assert "lease_expires_at" not in _stored(guard, "lean-2")
    with pytest.raises(ReplayedFailureError):
        guard.run("lean-2", lambda: "again", {"a": 1})


def test_without_payload_validation_no_fingerprint_is_stored(backend: Backend, table: str) -> None:
    guard = backend.guard()
    assert guard.run("lean-3", lambda: 1) == 1
    assert "fingerprint" not in _stored(guard, "lean-3")
    # A record stored without a fingerprint answers any request with that key.
    assert guard.run("lean-3", lambda: 2, {"any": "payload"}) == 1


def test_first_calls_and_duplicates_leave_no_reference_cycles(backend: Backend, table: str) -> None:
    """Every request's objects are freed by reference counting, none left to the cycle
    collector (which would cost each request several microseconds). On the DirectClient:
    botocore's own response parsers leave cycles behind on every call, which is not ours."""
    import gc
    import itertools

    from firstwrite.engine.direct.client import DirectClient

    guard = Idempotency(
        IdempotencyConfig(table_name=table), client=DirectClient(backend.engine), clock=backend.now
    )
    keys = itertools.count()
    guard.run("dup", lambda: {"ok": True})

    def requests() -> None:
        guard.run(f"first-{next(keys)}", lambda: {"ok": True})
        assert guard.run("dup", lambda: {"ok": False}) == {"ok": True}

    requests()
    gc.collect()
    gc.disable()
    try:
        for _ in range(100):
            requests()
        garbage = gc.collect()
    finally:
        gc.enable()
    assert garbage == 0
