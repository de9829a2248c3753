"""Marks written under a previous key scheme's key, inside a key migration's window: never a
silent rerun.

The old version (the previous scheme alone) claims a key, marks a recovery point, maybe charges,
and dies. The new version's claim, a transaction over both keys, is refused by the old key's
marks (its claim condition there asks for no marks, as it does on the new key): without a hook
``RecoveryRequiredError`` and nothing written; with one both keys are taken over as seen, each
carrying the points, and the hook decides. Over the three old shapes the window knows (another
prefix, the old unscoped key, another scope and record layout), through the plain claim and
``claim_with``, with threads racing.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from firstwrite.idempotency import (
    Claim,
    InProgressError,
    Interrupted,
    NotDone,
    Reconciled,
    RecoveryRequiredError,
    Replay,
)
from firstwrite.idempotency._machine.migration import LegacyClaim
from firstwrite.idempotency.guard import Idempotency
from firstwrite.idempotency.key_migration import KeyScheme
from firstwrite.idempotency.recovery import points_of

from .conftest import Backend
from .test_key_migration import SCHEMES, Versions
from .test_key_migration_transactional import counter, increment, ledger_entry

LEASE = 30.0
PAYLOAD = {"amount": 40}
CHARGES: Counter[str] = Counter()  # the provider: charges made, by reference
LOCK = threading.Lock()


@pytest.fixture(autouse=True)
def _provider() -> None:
    CHARGES.clear()


@pytest.fixture(params=list(SCHEMES))
def scheme(request: pytest.FixtureRequest) -> KeyScheme:
    return SCHEMES[request.param]


def charge(reference: str) -> str:
    with LOCK:
        CHARGES[reference] += 1
    return f"charged {reference}"


def provider_hook(interrupted: Interrupted) -> Reconciled | NotDone:
    """Asks the provider whether any marked reference was charged."""
    for point in interrupted.points:
        if CHARGES[point.reference or ""]:
            return Reconciled(f"charged {point.reference}")
    return NotDone()


def old_version_died(versions: Versions, key: str, *, charged: bool) -> None:
    """The old version claims ``key`` (its old key alone), marks the charge, maybe charges,
    and dies."""
    claim = versions.old.claim(key, PAYLOAD, lease=LEASE)
    assert isinstance(claim, Claim) and not isinstance(claim, LegacyClaim)
    versions.old.mark(claim, "charge", f"ref-{key}")
    if charged:
        charge(f"ref-{key}")


def marks_by_key(versions: Versions) -> dict[str, list[str]]:
    """The references marked on every stored record, by DynamoDB key (either layout)."""
    out = {}
    for pk, item in versions.stored().items():
        attribute = "recoveryPoints" if "recoveryPoints" in item else "marks"
        out[pk] = [p.reference or "" for p in points_of(item, attribute)]
    return out


def test_without_a_hook_the_window_refuses_and_writes_nothing(
    backend: Backend, scheme: KeyScheme
) -> None:
    versions = Versions(backend, scheme)
    old_version_died(versions, "order-1", charged=True)
    backend.advance(LEASE + 2)
    before = versions.stored()
    with pytest.raises(RecoveryRequiredError) as refused:
        versions.new.run("order-1", lambda: charge("ref-order-1"), PAYLOAD)
    assert [p.reference for p in refused.value.points] == ["ref-order-1"]
    with pytest.raises(RecoveryRequiredError):
        versions.new.claim_with("order-1", [increment("order-1")], PAYLOAD)
    assert versions.stored() == before  # nothing written: no new key, the old key as it was
    assert counter(backend.client, "order-1") == 0
    assert CHARGES == {"ref-order-1": 1}


def paid_and_unpaid(backend: Backend, scheme: KeyScheme) -> tuple[Versions, Idempotency]:
    """The old version died on ``paid`` after charging and on ``unpaid`` before; the leases
    are over. Returns the versions and a new-version guard with the provider hook."""
    versions = Versions(backend, scheme)
    old_version_died(versions, "paid", charged=True)
    old_version_died(versions, "unpaid", charged=False)
    backend.advance(LEASE + 2)
    return versions, backend.guard(versions.new.config, reconcile=provider_hook)


def test_with_a_hook_the_old_keys_marks_are_reconciled_not_rerun(
    backend: Backend, scheme: KeyScheme
) -> None:
    versions, hooked = paid_and_unpaid(backend, scheme)
    ran: list[str] = []

    def work(key: str) -> str:
        ran.append(key)
        return charge(f"ref-{key}")

    assert hooked.run("paid", lambda: work("paid"), PAYLOAD) == "charged ref-paid"
    assert hooked.run("unpaid", lambda: work("unpaid"), PAYLOAD) == "charged ref-unpaid"
    assert ran == ["unpaid"] and CHARGES == {"ref-paid": 1, "ref-unpaid": 1}
    # Both keys were completed: either version's retry replays, nobody charges again.
    for guard in (versions.old, hooked, versions.new):
        for key in ("paid", "unpaid"):
            assert guard.run(key, lambda: pytest.fail("rerun"), PAYLOAD) == f"charged ref-{key}"
    # Every record of the two keys (old and new key) kept the old version's point.
    assert sorted(refs for refs in marks_by_key(versions).values() if refs) == [
        ["ref-paid"],
        ["ref-paid"],
        ["ref-unpaid"],
        ["ref-unpaid"],
    ]


def test_claim_with_reconciles_the_old_keys_marks_and_applies_items_only_when_not_done(
    backend: Backend, scheme: KeyScheme
) -> None:
    versions, hooked = paid_and_unpaid(backend, scheme)
    replay = hooked.claim_with("paid", [increment("paid")], PAYLOAD)
    assert isinstance(replay, Replay) and replay.value() == "charged ref-paid"
    assert counter(backend.client, "paid") == 0  # reconciled: the items are not applied
    claim = hooked.claim_with("unpaid", [increment("unpaid")], PAYLOAD)
    assert isinstance(claim, LegacyClaim) and claim.legacy  # holds the old key too
    assert counter(backend.client, "unpaid") == 1  # not done: applied, once
    hooked.complete_with(claim, [ledger_entry("unpaid", "new")], charge("ref-unpaid"))
    assert versions.old.run("unpaid", lambda: pytest.fail("rerun"), PAYLOAD) == (
        "charged ref-unpaid"
    )
    assert CHARGES == {"ref-paid": 1, "ref-unpaid": 1}


def test_points_on_both_keys_all_reach_the_hook(backend: Backend, scheme: KeyScheme) -> None:
    """The new version claims both keys, marks (on the new key) and dies; the old version takes
    its old key over (no marks there), marks and dies too: the next claim asks the hook about
    both workers' points, and carries them all."""
    versions = Versions(backend, scheme)
    claim = versions.new.claim("k", PAYLOAD, lease=LEASE)
    assert isinstance(claim, LegacyClaim) and claim.legacy
    versions.new.mark(claim, "charge", "ref-new")
    backend.advance(LEASE + 2)
    old_version_died(versions, "k", charged=False)
    backend.advance(LEASE + 2)
    asked: list[list[str]] = []

    def hook(interrupted: Interrupted) -> NotDone:
        asked.append(sorted(p.reference or "" for p in interrupted.points))
        return NotDone()

    hooked = backend.guard(versions.new.config, reconcile=hook)
    again = hooked.claim("k", PAYLOAD, lease=LEASE)
    assert isinstance(again, LegacyClaim)
    assert asked == [["ref-k", "ref-new"]]
    assert [sorted(refs) for refs in marks_by_key(versions).values()] == [
        ["ref-k", "ref-new"],
        ["ref-k", "ref-new"],
    ]


