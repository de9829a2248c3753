"""Issue 26: what the time budget's bookkeeping costs a first call, and what the default wait
for a live request costs a concurrent duplicate.

* **First call** on the boto3 client bound in process (``guard.run`` on a fresh key: claim and
  completion, two writes): the default budget (10 s: a deadline per call, the SDK retry hook
  consulted, the retry loop's checks) against ``budget=None`` (none of it). Target: the budget
  adds at most 2% (budgeted >= 0.98x unbudgeted, ops/s).
* **Concurrent duplicate**: a first request that takes ``WORK`` seconds in another thread, and a
  duplicate arriving just after it claimed: with the default ``in_progress_wait`` (1 s) the
  duplicate polls and gets the replay; with ``in_progress_wait=0`` it gets "in progress" at once
  and its client must come back after ``Retry-After`` (the default policy: about 1 s). Reported:
  the duplicate's time to its answer (ms) and DynamoDB calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ._common import Check, Section, Series, Settings, Table, Target, scratch_dir

BUDGETED, UNBUDGETED = "budget 10 s (default)", "budget=None"
WAITING, AT_ONCE = "in_progress_wait=1 (default)", "in_progress_wait=0"
TARGET = 0.98
WORK = 0.05  # seconds the first request of a concurrent pair takes


def _first_calls(guard: Any, seconds: float, start: int) -> tuple[float, int]:
    """Fresh keys through ``guard.run`` for ``seconds``: (calls per second, next key)."""
    i = start
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(8):
            guard.run(f"k{i}", _result)
            i += 1
        now = time.perf_counter()
        if now >= deadline:
            return (i - start) / (now - t0), i


def _result() -> dict[str, int]:
    return {"ok": 1}


def _duplicate(guard: Any, counter: Any, key: str) -> tuple[float, int, str]:
    """A first request taking WORK seconds, and its duplicate: (duplicate's ms to an answer,
    its DynamoDB calls, what it got)."""
    claimed = threading.Event()

    def first() -> None:
        claim = guard.claim(key)
        claimed.set()
        time.sleep(WORK)
        guard.complete(claim, {"done": key})

    worker = threading.Thread(target=first)
    worker.start()
    claimed.wait()
    counter.reset()
    t0 = time.perf_counter()
    try:
        got = "claim" if hasattr(guard.claim(key), "fencing_token") else "replay"
    except Exception as exc:  # InProgressError
        got = type(exc).__name__
    took = (time.perf_counter() - t0) * 1000
    calls = counter.total
    worker.join()
    return took, calls, got


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    from firstwrite.engine import Engine, local_client
    from firstwrite.idempotency import CallCounter, Idempotency, IdempotencyConfig

    section = Section(
        key="budget",
        title="Time budget and the wait for a live request (issue 26)",
        method=[
            "The engine in process, reached through a real boto3 client bound to it "
            "(`local_client`), one attempt per call in botocore.",
            f"**First call**: `guard.run(fresh key, fn)` for {settings.duration:g} s per "
            f"contender per repetition, {settings.reps} repetitions in rotating order: "
            f"**{BUDGETED}** against **{UNBUDGETED}**. Target: {BUDGETED} >= {TARGET:g}x.",
            f"**Concurrent duplicate**: a first request taking {WORK * 1000:.0f} ms in a "
            "thread; its duplicate's time to an answer and its DynamoDB calls, per repetition.",
        ],
    )
    with scratch_dir("budget-") as directory:
        engine = Engine(str(directory / "budget.db"))
        try:
            from botocore.config import Config

            client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
            base = IdempotencyConfig(table_name="bench-budget")
            Idempotency(base, client=client).ensure_table()
            guards = {
                BUDGETED: Idempotency(base, client=client),
                UNBUDGETED: Idempotency(base.with_(budget=None), client=client),
            }
            first = Table(
                title="first call (claim + completion), bound client",
                series=[Series(BUDGETED), Series(UNBUDGETED)],
                ours=[BUDGETED, UNBUDGETED],
                targets=[Target(BUDGETED, UNBUDGETED, minimum=TARGET)],
            )
            key = 0
            for name in guards:  # warm-up
                _, key = _first_calls(guards[name], settings.warmup, key)
            order = list(guards)
            for rep in range(settings.reps):
                k = rep % len(order)
                for name in order[k:] + order[:k]:
                    rate, key = _first_calls(guards[name], settings.duration, key)
                    series = first.get(name)
                    assert series is not None
                    series.values.append(rate)
                log(
                    f"    rep {rep + 1}: "
                    + ", ".join(f"{s.name}={s.values[-1]:,.0f}/s" for s in first.series)
                )
            section.tables.append(first)

            waits = {
                WAITING: Idempotency(base, client=client),
                AT_ONCE: Idempotency(base.with_(in_progress_wait=0), client=client),
            }
            duplicate = Table(
                title=f"concurrent duplicate of a {WORK * 1000:.0f} ms request",
                series=[Series(WAITING, unit="ms"), Series(AT_ONCE, unit="ms")],
                ours=[WAITING, AT_ONCE],
            )
            calls: dict[str, list[int]] = {WAITING: [], AT_ONCE: []}
            answers: dict[str, set[str]] = {WAITING: set(), AT_ONCE: set()}
            with CallCounter(client) as counter:
                for rep in range(settings.reps):
                    for name, guard in waits.items():
                        took, n, got = _duplicate(guard, counter, f"dup-{name}-{rep}")
                        series = duplicate.get(name)
                        assert series is not None
                        series.values.append(took)
                        calls[name].append(n)
                        answers[name].add(got)
            duplicate.extra["DynamoDB calls (median)"] = {
                name: str(sorted(v)[len(v) // 2]) for name, v in calls.items()
            }
            duplicate.extra["answer"] = {name: ", ".join(sorted(a)) for name, a in answers.items()}
            duplicate.checks.append(
                Check(
                    "the default wait replays a request that finishes within it",
                    ", ".join(sorted(answers[WAITING])),
                    "replay",
                    answers[WAITING] == {"replay"},
                )
            )
            duplicate.notes.append(
                f"{AT_ONCE} answers at once, but its client then waits `Retry-After` (about 1 s "
                "by the default policy) and sends the request again: the default wait trades "
                "a few consistent reads for that round trip."
            )
            section.tables.append(duplicate)
        finally:
            engine.close()
    return section
