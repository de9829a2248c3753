"""Smoke test of the middleware benchmark: every contender answers correctly (each op checks its
status, body and replay header) and the DynamoDB call counts are what the target needs. Not a
timing assertion."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level package beside `src/`, not installed
    sys.path.insert(0, str(ROOT))

from bench import _common, middleware  # noqa: E402

pytestmark = pytest.mark.xdist_group("bench")

TINY = _common.Settings(
    reps=2, duration=0.02, http_duration=1.0, http_reps=1, warmup=0.01, quick=True
)


def test_the_middleware_benchmark_runs_and_counts_calls() -> None:
    section = middleware.run(TINY, lambda message: None)
    assert section.error is None, section.error
    titles = [t.title for t in section.tables]
    assert titles == [
        f"{scenario}, {client}: overhead over the bare app"
        for client in ("boto3 bound in process", "DirectClient")
        for scenario in middleware.SCENARIOS
    ]
    for table in section.tables:
        direct = "DirectClient" in table.title
        ours = [middleware.OURS] if direct else [middleware.OURS_ASYNC, middleware.OURS]
        for name in ours:
            assert table.get(name) is not None, table.skipped
        if direct:  # the async guard needs an async client
            assert middleware.OURS_ASYNC in table.skipped
        assert all(len(s.values) == TINY.reps for s in table.series)
        calls = table.extra["DynamoDB calls/request"]
        first = table.title.startswith("first call")
        for name in ours:
            assert calls[name] == ("2.00" if first else "1.00")
            bound = middleware.BOUNDS[name]
            assert calls[bound] == calls[name]  # the bound makes the same calls
        assert calls[middleware.POWERTOOLS] == ("2.00" if first else "1.00")
        if middleware.IDEMKIT in calls:  # on the boto3 client only: its replay reads too
            assert calls[middleware.IDEMKIT] == "2.00"
        assert all(check.passed for check in table.checks if check.passed is not None)
        assert [(t.ours, t.bound) for t in table.targets] == [
            (name, middleware.BOUNDS[name]) for name in ours
        ]
