"""Smoke test of the benchmark suite: every benchmark runs a handful of iterations and returns
well-formed results. Not a timing assertion: numbers are only checked to be positive."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level package beside `src/`, not installed
    sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    __main__ as bench_main,
)
from bench import (  # noqa: E402
    _common,
    charts,
    durability,
    engine_bound,
    engine_direct,
    engine_http,
    engine_partiql,
    idempotency,
    overhead,
    report,
    scale,
)

pytestmark = pytest.mark.xdist_group("bench")

TINY = _common.Settings(
    reps=2, duration=0.02, http_duration=1.0, http_reps=1, warmup=0.01, quick=True
)


def _log(_message: str) -> None:
    pass


def _check_section(section: _common.Section, ours: set[str]) -> None:
    assert section.error is None, section.error
    assert section.tables
    for table in section.tables:
        measured = {s.name for s in table.series}
        # Our contenders must run (a skip of ours is a broken benchmark, not a missing peer).
        assert ours & set(table.ours) <= measured, table.skipped
        for series in table.series:
            assert len(series.values) == TINY.reps, series
            assert all(v > 0 and math.isfinite(v) for v in series.values), series
        for target in table.targets:
            if table.get(target.ours) and table.get(target.peer):
                assert table.ratio(target.ours, target.peer) > 0
    text = report.render_table(section.tables[0])
    assert section.tables[0].title in "\n".join(text)


def test_direct() -> None:
    section = engine_direct.run(TINY, _log)
    _check_section(section, {"direct"})
    assert {s.name for s in section.tables[0].series} >= {
        engine_direct.SQLITE_FLOOR,
        engine_direct.BYTES_FLOOR,
        "direct",
    }
    assert section.tables[0].targets[0].peer == engine_direct.SQLITE_FLOOR
    failing = section.tables[1]
    assert failing.get(engine_direct.CONFLICT_FLOOR) is not None
    target = failing.targets[0]
    assert (target.peer, target.minimum) == (
        engine_direct.CONFLICT_FLOOR,
        engine_direct.CONFLICT_TARGET,
    )
    # The engine called with no client bounds both targets, measured in the same run.
    for table in section.tables:
        assert table.targets[0].bound == engine_direct.ENGINE_ALONE
        assert table.get(engine_direct.ENGINE_ALONE) is not None


def test_bound() -> None:
    section = engine_bound.run(TINY, _log)
    _check_section(section, {engine_bound.FULL})
    names = {s.name for s in section.tables[0].series}
    assert names >= {"botocore floor", engine_bound.FULL, engine_bound.NAMES["bind"]}
    assert names >= {engine_bound.QUICK_FLOOR, "local_client"}
    local = next(t for t in section.tables[0].targets if t.ours == "local_client")
    assert (local.minimum, local.bound) == (engine_bound.LOCAL_TARGET, engine_bound.QUICK_FLOOR)
    # The floor plus the engine's own work (no binding) bounds the full-stack target.
    for table in section.tables:
        full = next(t for t in table.targets if t.ours == engine_bound.FULL)
        assert full.bound == engine_bound.ENGINE_FLOOR
        assert table.get(engine_bound.ENGINE_FLOOR) is not None


def test_partiql() -> None:
    section = engine_partiql.run(TINY, _log)
    _check_section(section, {engine_partiql.SELECT})
    table = section.tables[0]
    assert {s.name for s in table.series} == {
        engine_partiql.GET,
        engine_partiql.SELECT,
        engine_partiql.FLOOR,
    }
    (target,) = table.targets
    assert (target.ours, target.peer, target.bound) == (
        engine_partiql.SELECT,
        engine_partiql.GET,
        engine_partiql.FLOOR,
    )
    assert target.minimum == pytest.approx(1 / 1.5)
    assert "partiql" in bench_main.BENCHMARKS


def test_overhead() -> None:
    section = overhead.run(TINY, _log)
    _check_section(section, set())
    assert section.tables[0].get(overhead.BASELINE) is not None


@pytest.mark.needs_tool("valgrind")  # its instruction tables are part of the section
def test_idempotency() -> None:
    section = idempotency.run(TINY, _log)
    _check_section(section, {idempotency.OURS})
    titles = [t.title for t in section.tables]
    assert titles == [
        *(f"{scenario}, boto3 bound in process" for scenario in idempotency.SCENARIOS),
        *(
            f"{scenario}, boto3 bound in process, instructions (callgrind)"
            for scenario in idempotency.SCENARIOS
        ),
        *(f"{scenario}, DirectClient" for scenario in idempotency.SCENARIOS),
    ]
    counted = [t for t in section.tables if t.title.endswith("(callgrind)")]
    section.tables = [t for t in section.tables if t not in counted]
    for table in counted:
        names = {s.name for s in table.series}
        assert names == {
            idempotency.OURS,
            idempotency.POWERTOOLS,
            idempotency.calls_alone(idempotency.OURS),
            idempotency.calls_alone(idempotency.POWERTOOLS),
            idempotency.least_work(idempotency.OURS),
        }
        # a replay of firstwrite's calls does less than firstwrite, and more than nothing
        ours, alone = (
            table.get(idempotency.OURS),
            table.get(idempotency.calls_alone(idempotency.OURS)),
        )
        assert ours and alone and ours.median > alone.median > 100  # k instructions
        assert table.targets[0].bound == idempotency.least_work(idempotency.OURS)
        assert any(n.startswith("Own work beside the calls") for n in table.notes)
    for table in section.tables:
        calls = table.extra["DynamoDB calls/request"]
        assert idempotency.POWERTOOLS in calls
        # Every library makes at least one DynamoDB call per request (local caches are off).
        assert all(float(v) >= 1.0 for v in calls.values()), calls
        # Each library's calls replayed alone make exactly as many calls as the library.
        for lib in (idempotency.OURS, idempotency.POWERTOOLS):
            assert calls[idempotency.calls_alone(lib)] == calls[lib], calls
        # The bound: firstwrite's calls plus the least work, making exactly firstwrite's calls.
        bound = idempotency.least_work(idempotency.OURS)
        assert table.targets[0].bound == bound
        assert calls[bound] == calls[idempotency.OURS], calls
        assert table.get(bound) is not None
        # firstwrite's own work alone is measured, and reported in the notes (it is no library)
        assert table.get(idempotency.own_work_alone(idempotency.OURS)) is None
        assert any(n.startswith(idempotency.own_work_alone(idempotency.OURS)) for n in table.notes)


def _table(ours: list[float], peer: list[float], bound: list[float]) -> _common.Table:
    return _common.Table(
        title="t",
        series=[
            _common.Series("ours", ours),
            _common.Series("peer", peer),
            _common.Series("bound", bound),
        ],
        ours=["ours"],
        targets=[_common.Target("ours", "peer", minimum=0.5, bound="bound")],
    )


def test_report_names_an_unreachable_target_only_when_its_bound_misses_too() -> None:
    reachable = "\n".join(report.render_table(_table([1.0, 1.0], [4.0, 4.0], [3.0, 3.0])))
    assert "| ours / peer | 0.25x | >= 0.5x | **MISSED** |" in reachable
    assert "unreachable" not in reachable
    beyond = "\n".join(report.render_table(_table([1.0, 1.0], [4.0, 4.0], [1.6, 1.6])))
    assert "**MISSED** (unreachable: bound misses it too, 0.400x)" in beyond
    met = "\n".join(report.render_table(_table([3.0, 3.0], [4.0, 4.0], [1.6, 1.6])))
    assert "| ours / peer | 0.75x | >= 0.5x | PASS |" in met
    # The bound's own ratio to the peer is shown, like ours.
    bound_row = next(line for line in beyond.splitlines() if line.startswith("| bound |"))
    assert "| 0.40x |" in bound_row


@pytest.mark.needs_tool("wrk")
def test_http_one_server() -> None:
    settings = _common.Settings(
        reps=1,
        duration=0.02,
        http_duration=1.0,
        http_reps=1,
        warmup=0.01,
        quick=True,
        http_servers=("firstwrite (normal)",),
    )
    section = engine_http.run(settings, _log)
    assert section.error is None, section.error
    for table in section.tables:
        series = table.get("firstwrite (normal)")
        assert series is not None, table.skipped
        assert series.values and series.values[0] > 0


@pytest.mark.needs_tool("wrk")
def test_durability() -> None:
    settings = _common.Settings(
        reps=1, duration=0.02, http_duration=1.0, http_reps=1, warmup=0.01, quick=True
    )
    section = durability.run(settings, _log)
    assert section.error is None, section.error
    [table] = section.tables
    assert {s.name for s in table.series} == {durability.FULL, durability.NORMAL, durability.FLOOR}
    assert all(s.values[0] > 0 for s in table.series)
    assert {(t.ours, t.peer) for t in table.targets} == {
        (durability.FULL, durability.NORMAL),
        (durability.FULL, durability.FLOOR),
    }


def test_scale(tmp_path: Path) -> None:
    section = scale.measure(TINY, _log, (100, 1_000), 500, 500, 50, before_s=1.0)
    assert section.error is None
    titles = [t.title for t in section.tables]
    assert titles[:2] == ["claim latency p50", "claim latency p99"]
    for table in section.tables[:3]:
        assert [s.name for s in table.series] == ["100 items", "1,000 items"]
        assert all(v > 0 for s in table.series for v in s.values)
        assert table.targets[0].maximum == scale.FLAT
    sweep = section.tables[-1]
    assert sweep.targets[0].maximum == scale.SWEEP
    assert all(s.values[0] > 0 for s in sweep.series)
    # The before window ran for its time (beyond its 50 claims); the old window's measure and
    # the idle sweep's time are reported beside the target's.
    timing, old = sweep.notes
    assert "on the idle engine the same sweep took" in timing
    assert int(timing.split("Before the sweep: ")[1].split()[0]) > 50
    assert old.startswith("The old window (the first 50 claims before the sweep)")
    if charts.available() is None:
        drawn = charts.draw([section], tmp_path)["scale"]
        assert [path.name for _alt, path in drawn] == [
            "scale-claim-latency.png",
            "scale-serving-process-memory-vmrss-after-the-last-slice.png",
            "scale-claim-latency-p99-around-a-ttl-sweep.png",
        ]


def test_main_writes_report(tmp_path: Path) -> None:
    output = tmp_path / "BENCHMARKS.md"
    code = bench_main.main(["--quick", "--only", "direct", "--reps", "1", "--output", str(output)])
    text = output.read_text()
    assert code == 0
    assert "## Machine" in text and "SQLite" in text and "| direct | success workload |" in text
    if charts.available() is None:
        drawn = sorted((tmp_path / "BENCHMARKS-charts").glob("*.png"))
        assert [p.name for p in drawn] == [
            "direct-failing-workload.png",
            "direct-success-workload.png",
        ]
        assert all(p.read_bytes().startswith(b"\x89PNG") for p in drawn)
        assert "![direct: success workload](BENCHMARKS-charts/direct-success-workload.png)" in text
    else:
        assert "Charts: none drawn (matplotlib is not installed)." in text


def test_loadgroup_really_groups(request: pytest.FixtureRequest) -> None:
    """`make test` runs `--dist loadgroup`; pytest 9.2 with pytest-xdist 3.8 silently ignored
    xdist_group marks (see requirements/dev.in). This fails if that comes back."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run with pytest-xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@bench")


