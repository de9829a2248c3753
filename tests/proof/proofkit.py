"""What the proof suites share: their size (short in ``make test``, long on demand), their
report, and measurements of a server process.

``FIRSTWRITE_PROOF=long`` selects the long form (the ``make proof-*`` targets set it); anything
else runs the short form. Each suite calls :func:`report` with its numbers: they are listed at
the end of the run (by :func:`proof_summary`, which each suite imports; not under xdist) and, when
``FIRSTWRITE_PROOF_REPORT`` names a file, appended to it as one JSON line each, which is where
docs/reliability.md's figures come from.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

LONG = os.environ.get("FIRSTWRITE_PROOF", "") == "long"


def scale(short: T, long: T) -> T:
    """``long`` in the long form, ``short`` otherwise."""
    return long if LONG else short


REPORTS: list[str] = []  # this process's report lines, for the end-of-run summary


def report(suite: str, **numbers: Any) -> None:
    line = {"suite": suite, "form": "long" if LONG else "short", "at": _now(), **numbers}
    text = json.dumps(line, sort_keys=True, default=str)
    REPORTS.append(text)
    print(f"\nPROOF {text}", file=sys.stderr)
    target = os.environ.get("FIRSTWRITE_PROOF_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(text + "\n")


def machine() -> dict[str, Any]:
    """The facts docs/reliability.md states beside its figures."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "kernel": platform.release(),
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by the nearest-rank method; 0.0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary_ms(samples: Sequence[float]) -> dict[str, float]:
    """p50/p99/max of latencies given in seconds, in milliseconds (3 decimals)."""
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(samples) * 1e3, 3),
        "p99_ms": round(percentile(samples, 99) * 1e3, 3),
        "max_ms": round(max(samples) * 1e3, 3),
    }


