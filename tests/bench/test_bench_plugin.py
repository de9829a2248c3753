"""Smoke test of bench/plugin.py: a handful of tests per contender, well-formed results, the
test body's own checks passing under every contender. Not a timing assertion."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level package beside `src/`, not installed
    sys.path.insert(0, str(ROOT))

from bench import _common, plugin  # noqa: E402

pytestmark = pytest.mark.xdist_group("bench")

TINY = _common.Settings(
    reps=1, duration=0.01, http_duration=1.0, http_reps=1, warmup=0.0, quick=True
)


def test_plugin_bench_runs_every_contender(monkeypatch: pytest.MonkeyPatch) -> None:
    # A smaller test body (each contender runs at least 32 of them): the machinery is the point.
    for name, value in (("PUTS", 20), ("DUPLICATES", 2), ("QUERIES", 4), ("PARTITIONS", 2)):
        monkeypatch.setattr(plugin, name, value)
    monkeypatch.setattr(plugin, "EXPECTED_SEEN", 4 * 18 // 2)
    section = plugin.run(TINY, lambda _message: None)
    assert section.error is None, section.error
    [table] = section.tables
    assert table.skipped == {}
    assert {s.name for s in table.series} == {plugin.DEFAULT, plugin.FILE, plugin.MOTO}
    for series in table.series:
        assert series.unit == plugin.UNIT
        assert len(series.values) == 1 and series.values[0] > 0 and math.isfinite(series.values[0])
    assert table.ratio(plugin.DEFAULT, plugin.MOTO) > 0
    assert set(table.extra["ms per test"]) == {plugin.DEFAULT, plugin.FILE, plugin.MOTO}


def test_the_test_body_checks_its_answers() -> None:
    from firstwrite.testing import mock_dynamodb

    with mock_dynamodb():
        assert plugin.one_test() == plugin.EXPECTED_SEEN
    with pytest.raises(AssertionError, match="queries saw 0 items"):
        plugin.check(0)