def test_threads_racing_over_old_keys_marked_work_never_rerun_it(backend: Backend) -> None:
    """Twelve keys the old version marked and died on (half of them charged), eight threads of
    the new version (with the hook) and four of the old one (without: they take nothing over
    while the new version holds the keys) running each key: every reference charged once."""
    versions = Versions(backend, KeyScheme(key_prefix="ORDERS"))
    keys = [f"order-{i}" for i in range(12)]
    for i, key in enumerate(keys):
        old_version_died(versions, key, charged=i % 2 == 0)
    backend.advance(LEASE + 2)
    hooked = backend.guard(versions.new.config, reconcile=provider_hook)
    answers: list[Any] = []

    def worker(guard: Idempotency) -> None:
        for key in keys:
            for _ in range(50):
                try:
                    answers.append(guard.run(key, lambda k=key: charge(f"ref-{k}"), PAYLOAD))
                    break
                except (InProgressError, RecoveryRequiredError):
                    continue

    guards = [hooked] * 8 + [versions.old] * 4
    with ThreadPoolExecutor(len(guards)) as pool:
        for future in [pool.submit(worker, g) for g in guards]:
            future.result()
    assert {f"ref-{key}": 1 for key in keys} == CHARGES
    for key in keys:
        assert hooked.run(key, lambda: pytest.fail("rerun"), PAYLOAD) == f"charged ref-{key}"
        assert versions.old.run(key, lambda: pytest.fail("rerun"), PAYLOAD) == (
            f"charged ref-{key}"
        )