def rss_kib(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) of process ``pid`` in KiB, from /proc (VmRSS, VmHWM)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def family(pid: int) -> list[int]:
    """``pid`` and every process descended from it (a server and its workers)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                continue
    return found


def family_rss_kib(pid: int) -> tuple[int, int]:
    """(current RSS, sum of each process's peak RSS) of ``pid``'s family, in KiB."""
    current = peak = 0
    for member in family(pid):
        try:
            rss, hwm = rss_kib(member)
        except (OSError, KeyError):
            continue  # gone meanwhile
        current, peak = current + rss, peak + hwm
    return current, peak


@dataclass
class Windowed:
    """What :func:`in_windows` saw: the attack windows (monotonic ns), the victim's samples,
    what the attacker returned, and the server family's sampled peak RSS (KiB)."""

    windows: list[tuple[int, int]]
    samples: list[tuple[int, float, int]]
    attack: Any
    peak_kib: int


RSS_SLACK_KIB = 4096  # the allocator's arenas


def rss_came_back(baseline_kib: int, after_kib: int) -> bool:
    """Whether a server's RSS after an attack is within 10% of its baseline (plus
    :data:`RSS_SLACK_KIB`)."""
    return after_kib <= baseline_kib * 1.1 + RSS_SLACK_KIB


LATENCY_RATIO = 2.0  # the long form: an attacked p99 within 2x of its baseline
# The short form (in `make test`, two windows of each kind, beside other tests) has a few
# hundred samples a kind, so its p99 is one of the slowest few calls: it allows 4x, still a
# multiple of the run's own baseline and never looser than 4x the quiet p99.
SHORT_LATENCY_RATIO = 4.0


def baseline_p99(quiet_p99: float, peer_quiet_p99: float, peer_attacked_p99: float) -> float:
    """What another client's p99 would be under an attack that cost the attacked server
    nothing beyond what it costs the machine: its quiet p99 times the machine ratio (a peer
    server nobody attacks, its attacked p99 over its quiet one, at least 1), or the peer's
    attacked p99 itself if higher (measured at the same instants, so a stall of the machine
    in the attack windows shows in both; a few hundred calls make a p99 one of the slowest
    few). Never below the quiet p99."""
    machine = max(1.0, peer_attacked_p99 / peer_quiet_p99) if peer_quiet_p99 else 1.0
    return max(quiet_p99 * machine, peer_attacked_p99)


def latency_bound(baseline: float) -> float:
    """The bound on another client's p99 under an attack: 2x its :func:`baseline_p99` in the
    long form, 4x in the short (so never looser than 4x its quiet p99 by itself)."""
    return (LATENCY_RATIO if LONG else SHORT_LATENCY_RATIO) * baseline


SETTLE_NS = 500_000_000  # what a server takes to free what an attack request made it decode


def quiet_and_attacked(
    run: Windowed, busy: Sequence[tuple[int, int]] = (), settle_ns: int = SETTLE_NS
) -> tuple[list[float], list[float]]:
    """The victim's latencies of ``run``, split: those of calls sent in a quiet window, and
    those sent in an attack window or, given ``busy`` (when each attack request went on,
    monotonic ns), while one was still going on (and for ``settle_ns`` after it)."""

    def attacked(at: int, latency: float) -> bool:
        done = at + int(latency * 1e9)
        return any(a <= at < b for a, b in run.windows) or any(
            a <= done and at <= b + settle_ns for a, b in busy
        )

    quiet: list[float] = []
    loud: list[float] = []
    for at, latency, _status in run.samples:
        (loud if attacked(at, latency) else quiet).append(latency)
    return quiet, loud


def in_windows(
    pid: int,
    window_s: float,
    pairs: int,
    victim: Callable[[int, int], list[tuple[int, float, int]]],
    attacker: Callable[[list[tuple[int, int]]], Any],
) -> Windowed:
    """Quiet and attack windows, alternating, ``pairs`` of each of ``window_s``: ``victim(start,
    end)`` and ``attacker(windows)`` (picklable, e.g. partials of module functions), each in a
    spawned process of its own, while ``pid``'s family RSS is sampled."""
    from attack import warm_up

    peak = [family_rss_kib(pid)[0]]
    sampling = threading.Event()

    def sample_rss() -> None:
        while not sampling.wait(0.05):
            peak[0] = max(peak[0], family_rss_kib(pid)[0])

    sampler = threading.Thread(target=sample_rss)
    sampler.start()
    window = int(window_s * 1e9)
    try:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            # Both processes up and imported before the first window is set.
            for _ in range(5):
                if len({f.result() for f in [pool.submit(warm_up) for _ in range(2)]}) == 2:
                    break
            start = time.monotonic_ns() + 500_000_000
            # quiet, attack, quiet, attack, ...: both kinds spread over the same stretch of time.
            windows = [
                (start + (2 * i + 1) * window, start + (2 * i + 2) * window) for i in range(pairs)
            ]
            end = start + 2 * pairs * window
            victim_run = pool.submit(victim, start, end)
            attack_run = pool.submit(attacker, windows)
            samples = victim_run.result(timeout=(end - start) / 1e9 + 120)
            attack = attack_run.result(timeout=300)
    finally:
        sampling.set()
        sampler.join()
    return Windowed(windows, samples, attack, peak[0])


class _Summary:
    """A plugin listing this run's report lines after the test results."""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if REPORTS:
            terminalreporter.section(f"proof results ({'long' if LONG else 'short'} form)")
            terminalreporter.write_line(f"machine: {json.dumps(machine())}")
            for line in REPORTS:
                terminalreporter.write_line(line)


@pytest.fixture(scope="session", autouse=True)
def proof_summary(request: pytest.FixtureRequest) -> None:
    """Import this into a suite's module to have its numbers listed at the end of the run.

    (A plugin registered here rather than a conftest.py in tests/proof: that would shadow
    tests/conftest.py, whose helpers the suites import as ``conftest``.)"""
    manager = request.config.pluginmanager
    if not manager.has_plugin("firstwrite-proof-summary"):
        manager.register(_Summary(), "firstwrite-proof-summary")
