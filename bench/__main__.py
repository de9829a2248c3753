"""``python -m bench``: run every benchmark, rewrite BENCHMARKS.md.

Options: ``--quick`` (a few iterations, for smoke tests and iteration; writes to
bench/results/BENCHMARKS.quick.md unless ``--output`` says otherwise), ``--only NAME[,NAME]``,
``--reps N``, ``--output PATH``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from . import (
    backups,
    budget,
    charts,
    clock_skew,
    durability,
    engine_bound,
    engine_direct,
    engine_http,
    engine_partiql,
    engine_query,
    events,
    idempotency,
    install_size,
    key_migration,
    middleware,
    overhead,
    plugin,
    recovery,
    report,
    results,
    scale,
    transfers,
)
from ._common import (
    BENCH_DIR,
    REPO,
    RESULTS,
    Section,
    Settings,
    dummy_aws_env,
    machine_info,
    package_version,
)

BENCHMARKS: dict[str, Callable[[Settings, Callable[[str], None]], Section]] = {
    "direct": engine_direct.run,
    "bound": engine_bound.run,
    "http": engine_http.run,
    "durability": durability.run,
    "query": engine_query.run,
    "partiql": engine_partiql.run,
    "scale": scale.run,
    "overhead": overhead.run,
    "idempotency": idempotency.run,
    "install_size": install_size.run,
    "middleware": middleware.run,
    "plugin": plugin.run,
    "backups": backups.run,
    "transfers": transfers.run,
    "budget": budget.run,
    "events": events.run,
    "key_migration": key_migration.run,
    "clock_skew": clock_skew.run,
    "results": results.run,
    "recovery": recovery.run,
}


def _log(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few iterations only")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {list(BENCHMARKS)}")
    parser.add_argument("--reps", type=int, default=0, help="repetitions per contender")
    parser.add_argument("--output", type=Path, default=None, help="report path")
    args = parser.parse_args(argv)

    settings = Settings.quick_mode() if args.quick else Settings.full()
    if args.reps > 0:
        settings = replace(settings, reps=args.reps, http_reps=args.reps)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    output = args.output
    if output is None:
        output = RESULTS / "BENCHMARKS.quick.md" if args.quick else REPO / "BENCHMARKS.md"

    # SIGTERM unwinds like Ctrl-C, so every server this run started is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    dummy_aws_env()
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    machine = machine_info()
    _log(f"bench: {', '.join(names)} ({settings})")
    sections: list[Section] = []
    for name in names:
        _log(f"[{name}]")
        try:
            sections.append(BENCHMARKS[name](settings, _log))
        except Exception as exc:  # one broken benchmark must not hide the others' numbers
            traceback.print_exc()
            sections.append(
                Section(name, name, [], error=f"{type(exc).__name__}: {exc}".splitlines()[0])
            )
    machine["load average at end"] = machine_info()["load average at start"]
    versions = {
        name: package_version(name)
        for name in ("firstwrite", "boto3", "moto", "aws-lambda-powertools", "idemkit")
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    # Charts beside the report: bench/charts/ for BENCHMARKS.md, <name>-charts/ for others.
    chart_dir = (
        BENCH_DIR / "charts"
        if output.resolve() == (REPO / "BENCHMARKS.md").resolve()
        else output.parent / f"{output.stem}-charts"
    )
    why_no_charts = charts.available()
    drawn: dict[str, list[tuple[str, str]]] = {}
    if why_no_charts is None:
        try:
            for key, made in charts.draw(sections, chart_dir).items():
                drawn[key] = [(alt, os.path.relpath(path, output.parent)) for alt, path in made]
        except Exception as exc:  # a chart must not cost the numbers
            traceback.print_exc()
            why_no_charts = f"drawing failed: {type(exc).__name__}: {exc}"
    text = report.render(
        sections,
        machine,
        versions,
        command="python -m bench" + (" --quick" if args.quick else ""),
        started=started,
        elapsed=time.monotonic() - t0,
        quick=settings.quick,
        charts=drawn,
        no_charts=why_no_charts,
    )
    output.write_text(text)
    _log(f"wrote {output}")
    return 1 if any(s.error for s in sections) else 0


if __name__ == "__main__":
    sys.exit(main())
