"""The per-call cost of the clock-skew estimate (issue 41): a guard with it on against one with it off.

``python -m bench.clock_skew [REQUESTS]`` prints a Markdown note (for BENCHMARKS.md):

* time per request (median of 5 runs of REQUESTS) on the boto3 client bound in process to the
  engine, whose answers carry the engine's ``Date`` as DynamoDB's do, for a first call and a
  duplicate: a guard with ``ClockSkewPolicy(enabled=False)`` and one with the estimate on (the
  default), both on the engine's clock;
* with valgrind, instructions per request of the same four (:mod:`._callgrind`).

Run as ``python -m bench.clock_skew --child N REPS`` it is the counted program.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from typing import Any, cast

from . import _callgrind
from ._common import Section, Series, Settings, Table, microseconds_per_call

SCENARIOS = ("first call", "duplicate")
GUARDS = ("off", "on")


def _guards(directory: str) -> dict[str, Any]:
    from botocore.config import Config

    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client
    from firstwrite.idempotency import ClockSkewPolicy, Idempotency, IdempotencyConfig

    engine = Engine(os.path.join(directory, "bench.db"), durability="normal")
    # Timeouts within the budget: calls are made in the calling thread (callgrind counts it),
    # not handed to the abandonable-call pool.
    timeouts = Config(connect_timeout=1, read_timeout=2)
    client = local_client(engine, config=timeouts)  # its answers carry the engine's Date
    config = IdempotencyConfig(table_name="bench-skew")
    Idempotency(config, client=client).ensure_table()
    off = config.with_(clock_skew=ClockSkewPolicy(enabled=False))
    return {
        "off": Idempotency(off, client=client, clock=engine.clock.now),
        "on": Idempotency(config, client=client, clock=engine.clock.now),
    }


def _operation(guard: Any, scenario: str, name: str) -> Callable[[int], object]:
    payload = {"amount": 10, "currency": "EUR"}
    if scenario == "first call":
        return lambda i: guard.run(f"{name}-{i}", lambda: {"ok": True}, payload)
    guard.run(f"{name}-dup", lambda: {"ok": True}, payload)
    return lambda i: guard.run(f"{name}-dup", lambda: {"ok": False}, payload)


def _ops(directory: str) -> dict[tuple[str, str], Callable[[int], object]]:
    guards = _guards(directory)
    return {(s, n): _operation(g, s, n) for n, g in guards.items() for s in SCENARIOS}


def _child(requests: int, reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-skew-") as directory:
        _callgrind.count_named(_ops(directory), requests, reps)


def _timed(requests: int, reps: int = 5) -> dict[tuple[str, str], list[float]]:
    """Microseconds per request, one value per repetition (guards interleaved per rep)."""
    with tempfile.TemporaryDirectory(prefix="bench-skew-") as directory:
        return microseconds_per_call(_ops(directory), requests, reps)


def _counted(requests: int) -> dict[tuple[str, str], float]:
    """Thousands of instructions per request, by (scenario, guard)."""
    args = ["--child", str(requests), "2"]
    return cast(
        "dict[tuple[str, str], float]",
        _callgrind.least_per_piece("bench.clock_skew", args, per=requests),
    )


def main(requests: int) -> None:
    timed = {k: statistics.median(v) for k, v in _timed(requests).items()}
    print(f"Time per request, µs (median of 5 runs of {requests}, bound boto3 client):\n")
    print("| scenario | estimate off | estimate on | ratio |")
    print("|---|---|---|---|")
    for s in SCENARIOS:
        off, on = timed[s, "off"], timed[s, "on"]
        print(f"| {s} | {off:.0f} | {on:.0f} | {on / off:.3f}x |")
    why = _callgrind.available()
    if why is not None:
        print(f"\nInstructions not counted: {why}")
        return
    counted = _counted(requests // 4)
    print("\nThousands of instructions per request (callgrind):\n")
    print("| scenario | estimate off | estimate on | change |")
    print("|---|---|---|---|")
    for s in SCENARIOS:
        off, on = counted[s, "off"], counted[s, "on"]
        print(f"| {s} | {off:.1f} | {on:.1f} | {(on - off) / off * 100:+.2f}% |")


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    """The time tables, for ``python -m bench`` (the instruction counts: run this module)."""
    section = Section(
        key="clock_skew",
        title="The clock-skew estimate's per-call cost (issue 41)",
        method=[
            "The engine in process (durability normal), through a boto3 client bound to it (its "
            "answers carry the engine's `Date`, as DynamoDB's do). **off**: "
            "`ClockSkewPolicy(enabled=False)`; **on**: the default estimate; both guards on the "
            "engine's clock.",
            f"{settings.reps} repetitions of 200 requests each, after 50 uncounted. "
            "Instructions per request: `python -m bench.clock_skew` (callgrind).",
        ],
    )
    timed = _timed(200, settings.reps)
    for scenario in SCENARIOS:
        table = Table(
            title=f"{scenario}, boto3 bound in process",
            series=[
                Series("off", timed[scenario, "off"], unit="µs/request"),
                Series("on", timed[scenario, "on"], unit="µs/request"),
            ],
            ours=["off", "on"],
        )
        log(f"    {scenario}: " + ", ".join(f"{s.name}={s.median:,.0f} µs" for s in table.series))
        section.tables.append(table)
    return section


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
