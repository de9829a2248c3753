"""``claim_with`` over a record whose work marked recovery points: never a silent rerun.

The transaction's claim refuses a marked record past its lease (its lease branch asks for no
marks), so the transaction is cancelled with nothing written; without a hook the caller gets
``RecoveryRequiredError`` (counted), with one the record is taken over alone and reconciled:
``Reconciled`` answers a replay and the caller's items are not applied, ``NotDone`` commits
them against the claim (fenced), ``FailedFinally`` fails the record for good. A "dead worker"
is a claim that was marked and left past its lease (the engine's clock moved); the last tests
race real threads and kill a real process.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency import (
    BusinessConditionFailedError,
    Claim,
    ClockSkewPolicy,
    FailedFinally,
    InProgressError,
    Interrupted,
    LostClaimError,
    NotDone,
    Reconciled,
    RecoveryFailedError,
    RecoveryRequiredError,
    Replay,
    Status,
)
from firstwrite.idempotency.aio import AsyncIdempotency, ThreadedClient
from firstwrite.idempotency.config import IdempotencyConfig
from firstwrite.idempotency.guard import Idempotency
from firstwrite.idempotency.metrics import MemoryMetrics
from firstwrite.idempotency.recovery import points_of

from .conftest import TABLE, Backend
from .test_key_migration_transactional import counter, increment, ledger, ledger_entry
from .test_recovery import stored

LEASE = 30.0
PAYLOAD = {"amount": 30}
CHARGES: Counter[str] = Counter()  # the provider: charges made, by reference
LOCK = threading.Lock()


@pytest.fixture(autouse=True)
def _provider() -> None:
    CHARGES.clear()


def charge(reference: str) -> None:
    with LOCK:
        CHARGES[reference] += 1


def ledger_hook(interrupted: Interrupted) -> Reconciled | NotDone:
    """Asks the provider whether the reference was charged."""
    reference = interrupted.last.reference or ""
    if CHARGES[reference]:
        return Reconciled({"charged": reference, "reconciled": True})
    return NotDone()


def died_after_marking(backend: Backend, guard: Idempotency, key: str, charged: bool) -> None:
    """A worker's ``claim_with`` (its increment applied with the claim), its mark, maybe its
    charge, then death: its lease runs out."""
    claim = guard.claim_with(key, [increment(key)], PAYLOAD, lease=LEASE)
    assert isinstance(claim, Claim)
    guard.mark(claim, "charge", f"ref-{key}")
    if charged:
        charge(f"ref-{key}")
    backend.advance(LEASE + 2)


def takeovers(metrics: MemoryMetrics, outcome: str) -> float:
    return metrics.total("firstwrite_recovery_takeovers_total", outcome=outcome)


def test_without_a_hook_the_transaction_is_refused_and_nothing_is_written(
    backend: Backend, table: str
) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    died_after_marking(backend, guard, "k", charged=True)
    before = stored(backend, guard, "k")
    for attempt in range(1, 3):
        with pytest.raises(RecoveryRequiredError) as refused:
            guard.claim_with("k", [increment("k")], PAYLOAD)
        assert [p.reference for p in refused.value.points] == ["ref-k"]
        assert takeovers(metrics, "refused") == attempt
    assert counter(backend.client, "k") == 1  # the first claim's increment, not another
    assert stored(backend, guard, "k") == before  # nothing written: the next hook decides
    cancelled = metrics.total(
        "transact_write_cancellations_total", transact_write_cancellation_reason="duplicate"
    )
    assert cancelled == 2


def test_reconciled_answers_a_replay_and_the_items_are_not_applied(
    backend: Backend, table: str
) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(reconcile=ledger_hook, metrics=metrics)
    died_after_marking(backend, guard, "k", charged=True)
    outcome = guard.claim_with("k", [increment("k")], PAYLOAD)
    assert isinstance(outcome, Replay)
    assert outcome.value() == {"charged": "ref-k", "reconciled": True}
    assert counter(backend.client, "k") == 1 and CHARGES == {"ref-k": 1}
    record = guard.get("k")
    assert record is not None and record.status is Status.COMPLETED
    assert takeovers(metrics, "reconciled") == 1
    again = guard.claim_with("k", [increment("k")], PAYLOAD)  # a plain replay now
    assert isinstance(again, Replay) and counter(backend.client, "k") == 1


def test_not_done_commits_the_items_against_the_claim_and_keeps_the_marks(
    backend: Backend, table: str
) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(reconcile=ledger_hook, metrics=metrics)
    died_after_marking(backend, guard, "k", charged=False)
    claim = guard.claim_with("k", [increment("k")], PAYLOAD)
    assert isinstance(claim, Claim) and claim.taken_over
    assert counter(backend.client, "k") == 2  # the items of this run, once
    guard.mark(claim, "charge", "ref-k-2")
    charge("ref-k-2")
    guard.complete_with(claim, [ledger_entry("k", "second")], {"charged": "ref-k-2"})
    assert ledger(backend.client, "k") == "second"
    points = points_of(stored(backend, guard, "k"), "marks")
    assert [p.reference for p in points] == ["ref-k", "ref-k-2"]
    assert takeovers(metrics, "not_done") == 1


def test_failed_finally_fails_the_record_and_applies_nothing(backend: Backend, table: str) -> None:
    guard = backend.guard(reconcile=lambda interrupted: FailedFinally("card declined"))
    died_after_marking(backend, guard, "k", charged=True)
    with pytest.raises(RecoveryFailedError, match="card declined"):
        guard.claim_with("k", [increment("k")], PAYLOAD)
    assert counter(backend.client, "k") == 1
    record = guard.get("k")
    assert record is not None and record.status is Status.FAILED and not record.retryable


def test_a_business_condition_failing_after_not_done_frees_the_key_with_its_marks(
    backend: Backend, table: str
) -> None:
    guard = backend.guard(reconcile=ledger_hook)
    died_after_marking(backend, guard, "k", charged=False)
    refused = {
        "ConditionCheck": {
            "TableName": TABLE,
            "Key": {"pk": {"S": "COUNT#k"}},
            "ConditionExpression": "n > :big",
            "ExpressionAttributeValues": {":big": {"N": "100"}},
        }
    }
    with pytest.raises(BusinessConditionFailedError) as failed:
        guard.claim_with("k", [refused], PAYLOAD)
    assert list(failed.value.reasons) == [0]  # the caller's own index, past the fence check
    record = guard.get("k")
    assert record is not None and record.status is Status.FAILED and record.retryable
    assert [p.reference for p in points_of(stored(backend, guard, "k"), "marks")] == ["ref-k"]
    claim = guard.claim_with("k", [increment("k")], PAYLOAD)  # reconciled again: not done
    assert isinstance(claim, Claim) and counter(backend.client, "k") == 2


def test_a_claim_lost_while_the_hook_answers_applies_no_items(backend: Backend, table: str) -> None:
    other = backend.guard(reconcile=lambda interrupted: Reconciled("the other worker's"))

    def slow_hook(interrupted: Interrupted) -> NotDone:
        backend.advance(2)  # this worker stalls past its lease (1 s)...
        assert other.run("k", lambda: "rerun", PAYLOAD) == "the other worker's"
        return NotDone()  # ...and answers after another worker took the key over

    guard = backend.guard(reconcile=slow_hook)
    died_after_marking(backend, guard, "k", charged=False)
    with pytest.raises(LostClaimError):
        guard.claim_with("k", [increment("k")], PAYLOAD, lease=1)
    assert counter(backend.client, "k") == 1  # fenced: the late commit applied nothing
    record = guard.get("k")
    assert record is not None and record.status is Status.COMPLETED


def test_the_asyncio_guard_reconciles_claim_with_through_an_async_hook(
    backend: Backend, table: str
) -> None:
    async def hook(interrupted: Interrupted) -> Reconciled | NotDone:
        return ledger_hook(interrupted)

    died_after_marking(backend, backend.guard(), "a", charged=True)
    died_after_marking(backend, backend.guard(), "b", charged=False)
    guard = AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE),
        client=ThreadedClient(backend.client),
        clock=backend.now,
        reconcile=hook,
    )

    async def scenario() -> tuple[Any, Any]:
        first = await guard.claim_with("a", [increment("a")], PAYLOAD)
        second = await guard.claim_with("b", [increment("b")], PAYLOAD)
        return first, second

    first, second = asyncio.run(scenario())
    assert isinstance(first, Replay) and first.value()["reconciled"] is True
    assert isinstance(second, Claim)
    assert counter(backend.client, "a") == 1 and counter(backend.client, "b") == 2


# -- real threads, a real SIGKILL ------------------------------------------------------------------


def race(guard: Idempotency, keys: list[str], per_key: int) -> dict[str, list[Any]]:
    """``per_key`` threads per key run the work (claim_with, charge, complete_with) at once."""
    start = threading.Barrier(len(keys) * per_key)

    def work(key: str) -> Any:
        start.wait()
        for _ in range(400):
            try:
                outcome = guard.claim_with(key, [increment(key)], PAYLOAD)
            except InProgressError:
                time.sleep(0.01)
                continue
            except RecoveryRequiredError as refused:
                return refused
            if isinstance(outcome, Replay):
                return outcome.value()
            charge(f"ref-{key}")
            result = {"charged": f"ref-{key}", "reconciled": False}
            guard.complete_with(outcome, [ledger_entry(key, "rerun")], result)
            return result
        raise AssertionError("never answered")

    jobs = [key for key in keys for _ in range(per_key)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(work, jobs))
    by_key: dict[str, list[Any]] = {}
    for key, answer in zip(jobs, answers, strict=True):
        by_key.setdefault(key, []).append(answer)
    return by_key


def test_threads_racing_over_marked_records_never_rerun_the_marked_work(
    backend: Backend, table: str
) -> None:
    metrics = MemoryMetrics()
    first = backend.guard()
    keys = [f"k-{n}" for n in range(12)]
    charged = {key: n % 2 == 0 for n, key in enumerate(keys)}
    for key in keys:
        claim = first.claim_with(key, [increment(key)], PAYLOAD, lease=LEASE)
        assert isinstance(claim, Claim)
        first.mark(claim, "charge", f"ref-{key}")
        if charged[key]:
            charge(f"ref-{key}")
    backend.advance(LEASE + 2)  # every worker died

    blind = backend.guard(metrics=metrics)
    answers = race(blind, keys[:4], 6)  # without a hook: all refused, nothing written
    assert all(isinstance(a, RecoveryRequiredError) for seen in answers.values() for a in seen)
    assert takeovers(metrics, "refused") == 24
    assert {key: counter(backend.client, key) for key in keys} == dict.fromkeys(keys, 1)

    guard = backend.guard(reconcile=ledger_hook, metrics=metrics)
    answers = race(guard, keys, 8)
    for key in keys:
        (answer,) = {repr(a) for a in answers[key]}  # every thread got the same answer
        reference = f"ref-{key}"
        assert CHARGES[reference] == 1, key  # never charged twice
        if charged[key]:  # reconciled: the increment is not applied again
            assert "'reconciled': True" in answer
            assert counter(backend.client, key) == 1 and ledger(backend.client, key) is None
        else:  # not done: one thread ran it, its increment committed once
            assert "'reconciled': False" in answer
            assert counter(backend.client, key) == 2 and ledger(backend.client, key) == "rerun"
    assert takeovers(metrics, "reconciled") == 6 and takeovers(metrics, "not_done") == 6


def test_a_killed_process_marked_work_is_reconciled_not_rerun(tmp_path: Path) -> None:
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    db = str(tmp_path / "shared.db")
    effects = tmp_path / "effects.log"
    engine = Engine(db)
    client = local_client(engine, region="us-east-1")
    Idempotency(IdempotencyConfig(table_name=TABLE), client=client).ensure_table()
    keys = [f"p-{n}" for n in range(10)]
    jobs = [f"{key}:{n % 2}" for n, key in enumerate(keys)]
    worker = Path(__file__).with_name("_claim_with_worker.py")
    done = subprocess.run(
        [sys.executable, str(worker), db, str(effects), TABLE, *jobs],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr.decode()  # a real SIGKILL, claims in flight
    assert done.stdout.decode().strip() == "marked"
    assert {key: counter(client, key) for key in keys} == dict.fromkeys(keys, 1)
    charged = {line.split()[0] for line in effects.read_text().splitlines()}

    def hook(interrupted: Interrupted) -> Reconciled | NotDone:
        done = interrupted.key in {
            line.split()[0] for line in effects.read_text().splitlines()
        }  # the provider, asked by reference
        return Reconciled({"charged": interrupted.last.reference}) if done else NotDone()

    later = Idempotency(  # every lease is over on this worker's clock (its own: no estimate)
        IdempotencyConfig(table_name=TABLE, clock_skew=ClockSkewPolicy(enabled=False)),
        client=client,
        clock=lambda: time.time() + 2 * IdempotencyConfig(table_name=TABLE).lease,
        reconcile=hook,
    )
    for key in keys:
        for _ in range(3):  # the first takes it over, the others replay
            outcome = later.claim_with(key, [increment(key)], {"key": key})
            if isinstance(outcome, Claim):
                assert key not in charged
                later.complete(outcome, {"charged": "now"})
    assert {key: counter(client, key) for key in keys} == {
        key: 1 if key in charged else 2 for key in keys
    }
    assert len(charged) == 5
    engine.close()


# -- inside a key migration's window (the plain claim is a transaction there too) ---------------


def test_inside_a_key_migration_window_marked_work_is_reconciled_not_rerun(
    backend: Backend,
) -> None:
    from firstwrite.idempotency._machine.migration import LegacyClaim
    from firstwrite.idempotency.key_migration import KeyScheme

    from .test_key_migration import Versions

    versions = Versions(backend, KeyScheme(key_prefix="ORDERS"))
    window = versions.new.config  # the new scheme, the old one in its window
    for key, charged in (("run-paid", True), ("run-unpaid", False), ("with-paid", True)):
        claim = versions.new.claim(key, PAYLOAD, lease=LEASE)
        assert isinstance(claim, LegacyClaim) and claim.legacy  # both keys claimed
        versions.new.mark(claim, "charge", f"ref-{key}")
        if charged:
            charge(f"ref-{key}")
    claim = versions.new.claim_with("with-unpaid", [increment("with-unpaid")], PAYLOAD, lease=LEASE)
    assert isinstance(claim, LegacyClaim)
    versions.new.mark(claim, "charge", "ref-with-unpaid")
    backend.advance(LEASE + 2)

    with pytest.raises(RecoveryRequiredError):  # the window's plain claim: no silent rerun
        versions.new.run("run-paid", lambda: pytest.fail("must not run"), PAYLOAD)
    hooked = backend.guard(window, reconcile=ledger_hook)
    ran: list[str] = []
    result = hooked.run("run-paid", lambda: ran.append("run-paid"), PAYLOAD)
    assert result == {"charged": "ref-run-paid", "reconciled": True}
    hooked.run("run-unpaid", lambda: ran.append("run-unpaid") or "ran", PAYLOAD)
    assert ran == ["run-unpaid"]
    # an old-version retry replays both: the old key was completed with the new one
    assert versions.old.run("run-paid", lambda: pytest.fail("rerun"), PAYLOAD)["reconciled"]

    replay = hooked.claim_with("with-paid", [increment("with-paid")], PAYLOAD)
    assert isinstance(replay, Replay) and counter(backend.client, "with-paid") == 0
    again = hooked.claim_with("with-unpaid", [increment("with-unpaid")], PAYLOAD)
    assert isinstance(again, LegacyClaim) and again.legacy  # holds the old key too
    assert counter(backend.client, "with-unpaid") == 2
    hooked.complete_with(again, [ledger_entry("with-unpaid", "window")], "done")
    assert versions.old.run("with-unpaid", lambda: pytest.fail("rerun"), PAYLOAD) == "done"


# -- a takeover's claim carries the marks in its own write ---------------------------------------


def test_the_takeovers_own_write_carries_the_marks_before_the_hook_is_asked(
    backend: Backend, table: str
) -> None:
    seen: list[list[str]] = []

    def hook(interrupted: Interrupted) -> NotDone:  # the record as the hook finds it
        item = stored(backend, guard, "k")
        seen.append([p.reference or "" for p in points_of(item, "marks")])
        return NotDone()

    guard = backend.guard(reconcile=hook)
    died_after_marking(backend, guard, "k", charged=False)
    writes: list[str] = []

    def note(model: Any, **_: Any) -> None:
        if model.name != "GetItem":  # (the hook's own read)
            writes.append(model.name)

    backend.client.meta.events.register("provide-client-params.dynamodb.*", note)
    assert guard.run("k", lambda: "ran", PAYLOAD) == "ran"
    assert seen == [["ref-k"]]
    # refused for its marks, taken over carrying them, completed: no separate copy of the marks
    assert writes == ["PutItem", "PutItem", "UpdateItem"]


def test_a_worker_killed_right_after_its_takeover_leaves_the_marks(tmp_path: Path) -> None:
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    db = str(tmp_path / "shared.db")
    engine = Engine(db)
    client = local_client(engine, region="us-east-1")
    lease = IdempotencyConfig(table_name=TABLE).lease
    first = Idempotency(IdempotencyConfig(table_name=TABLE), client=client)
    first.ensure_table()
    keys = [f"t-{n}" for n in range(4)]
    for key in keys:  # each marked by a worker that died after its charge
        claim = first.claim(key, {"key": key})
        assert isinstance(claim, Claim)
        first.mark(claim, "charge", f"ref-{key}")
        charge(f"ref-{key}")
    worker = Path(__file__).with_name("_takeover_worker.py")
    for key in keys:  # a taking-over worker dies right after its claim's write, each key
        done = subprocess.run(
            [sys.executable, str(worker), db, TABLE, str(lease + 5), key],
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == -9, done.stderr.decode()
        assert done.stdout.decode().split() == ["killed"]
        item = client.get_item(TableName=TABLE, Key=first.dynamodb_key(key), ConsistentRead=True)
        assert [p.reference for p in points_of(item["Item"], "marks")] == [f"ref-{key}"]
    later = Idempotency(  # past the dead taker's lease too (its own clock: no estimate)
        IdempotencyConfig(table_name=TABLE, clock_skew=ClockSkewPolicy(enabled=False)),
        client=client,
        clock=lambda: time.time() + 3 * lease,
        reconcile=ledger_hook,
    )
    for key in keys:
        assert later.run(key, lambda: pytest.fail("rerun"), {"key": key})["reconciled"]
    assert all(CHARGES[f"ref-{key}"] == 1 for key in keys)
    engine.close()
