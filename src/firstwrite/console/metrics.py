"""The layer's metrics, under the layer's own names, from the console's MemoryMetrics.

The MemoryMetrics are those the console's guards (and any app that passes its own to
:func:`firstwrite.console.create_console`) write to."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from firstwrite.idempotency import MemoryMetrics
from firstwrite.idempotency.metrics import COUNTERS, HISTOGRAMS


@dataclass(frozen=True, slots=True)
class Series:
    labels: str
    value: float


@dataclass(frozen=True, slots=True)
class MetricView:
    name: str
    kind: str
    help: str
    label_names: tuple[str, ...]
    series: list[Series]
    total: float
    summary: str = ""  # histograms: count and percentiles


def view(metrics: MemoryMetrics) -> list[MetricView]:
    """Every metric the layer defines, zero or not, in the layer's order."""
    counts: dict[str, list[Series]] = {}
    for (name, labels), value in sorted(_items(metrics)):
        text = ", ".join(f'{k}="{v}"' for k, v in labels)
        counts.setdefault(name, []).append(Series(text, float(value)))
    views = []
    for name, (help_text, label_names) in COUNTERS.items():
        series = counts.pop(name, [])
        views.append(
            MetricView(
                name, "counter", help_text, label_names, series, sum(s.value for s in series)
            )
        )
    for name, (help_text, label_names) in HISTOGRAMS.items():
        observed = _observed(metrics, name)
        views.append(
            MetricView(
                name,
                "histogram",
                help_text,
                label_names,
                [],
                float(len(observed)),
                _percentiles(observed),
            )
        )
    for name, series in counts.items():  # a name this version of the layer does not list
        views.append(MetricView(name, "counter", "", (), series, sum(s.value for s in series)))
    return views


def _items(metrics: MemoryMetrics) -> list[tuple[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """A copy of the counts, taken while guards may be counting in other threads."""
    while True:
        try:
            return list(metrics.counts.items())
        except RuntimeError:  # changed size during the copy: take it again
            continue


def _observed(metrics: MemoryMetrics, name: str) -> list[float]:
    while True:
        try:
            return list(metrics.observations.get(name, ()))
        except RuntimeError:
            continue


def _percentiles(values: list[float]) -> str:
    if not values:
        return "no observations"
    if len(values) == 1:
        return f"1 observation: {values[0] * 1000:.2f} ms"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return (
        f"{len(values)} observations: p50 {cuts[49] * 1000:.2f} ms, "
        f"p99 {cuts[98] * 1000:.2f} ms, max {max(values) * 1000:.2f} ms"
    )
