"""Issue 16: durability ``full`` under 16 concurrent HTTP writers vs ``normal``, and vs the
single-writer fsync-per-insert floor of raw SQLite, measured in the same run.

``full`` fsyncs the WAL at every commit; group commit (storage/database.py) should let 16
concurrent writers share each fsync, so that ``full`` costs little more than ``normal`` and
beats one writer paying an fsync per insert.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from . import _workload as w
from ._common import Section, Series, Settings, Table, Target, scratch_dir
from .engine_direct import _FLOOR_INSERT, _FLOOR_SCHEMA
from .engine_http import CONNECTIONS, Server, ensure_wrk, firstwrite_server, run_wrk, started

FULL, NORMAL, FLOOR = "firstwrite (full)", "firstwrite (normal)", "sqlite fsync floor"
TARGET_NORMAL = 0.8  # full >= 0.8x normal
TARGET_FLOOR = 1.0  # full above one writer's fsync per insert


def _server(directory: Path, durability: str) -> Server:
    stem = f"durability-{durability}"
    options = ("--durability", durability)
    return firstwrite_server(f"firstwrite ({durability})", directory, stem, *options)


def fsync_floor(path: Path, seconds: float, start: int) -> tuple[float, int]:
    """One writer, one ``INSERT`` per transaction, WAL + ``synchronous=FULL`` (what the engine's
    ``full`` mode asks of SQLite): inserts per second, and the next unused key number."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(_FLOOR_SCHEMA)
        body = b"\x83" + w.PAYLOAD.encode()
        i = start
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while True:
            for _ in range(16):
                written = conn.execute(_FLOOR_INSERT, (w.key(i).encode(), b"", body)).rowcount
                if written != 1:
                    raise AssertionError(f"the fsync floor wrote {written} rows")
                i += 1
            now = time.perf_counter()
            if now >= deadline:
                return (i - start) / (now - t0), i
    finally:
        conn.close()


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="durability",
        title="Durability full vs normal, 16 concurrent HTTP writers (issue 16)",
        method=[
            f"`wrk -t1 -c{CONNECTIONS}` with `bench/wrk/put_fresh.lua` (a fresh key per "
            "conditional `PutItem`, every put writes) against `python -m firstwrite.cli engine "
            "serve --durability normal|full`, each on its own database file; every run is "
            "checked as in the HTTP benchmark (no errors, no non-2xx).",
            "**firstwrite (full)**: fsync of the WAL at every commit (`synchronous=FULL`), "
            "concurrent writers group-committed (storage/database.py). **firstwrite (normal)**: "
            "WAL without fsync per commit.",
            f"**{FLOOR}**: Python `sqlite3` in the benchmark process, one writer, one "
            "`INSERT ... ON CONFLICT DO NOTHING` per transaction, WAL + `synchronous=FULL`: "
            "what one writer pays for an fsync per insert, with no server, JSON or validation.",
            f"Targets: {FULL} >= {TARGET_NORMAL:g}x {NORMAL}, and >= {TARGET_FLOOR:g}x the "
            f"{FLOOR}. {settings.http_reps} repetitions of {int(settings.http_duration)} s per "
            "contender, in rotating order (servers idle while not measured); the ratio is the "
            "median of per-repetition ratios.",
        ],
    )
    wrk, why = ensure_wrk(log)
    if wrk is None:
        section.error = why
        return section
    with scratch_dir("durability-") as directory:
        servers = [_server(directory, "normal"), _server(directory, "full")]
        skipped: dict[str, str] = {}
        table = Table(
            title=f"conditional puts, fresh keys, {CONNECTIONS} connections",
            series=[Series(NORMAL), Series(FULL), Series(FLOOR)],
            ours=[FULL, NORMAL],
            targets=[
                Target(FULL, NORMAL, minimum=TARGET_NORMAL),
                Target(FULL, FLOOR, minimum=TARGET_FLOOR),
            ],
            skipped=skipped,
        )
        p99: dict[str, list[float]] = {NORMAL: [], FULL: []}
        with started(servers, Server.prepare, skipped, log) as live:
            by_name = {s.name: s for s in live}
            contenders = [NORMAL, FULL, FLOOR]
            floor_key = 0
            for rep in range(-1, settings.http_reps):  # rep -1: warm-up, not recorded
                k = max(rep, 0) % len(contenders)
                for name in contenders[k:] + contenders[:k]:
                    seconds = 1 if rep < 0 else int(settings.http_duration)
                    if name == FLOOR:
                        rate, floor_key = fsync_floor(directory / "floor.db", seconds, floor_key)
                    elif name in by_name:
                        result = run_wrk(
                            wrk, by_name[name], "success", seconds, f"d{rep}-{time.time_ns()}"
                        )
                        rate = result.rate
                        if rep >= 0:
                            p99[name].append(result.p99_ms)
                    else:
                        continue
                    if rep >= 0:
                        series = table.get(name)
                        assert series is not None
                        series.values.append(rate)
                if rep >= 0:
                    log(
                        f"    rep {rep + 1}: "
                        + ", ".join(
                            f"{s.name}={s.values[-1]:,.0f}" for s in table.series if s.values
                        )
                    )
        table.series = [s for s in table.series if s.values]
        table.extra["p99 latency (ms, median)"] = {
            name: f"{sorted(v)[len(v) // 2]:.1f}" for name, v in p99.items() if v
        }
        section.tables.append(table)
    return section
