"""A key migration's window: what a call costs inside it, and that no migration costs nothing.

``python -m bench.key_migration [REQUESTS]`` prints a Markdown note (for BENCHMARKS.md):

* time per request (median of 5 runs of REQUESTS) on the boto3 client bound in process to the
  engine, for a first call and a duplicate, through ``run`` and through the transactional
  variant (``claim_with`` with one business ``Put``, then ``complete_with``): a guard without
  ``key_migration``, and one inside a migration window (one previous scheme);
* with valgrind, instructions per request of the same four, and of a guard without
  ``key_migration`` built from the branch point's sources (``BASE``, a git revision: the code
  before the migration existed), counted by :mod:`._callgrind`.

Run as ``python -m bench.key_migration --child N REPS`` it is the counted program.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from . import _callgrind
from ._common import Section, Series, Settings, Table, guard_client_config, microseconds_per_call

BASE = os.environ.get("KEY_MIGRATION_BASE", "48f5cde")
ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("first call", "duplicate", "first call, claim_with", "duplicate, claim_with")


def _guards(directory: str) -> dict[str, Any]:
    """The guards measured: ``plain`` (no key_migration) and, when this checkout has it,
    ``window`` (inside a migration window)."""
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    client = local_client(
        Engine(os.path.join(directory, "bench.db"), durability="normal"),
        config=guard_client_config(),
    )
    config = IdempotencyConfig(table_name="bench-migration")
    guards = {"plain": Idempotency(config, client=client)}
    guards["plain"].ensure_table()
    try:
        from firstwrite.idempotency import KeyMigration, KeyScheme
    except ImportError:  # the branch point's sources
        return guards
    window = KeyMigration(previous=(KeyScheme.old_unscoped(),), started_at=time.time() + 3600)
    guards["window"] = Idempotency(config.with_(key_migration=window), client=client)
    return guards


def _transactional(guard: Any, key: str, payload: dict[str, Any]) -> object:
    """Variant 3: the claim with a business ``Put`` in one transaction, then the completion."""
    order = {"Put": {"TableName": "bench-migration", "Item": {"pk": {"S": f"ORDER#{key}"}}}}
    outcome = guard.claim_with(key, [order], payload)
    if not hasattr(outcome, "owner"):  # a Replay: nothing applied
        return outcome
    return guard.complete_with(outcome, [], {"ok": True})


def _operation(guard: Any, scenario: str, name: str) -> Callable[[int], object]:
    payload = {"amount": 10, "currency": "EUR"}
    if scenario == "first call, claim_with":
        return lambda i: _transactional(guard, f"{name}-tx-{i}", payload)
    if scenario == "duplicate, claim_with":
        _transactional(guard, f"{name}-tx-dup", payload)
        return lambda i: _transactional(guard, f"{name}-tx-dup", payload)
    if scenario == "first call":
        return lambda i: guard.run(f"{name}-{i}", lambda: {"ok": True}, payload)
    guard.run(f"{name}-dup", lambda: {"ok": True}, payload)
    return lambda i: guard.run(f"{name}-dup", lambda: {"ok": False}, payload)


def _ops(directory: str) -> dict[tuple[str, str], Callable[[int], object]]:
    guards = _guards(directory)
    return {(s, n): _operation(g, s, n) for n, g in guards.items() for s in SCENARIOS}


def _child(requests: int, reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-migration-") as directory:
        _callgrind.count_named(_ops(directory), requests, reps)


def _timed(requests: int, reps: int = 5) -> dict[tuple[str, str], list[float]]:
    """Microseconds per request, one value per repetition (guards interleaved per rep)."""
    with tempfile.TemporaryDirectory(prefix="bench-migration-") as directory:
        return microseconds_per_call(_ops(directory), requests, reps)


def _counted(src: Path, requests: int) -> dict[tuple[str, str], float]:
    """Thousands of instructions per request, by (scenario, guard), of ``src``'s firstwrite."""
    args = ["--child", str(requests), "2"]
    return cast(
        "dict[tuple[str, str], float]",
        _callgrind.least_per_piece("bench.key_migration", args, per=requests, src=src),
    )


def main(requests: int) -> None:
    timed = {k: statistics.median(v) for k, v in _timed(requests).items()}
    print(f"Time per request, µs (median of 5 runs of {requests}, bound boto3 client):\n")
    print("| scenario | no key_migration | inside a migration window | ratio |")
    print("|---|---|---|---|")
    for s in SCENARIOS:
        plain, window = timed[s, "plain"], timed[s, "window"]
        print(f"| {s} | {plain:.0f} | {window:.0f} | {window / plain:.2f}x |")
    why = _callgrind.available()
    if why is not None:
        print(f"\nInstructions not counted: {why}")
        return
    counted = _counted(ROOT / "src", requests // 4)
    with tempfile.TemporaryDirectory(prefix="bench-migration-base-") as scratch:
        base = _counted(_callgrind.sources_at(BASE, ROOT, Path(scratch)), requests // 4)
    print(f"\nThousands of instructions per request (callgrind; base = {BASE}):\n")
    print("| scenario | base, no key_migration | this, no key_migration | change | window |")
    print("|---|---|---|---|---|")
    for s in SCENARIOS:
        b, p, w = base[s, "plain"], counted[s, "plain"], counted[s, "window"]
        print(f"| {s} | {b:.1f} | {p:.1f} | {(p - b) / b * 100:+.2f}% | {w:.1f} |")


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    """The time tables, for ``python -m bench`` (the instruction counts: run this module)."""
    section = Section(
        key="key_migration",
        title="A key migration's window vs no migration (issue 37)",
        method=[
            "The engine in process (durability normal), through a boto3 client bound to it. "
            "**plain**: a guard without `key_migration`; **window**: a guard inside a "
            "migration window with one previous scheme (`KeyScheme.old_unscoped()`). "
            "`claim_with` scenarios: variant 3, the claim with one business `Put` in one "
            "transaction, then `complete_with` (the window adds the old key to both).",
            f"{settings.reps} repetitions of 200 requests each, after 50 uncounted. "
            "Instructions per request, and the no-migration path against the code before the "
            "migration existed: `python -m bench.key_migration` (callgrind).",
        ],
    )
    timed = _timed(200, settings.reps)
    for scenario in SCENARIOS:
        table = Table(
            title=f"{scenario}, boto3 bound in process",
            series=[
                Series("plain", timed[scenario, "plain"], unit="µs/request"),
                Series("window", timed[scenario, "window"], unit="µs/request"),
            ],
            ours=["plain", "window"],
        )
        log(f"    {scenario}: " + ", ".join(f"{s.name}={s.median:,.0f} µs" for s in table.series))
        section.tables.append(table)
    return section


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