def test_backups() -> None:
    from bench import backups

    [small, larger] = backups.measure(TINY, _log, (200, 2_000))
    for table in (small, larger):
        _check_section(_common.Section("backups", "backups", [], [table]), {backups.BACKUP})
        assert {s.name for s in table.series} == {
            backups.COPY,
            backups.BACKUP,
            backups.RESTORE,
            backups.POINT,
        }
        assert all(t.peer == backups.COPY and t.maximum for t in table.targets)
    assert backups.run(TINY, _log).title.startswith("Backup and restore")
    assert "backups" in bench_main.BENCHMARKS


def test_transfers() -> None:
    from bench import transfers

    [table] = transfers.measure(TINY, _log, (300,))
    _check_section(_common.Section("transfers", "transfers", [], [table]), {transfers.EXPORT})
    assert {s.name for s in table.series} == {transfers.COPY, transfers.EXPORT, transfers.IMPORT}
    assert all(t.peer == transfers.COPY and t.maximum for t in table.targets)
    assert "transfers" in bench_main.BENCHMARKS


def test_clock_skew() -> None:
    from bench import clock_skew

    section = clock_skew.run(TINY, _log)
    assert [t.title for t in section.tables] == [
        "first call, boto3 bound in process",
        "duplicate, boto3 bound in process",
    ]
    for table in section.tables:
        _check_section(_common.Section("clock_skew", "clock_skew", [], [table]), {"off", "on"})
    assert "clock_skew" in bench_main.BENCHMARKS
