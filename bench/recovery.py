"""Recovery points: what one mark costs against a plain first call, and what the feature costs
a call that marks nothing.

``python -m bench.recovery [REQUESTS]`` prints a Markdown note (for BENCHMARKS.md):

* time per request (median of 5 runs of REQUESTS) on the boto3 client bound in process to the
  engine: a first call (``guard.run``, claim and completion), the same with one
  ``recovery_point`` inside, and with three;
* with valgrind, instructions per request of the same, and of the plain first call built from
  the branch point's sources (``BASE``, a git revision: the code before recovery points), so
  the cost of the feature to calls that do not mark is counted too (:mod:`._callgrind`).

Run as ``python -m bench.recovery --child N REPS`` it is the counted program.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from . import _callgrind
from ._common import Section, Series, Settings, Table, guard_client_config, microseconds_per_call

BASE = os.environ.get("RECOVERY_BASE", "43c8696")
ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("first call", "first call, 1 mark", "first call, 3 marks")


def _guard(directory: str) -> Any:
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    engine = Engine(os.path.join(directory, "bench.db"), durability="normal")
    # Timeouts within the budget: calls are made in the calling thread (callgrind counts it).
    client = local_client(engine, config=guard_client_config())
    guard = Idempotency(IdempotencyConfig(table_name="bench-recovery"), client=client)
    guard.ensure_table()
    return guard


def _marks() -> Callable[[int], None]:
    """``marking(n)``: ``n`` recovery points (nothing on the branch point's sources)."""
    try:
        from firstwrite.idempotency import recovery_point
    except ImportError:
        return lambda n: None

    def marking(n: int) -> None:
        for step in range(n):
            recovery_point(f"step-{step}", "ref-0123456789")

    return marking


def _operation(guard: Any, scenario: str) -> Callable[[int], object]:
    payload = {"amount": 10, "currency": "EUR"}
    marking = _marks()
    n = {"first call": 0, "first call, 1 mark": 1, "first call, 3 marks": 3}[scenario]

    def work() -> dict[str, bool]:
        marking(n)
        return {"ok": True}

    return lambda i: guard.run(f"{scenario}-{i}", work, payload)


def _child(requests: int, reps: int, scenarios: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as directory:
        guard = _guard(directory)
        ops = {s: _operation(guard, s) for s in scenarios}
        _callgrind.count_named(ops, requests, reps)


def _timed(requests: int, reps: int = 5) -> dict[str, list[float]]:
    """Microseconds per request, one value per repetition; the scenarios interleaved run by
    run, so machine load falls on all alike."""
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as directory:
        guard = _guard(directory)
        ops = {s: _operation(guard, s) for s in SCENARIOS}
        return microseconds_per_call(ops, requests, reps)


def _counted(src: Path, requests: int, scenarios: list[str]) -> dict[str, float]:
    """Thousands of instructions per request, by scenario, of ``src``'s firstwrite."""
    args = ["--child", str(requests), "2", *scenarios]
    return cast(
        "dict[str, float]",
        _callgrind.least_per_piece("bench.recovery", args, per=requests, src=src),
    )


def main(requests: int) -> None:
    timed = {k: statistics.median(v) for k, v in _timed(requests).items()}
    plain = timed["first call"]
    print(f"Time per request, µs (median of 5 runs of {requests}, bound boto3 client):\n")
    print("| scenario | µs/request | vs first call |")
    print("|---|---|---|")
    for s in SCENARIOS:
        print(f"| {s} | {timed[s]:.0f} | {timed[s] / plain:.2f}x |")
    why = _callgrind.available()
    if why is not None:
        print(f"\nInstructions not counted: {why}")
        return
    counted = _counted(ROOT / "src", requests // 4, list(SCENARIOS))
    with tempfile.TemporaryDirectory(prefix="bench-recovery-base-") as scratch:
        base = _counted(
            _callgrind.sources_at(BASE, ROOT, Path(scratch)), requests // 4, ["first call"]
        )
    b, p = base["first call"], counted["first call"]
    print(f"\nThousands of instructions per request (callgrind; base = {BASE}):\n")
    print("| scenario | thousands of instructions | vs first call |")
    print("|---|---|---|")
    print(f"| first call, base (before recovery points) | {b:.1f} | {b / p:.3f}x |")
    for s in SCENARIOS:
        print(f"| {s} | {counted[s]:.1f} | {counted[s] / p:.3f}x |")
    print(f"\nThe feature's cost to a call that marks nothing: {(p - b) / b * 100:+.2f}%.")


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    """The time tables, for ``python -m bench`` (the instruction counts: run this module)."""
    section = Section(
        key="recovery",
        title="Recovery points: one mark against a plain first call (issue 41)",
        method=[
            "The engine in process (durability normal), through a boto3 client bound to it. "
            "**first call**: `guard.run` of a new key (claim, completion); **1 mark** / "
            "**3 marks**: the same with `recovery_point(step, reference)` called inside the "
            "work once / three times (each a fenced UpdateItem).",
            f"{settings.reps} repetitions of 200 requests each, after 50 uncounted, the three "
            "interleaved. Instructions per request, and the first call against the code "
            "before recovery points: `python -m bench.recovery` (callgrind).",
        ],
    )
    timed = _timed(200, settings.reps)
    table = Table(
        title="first call with and without marks, boto3 bound in process",
        series=[Series(s, timed[s], unit="µs/request") for s in SCENARIOS],
        ours=list(SCENARIOS),
    )
    log("    " + ", ".join(f"{s.name}={s.median:,.0f} µs" for s in table.series))
    section.tables.append(table)
    return section


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] or list(SCENARIOS))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
