"""A key-scheme change through its window: an old and a new version side by side, then the new alone.

The old version is a plain guard on the previous scheme; the new one names it in
``KeyMigration``. Threads share one engine in process; processes share its database file.
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
    CallCounter,
    Claim,
    ConfigurationError,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    LostClaimError,
    MemoryMetrics,
    RecordLayout,
    Replay,
    ReplayedFailureError,
)
from firstwrite.idempotency._machine.old_schemes import SchemeKeys
from firstwrite.idempotency.key_migration import KeyMigration, KeyScheme

from ._migration_worker import race
from .conftest import TABLE, Backend

WINDOW = 3 * 3600.0
BASE = IdempotencyConfig(table_name=TABLE, client_retry_ceiling=0, retention=2 * 3600.0)


def old_keys(scheme: KeyScheme, sort_key: str | None = None) -> SchemeKeys:
    return SchemeKeys(
        scheme, partition_key="pk", sort_key=sort_key, max_key_length=250, hash_function="sha256"
    )


class Versions:
    """An old-version guard (the previous scheme alone) and a new-version guard (the current
    scheme, the previous one in its window), on one engine."""

    def __init__(self, backend: Backend, scheme: KeyScheme, **config: Any) -> None:
        self.backend = backend
        self.scheme = scheme
        self.metrics = MemoryMetrics()
        base = BASE.with_(**config)
        Idempotency(base, client=backend.client).ensure_table()
        old_config = base.with_(
            key_prefix=scheme.key_prefix, scope=scheme.scope, layout=scheme.layout
        )
        self.old = backend.guard(old_config)
        if scheme.empty_scope_part:  # the version before the unscoped key lost its empty part
            self.old._machine.keys = old_keys(scheme)  # type: ignore[assignment]
        self.migration = KeyMigration(previous=(scheme,), started_at=backend.now(), window=WINDOW)
        self.new = backend.guard(base.with_(key_migration=self.migration), metrics=self.metrics)

    def stored(self) -> dict[str, dict[str, Any]]:
        items = self.backend.client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
        return {item["pk"]["S"]: item for item in items}

    def hits(self) -> float:
        return self.metrics.total("firstwrite_legacy_key_hits_total", scheme=self.scheme.name)


SCHEMES = {
    "prefix": KeyScheme(key_prefix="ORDERS"),
    "unscoped-double-hash": KeyScheme.old_unscoped(),
    "scope-and-layout": KeyScheme(key_prefix="V1", scope="shop", layout=RecordLayout.seed_001()),
}


@pytest.fixture(params=list(SCHEMES))
def versions(request: pytest.FixtureRequest, backend: Backend) -> Versions:
    return Versions(backend, SCHEMES[request.param])


def test_the_old_unscoped_shape_and_where_it_is_the_same_key() -> None:
    keys = old_keys(KeyScheme.old_unscoped())
    assert keys.key("k#1") == ({"pk": {"S": "IDEMPOTENCY##k%231"}}, "IDEMPOTENCY##k%231")
    assert keys.key("k", scope="t")[1] == "IDEMPOTENCY#t#k"  # scoped keys never changed
    assert old_keys(KeyScheme.old_unscoped(), sort_key="sk").key("k")[1] == "IDEMPOTENCY#|k"


def test_configuration_refuses_a_previous_scheme_writing_the_same_keys() -> None:
    same = KeyMigration(previous=(KeyScheme(layout=RecordLayout.seed_001()),), started_at=0)
    with pytest.raises(ConfigurationError, match="same keys"):
        IdempotencyConfig(key_migration=same)
    with pytest.raises(ConfigurationError, match="one or more"):
        KeyMigration(previous=(), started_at=0)
    with pytest.raises(ConfigurationError, match="window"):
        KeyMigration(previous=(KeyScheme.old_unscoped(),), started_at=0, window=0)
    ok = IdempotencyConfig(key_migration=KeyMigration((KeyScheme.old_unscoped(),), 0.0))
    assert ok.key_migration is not None and ok.key_migration.ends_at(ok.retention) == 86400.0


def test_a_new_version_claim_is_written_under_both_keys_and_completed_old_key_first(
    versions: Versions,
) -> None:
    with CallCounter(versions.backend.client) as calls:
        assert versions.new.run("k1", lambda: {"n": 1}, {"a": 1}) == {"n": 1}
    assert dict(calls.by_operation) == {"TransactWriteItems": 1, "UpdateItem": 2}
    old_id = versions.old.record_id("k1")
    assert set(versions.stored()) == {versions.new.record_id("k1"), old_id}
    # The old version, which knows nothing of the new key, replays the new version's result.
    ran = []
    assert versions.old.run("k1", lambda: ran.append(1) or {"n": 2}, {"a": 1}) == {"n": 1}
    assert ran == []


def test_an_old_version_record_is_replayed_and_counted_as_a_legacy_hit(versions: Versions) -> None:
    versions.old.run("k2", lambda: "old result", {"a": 1})
    ran = []
    assert versions.new.run("k2", lambda: ran.append(1) or "again", {"a": 1}) == "old result"
    assert ran == [] and versions.hits() == 1
    assert versions.new.record_id("k2") not in versions.stored()  # nothing written by the replay


def test_live_claims_are_seen_both_ways(versions: Versions) -> None:
    held = versions.old.claim("live-1", {"a": 1})
    assert isinstance(held, Claim)
    with pytest.raises(InProgressError):
        versions.new.claim("live-1", {"a": 1}, wait=0)
    assert versions.hits() == 1
    mine = versions.new.claim("live-2", {"a": 1})
    assert isinstance(mine, Claim)
    with pytest.raises(InProgressError):
        versions.old.claim("live-2", {"a": 1}, wait=0)
    renewed = versions.new.renew(mine, lease=600)
    old_record = versions.old.get("live-2")
    assert old_record is not None and old_record.version == renewed.version == 2
    versions.new.fail(renewed, "try again", retryable=True)
    again = versions.old.claim("live-2", {"a": 1})  # a retryable failure frees the old key too
    assert isinstance(again, Claim)


def test_a_final_failure_is_replayed_by_the_old_version(versions: Versions) -> None:
    claim = versions.new.claim("f", {"a": 1})
    assert isinstance(claim, Claim)
    versions.new.fail(claim, ValueError("card declined"), retryable=False)
    with pytest.raises(ReplayedFailureError, match="card declined"):
        versions.old.run("f", lambda: "ran", {"a": 1})


def test_a_takeover_on_the_old_key_fences_out_the_new_version(versions: Versions) -> None:
    claim = versions.new.claim("t", {"a": 1}, lease=5)
    assert isinstance(claim, Claim)
    versions.backend.advance(6)
    taken = versions.old.claim("t", {"a": 1})
    assert isinstance(taken, Claim) and taken.taken_over
    with pytest.raises(LostClaimError):
        versions.new.complete(claim, "late")
    versions.old.complete(taken, "the old one's")
    assert versions.new.run("t", lambda: "again", {"a": 1}) == "the old one's"


def test_threads_of_both_versions_race_each_key_and_it_runs_once(versions: Versions) -> None:
    runs: Counter[str] = Counter()
    lock = threading.Lock()
    keys = [f"race-{n}" for n in range(6)]

    def call(job: tuple[str, bool]) -> Any:
        key, old = job
        guard = versions.old if old else versions.new

        def effect() -> str:
            with lock:
                runs[key] += 1
            time.sleep(0.02)
            return f"{key} {'old' if old else 'new'}"

        for _ in range(50):
            try:
                return guard.run(key, effect, {"k": key}, wait=2.0)
            except InProgressError:
                time.sleep(0.01)
        raise AssertionError("never answered")

    jobs = [(key, n % 2 == 0) for key in keys for n in range(8)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(call, jobs))
    assert runs == dict.fromkeys(keys, 1)
    by_key: dict[str, set[str]] = {}
    for (key, _), answer in zip(jobs, answers, strict=True):
        by_key.setdefault(key, set()).add(answer)
    assert all(len(seen) == 1 for seen in by_key.values()), by_key


def test_after_the_window_the_new_scheme_alone_at_a_plain_calls_cost(versions: Versions) -> None:
    versions.backend.advance(WINDOW - 60)  # a request late in the window, retried after it
    versions.new.run("during", lambda: "first", {"a": 1})
    assert versions.old.record_id("during") in versions.stored()
    versions.backend.advance(61)
    with CallCounter(versions.backend.client) as calls:
        ran = []
        assert versions.new.run("during", lambda: ran.append(1) or "x", {"a": 1}) == "first"
        assert ran == [] and dict(calls.by_operation) == {"PutItem": 1}
        calls.reset()
        assert versions.new.run("after", lambda: "fresh", {"a": 1}) == "fresh"
        assert dict(calls.by_operation) == {"PutItem": 1, "UpdateItem": 1}
    assert versions.old.record_id("after") not in versions.stored()


@pytest.mark.slow
def test_processes_of_both_versions_race_the_same_keys(tmp_path: Path) -> None:
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    db = str(tmp_path / "shared.db")
    engine = Engine(db)
    client = local_client(engine)
    Idempotency(BASE, client=client).ensure_table()
    engine.close()
    effects = tmp_path / "effects.log"
    keys = [f"p-{n}" for n in range(12)]
    answers = race(db, TABLE, keys, ("old", "new"), str(effects))
    assert Counter(effects.read_text().split()) == dict.fromkeys(keys, 1)
    for key in keys:  # every version answered each key with the one run's result
        assert len({a[key] for a in answers if a[key] is not None}) == 1


def test_a_guard_without_a_migration_writes_one_key(backend: Backend) -> None:
    guard = backend.guard(BASE)
    guard.ensure_table()
    with CallCounter(backend.client) as calls:
        guard.run("plain", lambda: 1, {"a": 1})
        claim = guard.claim("plain", {"a": 1})
    assert isinstance(claim, Replay)
    assert dict(calls.by_operation) == {"PutItem": 2, "UpdateItem": 1}
    assert guard._machine.migration is None
