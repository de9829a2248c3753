"""Smoke test of bench/events.py: a handful of iterations, the report's shape (not timings):
per-record tables for both deliveries with Powertools and the bound, the same in instructions
with each library's calls alone (where valgrind is installed), and the pollers' tables."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level package beside `src/`, not installed
    sys.path.insert(0, str(ROOT))

from bench._calls import calls_alone  # noqa: E402

from bench import _callgrind, _common, events, report  # noqa: E402
from tools import need_tools, tools_required  # noqa: E402

pytestmark = pytest.mark.xdist_group("bench")

TINY = _common.Settings(
    reps=2, duration=0.02, http_duration=1.0, http_reps=1, warmup=0.01, quick=True
)


def test_events_bench_reports_per_record_ratios_and_poller_rates() -> None:
    # Without valgrind or RabbitMQ the section says why (checked below); CI must measure both.
    if tools_required():
        need_tools(["valgrind", "rabbitmq-server"])
    section = events.run(TINY, lambda _m: None)
    assert section.error is None
    first, replay = section.tables[:2]
    pollers, rabbitmq = section.tables[-2:]
    counted = section.tables[2:-2]
    if _callgrind.available() is None:  # the same scenarios in instructions, calls alone too
        assert [t.title for t in counted] == [
            f"SQS batch of 10, {s}: instructions per record (callgrind)" for s in events.SCENARIOS
        ]
        for table in counted:
            assert {s.name for s in table.series} == {
                events.OURS,
                events.POWERTOOLS,
                events.BOUND,
                calls_alone(events.OURS),
                calls_alone(events.POWERTOOLS),
            }
            assert all(s.unit == "k instructions/record" and s.values for s in table.series)
            (target,) = table.targets
            assert target.bound == calls_alone(events.OURS) and target.why
            assert table.notes and "instructions in its calls" in table.notes[0]
    else:
        assert counted == [] and "not measured" in section.method[-1]
    for table, scenario in ((first, "first delivery"), (replay, "redelivery (replay)")):
        assert scenario in table.title
        names = {s.name for s in table.series}
        assert names == {events.OURS, events.POWERTOOLS, events.BOUND}, table.skipped
        for series in table.series:
            assert series.unit == "µs/record" and len(series.values) == TINY.reps
            assert all(v > 0 and math.isfinite(v) for v in series.values)
        (target,) = table.targets
        assert target.maximum == events.TIME_TARGET and target.bound == events.BOUND
        assert table.ratio(events.OURS, events.POWERTOOLS) > 0
    assert {s.name for s in pollers.series} == {
        "SQSPoller (boto3)",
        "AsyncSQSPoller (aiobotocore)",
    }, pollers.skipped
    assert all(len(s.values) == TINY.reps and min(s.values) > 0 for s in pollers.series)
    # RabbitMQ is measured where Debian's broker is installed (CI installs it), else a row says why.
    if rabbitmq.series:
        (consumer,) = rabbitmq.series
        assert consumer.name == "RabbitMQConsumer (pika)" and min(consumer.values) > 0
    else:
        assert rabbitmq.skipped == {"RabbitMQConsumer": "rabbitmq-server is not installed"}
    text = "\n".join(report.render_table(first))
    assert first.title in text and events.POWERTOOLS in text
