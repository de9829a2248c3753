"""Recovery points against real deaths: workers SIGKILLed before their mark, between their
mark and their side effect, and between the side effect and the completion, over 1,000 keys.

Phase one: tests/proof/recovery_worker.py forks one child per batch of 25 keys (two forkers at
once, on one engine database file); each child claims its keys with a short lease and takes
each to its point (drawn at random): claimed only, marked, marked and charged (one line in a
ledger file), or completed; then it is killed by SIGKILL, its claims in flight. Phase two, after every lease is over: each key is run again,
with a ``reconcile`` hook that looks the mark's reference up in the ledger, or with no hook.

With the hook: every key charged exactly once (0 reruns), each marked-and-killed key
reconciled (``Reconciled`` when its charge is in the ledger, ``NotDone`` and run once more
when it is not), no hook call for the others. Without it: no key charged twice, none of the
marked keys run again, each refused (RecoveryRequiredError) and counted in
``firstwrite_recovery_takeovers_total{outcome="refused"}``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency import (
    Idempotency,
    IdempotencyConfig,
    Interrupted,
    MemoryMetrics,
    NotDone,
    Reconciled,
    RecoveryRequiredError,
)

pytestmark = [pytest.mark.slow, pytest.mark.crash]

KEYS = 1000
POINTS = ("before_mark", "after_mark", "after_effect", "complete")
LEASE = 1.0
FORKERS = 2
BATCH = 25  # keys in flight in one worker when it is killed
TABLE = "idem"
WORKER = Path(__file__).with_name("recovery_worker.py")


def charges(ledger: Path) -> Counter[str]:
    """How many times each key was charged (lines of the ledger)."""
    if not ledger.exists():
        return Counter()
    return Counter(line.split()[0] for line in ledger.read_text().splitlines())


def references(ledger: Path) -> set[str]:
    if not ledger.exists():
        return set()
    return {line.split()[1] for line in ledger.read_text().splitlines()}


def kill_workers(tmp_path: Path, seed: int) -> tuple[dict[str, str], Path, Path]:
    """Phase one: every key claimed by a child that dies at the key's point. Returns
    ``key -> point``, the database file and the ledger."""
    db, ledger = tmp_path / "engine.db", tmp_path / "ledger.txt"
    engine = Engine(str(db))
    Idempotency(IdempotencyConfig(table_name=TABLE), client=local_client(engine)).ensure_table()
    engine.close()
    rng = random.Random(seed)
    points = {f"order-{i}": rng.choice(POINTS) for i in range(KEYS)}
    keys = [[key, point] for key, point in points.items()]
    forkers = []
    for n in range(FORKERS):
        share = keys[n::FORKERS]
        spec = {
            "db": str(db),
            "ledger": str(ledger),
            "table": TABLE,
            "lease": LEASE,
            "batches": [share[i : i + BATCH] for i in range(0, len(share), BATCH)],
        }
        spec_file = tmp_path / f"forker-{n}.json"
        spec_file.write_text(json.dumps(spec))
        forkers.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), str(spec_file)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    ended: dict[str, int] = {}
    for forker in forkers:
        out, err = forker.communicate(timeout=120)
        assert forker.returncode == 0, err
        for line in out.splitlines():
            row = json.loads(line)
            ended[row["key"]] = row["ended"]
    assert len(ended) == KEYS
    for key, point in points.items():  # each child died as told, by a real SIGKILL
        assert ended[key] == -9, (key, point, ended[key])
    time.sleep(LEASE + 0.1)  # every lease over
    return points, db, ledger


def test_takeovers_with_a_ledger_hook_never_rerun_marked_work(tmp_path: Path) -> None:
    points, db, ledger = kill_workers(tmp_path, seed=41)
    charged_before = charges(ledger)
    refs = references(ledger)
    asked: dict[str, Interrupted] = {}

    def reconcile(interrupted: Interrupted) -> Reconciled | NotDone:
        asked[interrupted.key] = interrupted
        reference = interrupted.last.reference
        if reference in refs:  # the charge went through: its result, without charging again
            return Reconciled({"charged": reference})
        return NotDone()

    metrics = MemoryMetrics()
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE),
        client=local_client(Engine(str(db))),
        metrics=metrics,
        reconcile=reconcile,
    )
    from recovery_worker import charge

    reran: list[str] = []
    for key in points:

        def work(key: str = key) -> dict[str, str]:
            reran.append(key)
            charge(str(ledger), key, f"retry-{key}")
            return {"charged": f"retry-{key}"}

        result = guard.run(key, work, {"key": key})
        assert "charged" in result

    by_point = Counter(points.values())
    final = charges(ledger)
    assert all(n == 1 for n in final.values()), [k for k, n in final.items() if n > 1]
    assert set(final) == set(points)  # every key charged, once
    marked = {k for k, p in points.items() if p in ("after_mark", "after_effect")}
    assert set(asked) == marked  # each marked-and-killed key reconciled, no other
    assert sorted(reran) == sorted(
        k for k, p in points.items() if p in ("before_mark", "after_mark")
    )
    assert all(charged_before[k] == 1 for k, p in points.items() if p == "after_effect")
    reconciled = metrics.total("firstwrite_recovery_takeovers_total", outcome="reconciled")
    not_done = metrics.total("firstwrite_recovery_takeovers_total", outcome="not_done")
    assert (reconciled, not_done) == (by_point["after_effect"], by_point["after_mark"])
    assert min(by_point.values()) > KEYS // 8  # every point drawn often


def test_takeovers_without_a_hook_are_refused_and_counted(tmp_path: Path) -> None:
    points, db, ledger = kill_workers(tmp_path, seed=42)
    charged_before = charges(ledger)
    metrics = MemoryMetrics()
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE),
        client=local_client(Engine(str(db))),
        metrics=metrics,
    )
    from recovery_worker import charge

    refused: set[str] = set()
    for key in points:

        def work(key: str = key) -> str:
            charge(str(ledger), key, f"retry-{key}")
            return "charged"

        try:
            guard.run(key, work, {"key": key})
        except RecoveryRequiredError as exc:
            assert exc.points and exc.points[-1].step == "charge"
            refused.add(key)

    marked = {k for k, p in points.items() if p in ("after_mark", "after_effect")}
    assert refused == marked
    final = charges(ledger)
    assert all(n == 1 for n in final.values())  # 0 reruns
    for key in marked:  # nothing ran again for a marked key
        assert final[key] == charged_before[key]
    assert metrics.total("firstwrite_recovery_takeovers_total", outcome="refused") == len(marked)
