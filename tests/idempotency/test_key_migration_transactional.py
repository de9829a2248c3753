"""The transactional variant through a key-scheme change's window: ``claim_with`` and
``complete_with`` carry every old key in their one transaction.

An old version (plain ``run`` / ``claim`` on the previous scheme) and a new version (variant 3,
with a business write: a counter increment with the claim, a ledger entry with the completion)
side by side: the business write is applied once per key. Threads share one engine; processes
share its database file.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency import (
    BusinessConditionFailedError,
    CallCounter,
    Claim,
    CompletionNotRecordedError,
    Idempotency,
    InProgressError,
    LateRetryError,
    LostClaimError,
    PayloadMismatchError,
    Replay,
    TooManyTransactItemsError,
    TransactionConflictError,
)
from firstwrite.idempotency._machine.cancellation import Kind, read
from firstwrite.idempotency._machine.migration import LegacyClaim
from firstwrite.idempotency.key_migration import KeyMigration

from ._migration_worker import OLD, race
from .conftest import TABLE, Backend
from .faults import _Http, cancel_transaction, without_returned_items
from .test_key_migration import BASE, SCHEMES, WINDOW, Versions

CANCELLATIONS = "transact_write_cancellations_total"
FAILED = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
NONE = {"Code": "None"}
THROTTLED = {"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity."}


def increment(key: str) -> dict[str, Any]:
    """The business write made with the claim: one more on the key's counter."""
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": f"COUNT#{key}"}},
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def ledger_entry(key: str, by: str) -> dict[str, Any]:
    """The business write made with the completion: the key's one ledger entry."""
    return {
        "Put": {
            "TableName": TABLE,
            "Item": {"pk": {"S": f"LEDGER#{key}"}, "by": {"S": by}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def counter(client: Any, key: str) -> int:
    item = client.get_item(
        TableName=TABLE, Key={"pk": {"S": f"COUNT#{key}"}}, ConsistentRead=True
    ).get("Item")
    return 0 if item is None else int(item["n"]["N"])


def ledger(client: Any, key: str) -> str | None:
    item = client.get_item(
        TableName=TABLE, Key={"pk": {"S": f"LEDGER#{key}"}}, ConsistentRead=True
    ).get("Item")
    return None if item is None else str(item["by"]["S"])


def old_work(client: Any, key: str) -> str:
    """What the old version runs under its claim: the same business writes, made plainly."""
    client.update_item(**increment(key)["Update"])
    client.put_item(**ledger_entry(key, "old")["Put"])
    return f"{key} by old"


def new_work(guard: Idempotency, key: str) -> Any:
    """The new version: claim with the increment, complete with the ledger entry."""
    outcome = guard.claim_with(key, [increment(key)], {"k": key})
    if isinstance(outcome, Replay):
        return outcome.value()
    result = f"{key} by new"
    guard.complete_with(outcome, [ledger_entry(key, "new")], result)
    return result


class TransactionSizes:
    """The number of items in each TransactWriteItems made through ``client``."""

    def __init__(self, client: Any) -> None:
        self.sizes: list[int] = []
        client.meta.events.register(
            "provide-client-params.dynamodb.TransactWriteItems",
            lambda params, **_: self.sizes.append(len(params["TransactItems"])),
            unique_id=f"sizes-{id(self)}",
        )


@pytest.fixture(params=list(SCHEMES))
def versions(request: pytest.FixtureRequest, backend: Backend) -> Versions:
    return Versions(backend, SCHEMES[request.param])


def test_claim_with_in_the_window_claims_every_old_key_in_its_transaction(
    versions: Versions,
) -> None:
    client = versions.backend.client
    sizes = TransactionSizes(client)
    claim = versions.new.claim_with("k1", [increment("k1")], {"k": "k1"})
    assert isinstance(claim, LegacyClaim) and len(claim.legacy) == 1
    assert sizes.sizes == [3]  # the new key, the old key, the caller's increment
    old_id = versions.old.record_id("k1")
    assert {versions.new.record_id("k1"), old_id} <= set(versions.stored())
    old_record = versions.old.get("k1")  # read in the old scheme's layout
    assert old_record is not None and old_record.owner == claim.owner
    with pytest.raises(InProgressError):  # the old version meets the claim on its own key
        versions.old.claim("k1", {"k": "k1"}, wait=0)
    with CallCounter(client) as calls:
        versions.new.complete_with(claim, [ledger_entry("k1", "new")], "k1 done")
    assert dict(calls.by_operation) == {"TransactWriteItems": 1}  # both keys, atomically
    assert sizes.sizes[-1] == 3
    ran: list[int] = []
    assert versions.old.run("k1", lambda: ran.append(1) or "again", {"k": "k1"}) == "k1 done"
    assert ran == [] and counter(client, "k1") == 1 and ledger(client, "k1") == "new"


def test_an_old_version_record_answers_claim_with_and_nothing_is_applied(
    versions: Versions,
) -> None:
    client = versions.backend.client
    versions.old.run("done", lambda: old_work(client, "done"), {"k": "done"})
    replay = versions.new.claim_with("done", [increment("done")], {"k": "done"})
    assert isinstance(replay, Replay) and replay.value() == "done by old"
    assert counter(client, "done") == 1 and versions.hits() == 1
    assert versions.new.record_id("done") not in versions.stored()
    with pytest.raises(PayloadMismatchError):
        versions.new.claim_with("done", [increment("done")], {"k": "other"})
    assert counter(client, "done") == 1 and versions.hits() == 2

    held = versions.old.claim("live", {"k": "live"})
    assert isinstance(held, Claim)
    with pytest.raises(InProgressError):
        versions.new.claim_with("live", [increment("live")], {"k": "live"})
    assert counter(client, "live") == 0 and versions.hits() == 3
    assert (
        versions.metrics.total(CANCELLATIONS, transact_write_cancellation_reason="legacy_duplicate")
        == 3
    )


def test_an_old_key_refusal_without_the_returned_item_is_read_in_the_old_layout(
    versions: Versions,
) -> None:
    client = versions.backend.client
    versions.old.run("bare", lambda: "old answer", {"k": "bare"})
    without_returned_items(client)
    with CallCounter(client) as calls:
        replay = versions.new.claim_with("bare", [increment("bare")], {"k": "bare"})
    assert isinstance(replay, Replay) and replay.value() == "old answer"
    assert dict(calls.by_operation) == {"TransactWriteItems": 1, "GetItem": 1}
    assert versions.hits() == 1 and counter(client, "bare") == 0


def test_a_lease_run_out_on_the_old_key_is_taken_over_under_both_keys(
    versions: Versions,
) -> None:
    client = versions.backend.client
    stale = versions.old.claim("t", {"k": "t"}, lease=5)
    assert isinstance(stale, Claim)
    versions.backend.advance(6)
    taken = versions.new.claim_with("t", [increment("t")], {"k": "t"})
    assert isinstance(taken, LegacyClaim)
    with pytest.raises(LostClaimError):  # the old worker is fenced out of its own key
        versions.old.complete(stale, "stale")
    versions.new.complete_with(taken, [ledger_entry("t", "new")], "fresh")
    assert versions.old.run("t", lambda: "again", {"k": "t"}) == "fresh"
    assert counter(client, "t") == 1


def test_an_old_key_record_past_retention_is_judged_late_or_replaced(backend: Backend) -> None:
    """With ``refuse_late_retries`` the claim condition refuses a record past retention and
    the machine judges it: the same request's is a late retry, another request's is taken
    over (the old key's item replaced as seen)."""
    versions = Versions(backend, SCHEMES["scope-and-layout"], refuse_late_retries=True)
    client = backend.client
    versions.old.run("late", lambda: "old answer", {"k": "late"})
    versions.old.run("other", lambda: "old answer", {"k": "other"})
    backend.advance(BASE.retention + 60)  # past retention, still inside the window
    with pytest.raises(LateRetryError):
        versions.new.claim_with("late", [increment("late")], {"k": "late"})
    assert counter(client, "late") == 0 and versions.hits() == 1
    sizes = TransactionSizes(client)
    taken = versions.new.claim_with("other", [increment("other")], {"k": "new request"})
    assert isinstance(taken, LegacyClaim) and versions.hits() == 2
    assert sizes.sizes == [3, 3]  # refused by the old key, then over it as seen
    old_record = versions.old.get("other")
    assert old_record is not None and old_record.owner == taken.owner
    assert counter(client, "other") == 1


def test_complete_with_is_fenced_on_the_old_key_too(versions: Versions) -> None:
    client = versions.backend.client
    mine = versions.new.claim_with("f", [increment("f")], {"k": "f"}, lease=5)
    assert isinstance(mine, LegacyClaim)
    versions.backend.advance(6)
    taken = versions.old.claim("f", {"k": "f"})  # the old version takes its own key over
    assert isinstance(taken, Claim) and taken.taken_over
    with pytest.raises(LostClaimError):
        versions.new.complete_with(mine, [ledger_entry("f", "new")], "late")
    assert ledger(client, "f") is None  # the business write went down with the fence
    assert (
        versions.metrics.total(CANCELLATIONS, transact_write_cancellation_reason="legacy_fence")
        == 1
    )
    new_record = versions.new.get("f")
    assert new_record is not None and new_record.status.name == "PENDING"  # not completed either


def test_complete_with_finishes_a_plain_completion_cut_short_after_the_old_key(
    versions: Versions,
) -> None:
    """A plain ``complete`` writes the old key, then the new: cut between the two, the claim's
    ``complete_with`` leaves the finished old key out and does the rest in one transaction."""
    client = versions.backend.client
    claim = versions.new.claim_with("cut", [increment("cut")], {"k": "cut"})
    assert isinstance(claim, LegacyClaim)
    updates: list[int] = []

    def second_update_refused(**_: Any) -> Any:
        updates.append(1)
        if len(updates) != 2:
            return None
        body = {"Error": {"Code": "ValidationException", "Message": "refused"}}
        return _Http(400), {**body, "ResponseMetadata": {"HTTPStatusCode": 400}}

    client.meta.events.register(
        "before-call.dynamodb.UpdateItem", second_update_refused, unique_id="cut-short"
    )
    with pytest.raises(CompletionNotRecordedError):
        versions.new.complete(claim, "result")
    client.meta.events.unregister("before-call.dynamodb.UpdateItem", unique_id="cut-short")
    old_record, new_record = versions.old.get("cut"), versions.new.get("cut")
    assert old_record is not None and old_record.status.name == "COMPLETED"
    assert new_record is not None and new_record.status.name == "PENDING"
    sizes = TransactionSizes(client)
    versions.new.complete_with(claim, [ledger_entry("cut", "new")], "result")
    assert sizes.sizes == [3, 2]  # refused by the finished old key, then without it
    new_record = versions.new.get("cut")
    assert new_record is not None and new_record.status.name == "COMPLETED"
    assert ledger(client, "cut") == "new"


def test_a_business_condition_failure_names_the_callers_item_behind_the_old_keys(
    versions: Versions,
) -> None:
    client = versions.backend.client
    client.put_item(TableName=TABLE, Item={"pk": {"S": "LEDGER#b"}, "by": {"S": "someone"}})
    with pytest.raises(BusinessConditionFailedError) as info:
        versions.new.claim_with("b", [increment("b"), ledger_entry("b", "new")], {"k": "b"})
    assert list(info.value.reasons) == [1]  # the caller's second item, not the transaction's 3rd
    assert info.value.reasons[1]["Code"] == "ConditionalCheckFailed"
    assert versions.new.get("b") is None and versions.old.get("b") is None  # rolled back
    assert counter(client, "b") == 0 and versions.hits() == 0
    claim = versions.new.claim_with("b", [increment("b")], {"k": "b"})
    assert isinstance(claim, LegacyClaim)
    with pytest.raises(BusinessConditionFailedError) as info:
        versions.new.complete_with(claim, [ledger_entry("b", "new")], "x")
    assert list(info.value.reasons) == [0]
    record = versions.old.get("b")
    assert record is not None and record.status.name == "PENDING"  # nothing completed


def test_a_throttled_business_item_is_indexed_past_the_old_keys(versions: Versions) -> None:
    cancel_transaction(versions.backend.client, [NONE, NONE, THROTTLED], times=100)
    with pytest.raises(TransactionConflictError) as info:
        versions.new.claim_with("r", [increment("r")], {"k": "r"}, budget=5.0)
    assert info.value.items == {0: THROTTLED} and info.value.own == 2


def test_the_item_limit_counts_the_old_keys(backend: Backend) -> None:
    versions = Versions(backend, SCHEMES["prefix"])
    client = backend.client

    def puts(n: int, tag: str) -> list[dict[str, Any]]:
        return [
            {"Put": {"TableName": TABLE, "Item": {"pk": {"S": f"ORDER#{tag}{i}"}}}}
            for i in range(n)
        ]

    with CallCounter(client) as calls, pytest.raises(TooManyTransactItemsError) as refused:
        versions.new.claim_with("big", puts(99, "a"))
    assert calls.total == 0 and versions.new.get("big") is None
    assert refused.value.own == 2 and refused.value.given == 99
    assert "at most 98 of yours" in str(refused.value)
    claim = versions.new.claim_with("big", puts(98, "b"))
    assert isinstance(claim, LegacyClaim)
    with CallCounter(client) as calls, pytest.raises(TooManyTransactItemsError):
        versions.new.complete_with(claim, puts(99, "c"), "x")
    assert calls.total == 0
    versions.new.complete_with(claim, puts(98, "d"), "x")
    assert versions.old.run("big", lambda: "again") == "x"
    backend.advance(WINDOW + 1)  # past the window: the claim alone is the layer's
    assert isinstance(versions.new.claim_with("after", puts(99, "e")), Claim)


def test_after_the_window_claim_with_writes_the_new_key_alone(versions: Versions) -> None:
    client = versions.backend.client
    versions.backend.advance(WINDOW - 60)  # late in the window, retried after it
    assert new_work(versions.new, "late") == "late by new"
    versions.backend.advance(61)
    sizes = TransactionSizes(client)
    with CallCounter(client) as calls:
        replay = versions.new.claim_with("late", [increment("late")], {"k": "late"})
    assert isinstance(replay, Replay) and replay.value() == "late by new"
    assert sizes.sizes == [2] and dict(calls.by_operation) == {"TransactWriteItems": 1}
    fresh = versions.new.claim_with("fresh", [increment("fresh")], {"k": "fresh"})
    assert type(fresh) is Claim  # not a LegacyClaim: nothing under the old key
    assert versions.old.record_id("fresh") not in versions.stored()
    assert counter(client, "late") == 1


@pytest.mark.asyncio
async def test_the_asyncio_guard_carries_the_old_keys_the_same_way(backend: Backend) -> None:
    from firstwrite.idempotency import AsyncIdempotency
    from firstwrite.idempotency.aio import ThreadedClient

    versions = Versions(backend, SCHEMES["prefix"])
    client = backend.client
    guard = AsyncIdempotency(
        BASE.with_(key_migration=versions.migration),
        client=ThreadedClient(client),
        clock=backend.now,
    )
    claim = await guard.claim_with("a", [increment("a")], {"k": "a"})
    assert isinstance(claim, LegacyClaim)
    with pytest.raises(InProgressError):
        versions.old.claim("a", {"k": "a"}, wait=0)
    with CallCounter(client) as calls:
        await guard.complete_with(claim, [ledger_entry("a", "new")], "async")
    assert dict(calls.by_operation) == {"TransactWriteItems": 1}
    assert versions.old.run("a", lambda: "again", {"k": "a"}) == "async"
    versions.old.run("b", lambda: "old b", {"k": "b"})
    replay = await guard.claim_with("b", [increment("b")], {"k": "b"})
    assert isinstance(replay, Replay) and replay.value() == "old b"
    assert counter(client, "a") == 1 and counter(client, "b") == 0


def test_cancellation_reasons_are_read_by_item_role() -> None:
    """The layer's own items first (the current key, then each old key), the caller's after."""
    legacy = read([NONE, FAILED, NONE, NONE], "duplicate", own=3)
    assert legacy.kind is Kind.OWN_CONDITION and legacy.refused == 1
    assert legacy.labels == ["legacy_duplicate"] and legacy.business == {}
    assert legacy.own_item is None
    returned = {**FAILED, "Item": {"pk": {"S": "OLD#k"}}}
    first = read([FAILED, returned, FAILED], "fence", own=2)
    assert first.refused == 0 and first.labels == [
        "fence",
        "legacy_fence",
        "business_condition_failed",
    ]
    assert read([NONE, returned, NONE], "duplicate", own=2).own_item == returned["Item"]
    business = read([NONE, NONE, NONE, FAILED], "duplicate", own=3)
    assert business.kind is Kind.BUSINESS and business.business == {0: FAILED}
    assert business.refused is None
    assert read([NONE, FAILED], "duplicate").kind is Kind.BUSINESS  # one own item by default


def test_threads_of_both_versions_race_and_the_business_write_applies_once(
    versions: Versions,
) -> None:
    client = versions.backend.client
    versions.backend.advance(WINDOW - 60)  # so that a retry after the window finds the records
    keys = [f"race-{n}" for n in range(6)]
    lock = threading.Lock()
    runs: Counter[str] = Counter()

    def call(job: tuple[str, bool]) -> Any:
        key, old = job
        for _ in range(200):
            try:
                if not old:
                    return new_work(versions.new, key)

                def effect() -> str:
                    with lock:
                        runs[key] += 1
                    time.sleep(0.02)
                    return old_work(client, key)

                return versions.old.run(key, effect, {"k": key}, wait=2.0)
            except InProgressError:
                time.sleep(0.01)
        raise AssertionError("never answered")

    # Even keys meet the new version first, odd ones the old version.
    jobs = [(key, (n + i) % 2 == 1) for i, key in enumerate(keys) for n in range(8)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(call, jobs))
    by_key: dict[str, set[str]] = {}
    for (key, _), answer in zip(jobs, answers, strict=True):
        by_key.setdefault(key, set()).add(answer)
    assert all(len(seen) == 1 for seen in by_key.values()), by_key  # replays seen by both
    assert {key: counter(client, key) for key in keys} == dict.fromkeys(keys, 1)
    for key in keys:
        (answer,) = by_key[key]
        assert ledger(client, key) == answer.rsplit(" ", 1)[1]
        assert runs[key] == (1 if answer.endswith("old") else 0)
    new_won = [key for key in keys if by_key[key] == {f"{key} by new"}]
    assert new_won, by_key
    versions.backend.advance(61)  # past the window: the new scheme alone
    for key in new_won:
        assert new_work(versions.new, key) == f"{key} by new"
        assert counter(client, key) == 1
    # The keys the old version ran are under the old key alone: written before the old
    # instances stopped (rollout step 1), they have expired when the window ends.


@pytest.mark.slow
def test_processes_of_an_old_version_and_a_transactional_new_version_race(
    tmp_path: Path,
) -> None:
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    db = str(tmp_path / "shared.db")
    engine = Engine(db)
    client = local_client(engine)
    Idempotency(BASE, client=client).ensure_table()
    keys = [f"p-{n}" for n in range(12)]
    roles = ("old-business", "new-transactional")
    answers = race(db, TABLE, keys, roles, str(tmp_path / "effects.log"))
    assert {key: counter(client, key) for key in keys} == dict.fromkeys(keys, 1)
    for key in keys:  # both versions answered each key with the one run's result
        seen = {a[key] for a in answers if a[key] is not None}
        (answer,) = seen
        assert ledger(client, key) == answer.split(" by ")[1].split()[0]
    # A retry after the window on the new scheme alone replays what the new version ran.
    ended = KeyMigration(previous=(OLD,), started_at=time.time() - WINDOW - 1, window=WINDOW)
    after = Idempotency(BASE.with_(key_migration=ended), client=client)
    sizes = TransactionSizes(client)
    for key in keys:
        answer = next(a[key] for a in answers if a[key] is not None)
        if " by new" in answer:
            replay = after.claim_with(key, [increment(key)], {"k": key})
            assert isinstance(replay, Replay) and replay.value() == answer
    assert sizes.sizes and set(sizes.sizes) == {2}  # the new key and the increment alone
    assert {key: counter(client, key) for key in keys} == dict.fromkeys(keys, 1)
    engine.close()
