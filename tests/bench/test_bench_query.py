"""Smoke test of the Query/Scan benchmark (bench/engine_query.py) on a small table and our
server only: it loads, checks and measures every workload, and reads the index target. Not a
timing assertion: numbers are only checked to be positive."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level package beside `src/`, not installed
    sys.path.insert(0, str(ROOT))

from bench import _common, engine_query, report  # noqa: E402

pytestmark = pytest.mark.xdist_group("bench")


def test_query_benchmark_runs_every_workload() -> None:
    settings = _common.Settings(
        reps=1,
        duration=0.05,
        http_duration=0.3,
        http_reps=1,
        warmup=0.01,
        quick=True,
        http_servers=("firstwrite",),
    )
    section = engine_query.run(settings, lambda _message: None, sizes=(400,))
    assert section.error is None, section.error
    titles = [t.title for t in section.tables]
    assert titles == [
        "Query table, 400 items, over HTTP",
        "Query index, 400 items, over HTTP",
        "Scan table, 400 items, over HTTP",
        "Scan index, 400 items, over HTTP",
        "firstwrite in process, 400 items: index vs table",
    ]
    for table in section.tables:
        for series in table.series:
            assert series.values and all(v > 0 and math.isfinite(v) for v in series.values)
    target = section.tables[-1].targets[0]
    assert section.tables[-1].ratio(target.ours, target.peer) > 0
    assert "index vs table" in "\n".join(report.render_table(section.tables[-1]))
