"""PNG charts of the results, linked from BENCHMARKS.md (matplotlib, drawn off-screen).

One chart per table: each contender's median with its min-max range, ours in blue, floors and
bounds (what any implementation must pay) in orange, other peers in grey; a second panel for
the p99 latency when the table has one. The scale benchmark gets line charts against the
table size. Without matplotlib the report says so and links none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

from ._common import Section, Table

OURS, FLOOR, PEER = "#1f77b4", "#ff7f0e", "#9a9a9a"
SCALE_CURVES = ("claim latency p50", "claim latency p99")  # drawn as one chart, by size
Chart = tuple[str, Path]  # (what it shows, the PNG)


def available() -> str | None:
    """Why charts cannot be drawn, or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed"
    return None


def draw(sections: Sequence[Section], directory: Path) -> dict[str, list[Chart]]:
    """Draw every section's charts into ``directory`` (its old PNGs removed first)."""
    import matplotlib

    matplotlib.use("Agg")
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.png"):
        old.unlink()
    charts: dict[str, list[Chart]] = {}
    for section in sections:
        made: list[Chart] = []
        if section.key == "scale":
            made += _scale(section, directory)
        for table in section.tables:
            if not table.series or (section.key == "scale" and table.title in SCALE_CURVES):
                continue
            path = directory / f"{section.key}-{_slug(table.title)}.png"
            _bars(section, table, path)
            made.append((f"{section.key}: {table.title}", path))
        charts[section.key] = made
    return charts


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _colour(table: Table, name: str) -> str:
    if name in table.ours:
        return OURS
    bounds = {t.bound for t in table.targets}
    if "floor" in name or "alone" in name or name in bounds:
        return FLOOR
    return PEER


def _bars(section: Section, table: Table, path: Path) -> None:
    import matplotlib.pyplot as plt

    series = [s for s in table.series if s.values]
    p99 = table.extra.get("p99 latency (ms, median)", {})
    panels = 2 if p99 else 1
    height = 0.45 * len(series) + 1.4
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, height), squeeze=False)
    names = [s.name for s in series]
    colours = [_colour(table, n) for n in names]
    ax = axes[0][0]
    medians = [s.median for s in series]
    low = [s.median - s.spread[0] for s in series]
    high = [s.spread[1] - s.median for s in series]
    ax.barh(names, medians, xerr=[low, high], color=colours, capsize=3)
    unit = series[0].unit
    better = "higher is better" if unit == "ops/s" else "lower is better"
    ax.set_xlabel(f"median {unit} ({better}; bars: min-max)")
    if max(medians) / max(min(medians), 1e-9) > 50:
        ax.set_xscale("log")
    ax.invert_yaxis()
    if p99:
        right = axes[0][1]
        values = [float(p99.get(n, "nan")) for n in names]
        right.barh(names, [0 if math.isnan(v) else v for v in values], color=colours)
        right.set_xlabel("p99 latency, ms (lower is better)")
        right.invert_yaxis()
        right.set_yticklabels([])
    fig.suptitle(f"{section.key}: {table.title}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def _scale(section: Section, directory: Path) -> list[Chart]:
    """Claim latency p50 and p99 against the table size."""
    import matplotlib.pyplot as plt

    lines = {t.title: t for t in section.tables if t.title in SCALE_CURVES}
    if not lines:
        return []
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for title, table in sorted(lines.items()):
        sizes = [int(s.name.split()[0].replace(",", "")) for s in table.series]
        ax.plot(sizes, [s.median for s in table.series], marker="o", label=title[-3:])
        ax.fill_between(
            sizes,
            [s.spread[0] for s in table.series],
            [s.spread[1] for s in table.series],
            alpha=0.2,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("items in the table")
    ax.set_ylabel("claim latency, µs")
    ax.legend()
    ax.set_title(
        "scale: claim latency against table size (median of slices, band: min-max)", fontsize=9
    )
    fig.tight_layout()
    path = directory / "scale-claim-latency.png"
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return [("scale: claim latency against table size", path)]
