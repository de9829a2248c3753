"""Metrics sinks: Prometheus, OpenTelemetry, hooks; structured logs with dynamo_error_code."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from firstwrite.idempotency import HookMetrics, IdempotencyConfig, MultiMetrics, PrometheusMetrics
from firstwrite.idempotency.errors import InProgressError
from firstwrite.idempotency.metrics import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    Metrics,
    OpenTelemetryMetrics,
)

from .conftest import TABLE, Backend
from .faults import throttle


def test_prometheus(backend: Backend, table: str) -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    guard = backend.guard(metrics=PrometheusMetrics(registry), sleep=lambda s: None)
    guard.run("m1", lambda: 1)
    guard.run("m1", lambda: 1)
    guard.claim("m2")
    with pytest.raises(InProgressError):
        guard.claim("m2")
    throttle(backend.client, "PutItem", 1)
    guard.run("m3", lambda: 1)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("firstwrite_claims_total", outcome="claimed") == 3
    assert value("firstwrite_claims_total", outcome="replayed_completed") == 1
    assert value("firstwrite_claims_total", outcome="in_progress") == 1
    assert (
        value(
            "firstwrite_dynamodb_throttles_total",
            operation="PutItem",
            dynamo_error_code="ThrottlingException",
        )
        == 1
    )
    assert (value("firstwrite_operation_seconds_count", operation="PutItem") or 0) >= 5


def test_opentelemetry_and_hooks(backend: Backend, table: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    seen: list[tuple[str, float, dict[str, str]]] = []
    sink = MultiMetrics(
        [OpenTelemetryMetrics(meter), HookMetrics(lambda n, v, ls: seen.append((n, v, dict(ls))))]
    )
    guard = backend.guard(metrics=sink)
    guard.run("o1", lambda: 1)
    guard.run("o1", lambda: 1)
    data = reader.get_metrics_data()
    points = {
        m.name: sum(p.value for p in m.data.data_points if hasattr(p, "value"))
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert points["firstwrite_claims_total"] == 2
    assert ("firstwrite_claims_total", 1.0, {"outcome": "replayed_completed"}) in seen


def test_error_logs_carry_the_dynamo_error_code(
    backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    from botocore.exceptions import ClientError

    guard = backend.guard(IdempotencyConfig(table_name=TABLE), sleep=lambda s: None)
    throttle(backend.client, "PutItem", 100, code="ProvisionedThroughputExceededException")
    with (
        caplog.at_level(logging.WARNING, logger="firstwrite.idempotency"),
        pytest.raises(ClientError),
    ):
        guard.claim("l1")
    calls = [r for r in caplog.records if not hasattr(r, "slowest_attempt")]  # not the timeouts
    codes = {getattr(r, "dynamo_error_code", None) for r in calls}
    assert codes == {"ProvisionedThroughputExceededException"}
    assert any(r.levelno == logging.ERROR for r in caplog.records)


# -- names: the same under every exporter, and in the docs (issue 14, defect 5) -----------------

DOCS = Path(__file__).resolve().parents[2] / "docs"
README = DOCS.parent / "README.md"
_METRIC = re.compile(r"\b((?:firstwrite|dynamo|transact)_[a-z_]+)")


def _every_signal(sink: Metrics) -> None:
    for name, (_, labels) in COUNTERS.items():
        sink.count(name, **{label: "x" for label in labels})
    for name, (_, labels) in HISTOGRAMS.items():
        sink.observe(name, 0.1, **{label: "x" for label in labels})


def test_prometheus_exposes_each_counter_under_its_own_name() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    _every_signal(PrometheusMetrics(registry))
    exposed = {
        line.split("{")[0].split(" ")[0]
        for line in generate_latest(registry).decode().splitlines()
        if line and not line.startswith("#")
    }
    for name in COUNTERS:
        assert name in exposed, name  # a name Prometheus would rename is a broken alert
    for name in HISTOGRAMS:
        assert {f"{name}_bucket", f"{name}_sum", f"{name}_count"} <= exposed


def test_opentelemetry_and_hooks_use_the_same_names() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    seen: set[str] = set()
    _every_signal(
        MultiMetrics(
            [
                OpenTelemetryMetrics(MeterProvider(metric_readers=[reader]).get_meter("names")),
                HookMetrics(lambda name, value, labels: seen.add(name)),
            ]
        )
    )
    otel = {
        m.name
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert otel == seen == set(COUNTERS) | set(HISTOGRAMS)


def _pytest_plugin_names() -> set[str]:
    """The pytest plugin's fixtures and ini options share the ``firstwrite_`` prefix."""
    import firstwrite.testing.plugin as plugin

    source = Path(plugin.__file__).read_text()
    return {n for n in dir(plugin) if n.startswith("firstwrite_")} | set(
        re.findall(r'addini\(\s*"(firstwrite_\w+)"', source)
    )


def test_the_docs_name_only_metrics_that_are_emitted() -> None:
    documented: dict[str, set[str]] = {}
    # a log field, a boto3 method, a label (the seed's name for the cancellation reason), fixtures
    not_metrics = {
        "dynamo_error_code",
        "transact_write_items",
        "transact_write_cancellation_reason",
        *_pytest_plugin_names(),
    }
    for path in [README, *DOCS.glob("*.md")]:
        for name in _METRIC.findall(path.read_text()):
            if name not in not_metrics:
                documented.setdefault(name.rstrip("_"), set()).add(path.name)
    emitted = set(COUNTERS) | set(HISTOGRAMS) | set(GAUGES)
    unknown = {name: files for name, files in documented.items() if name not in emitted}
    assert unknown == {}
    assert "transact_write_cancellations_total" in documented  # the alert of the issue
    # the seed's name is the label of that counter (issue 37)
    assert COUNTERS["transact_write_cancellations_total"][1] == (
        "transact_write_cancellation_reason",
    )
    assert "dynamo_ttl_remove_age_seconds" in documented


def test_two_prometheus_sinks_in_one_process_share_the_default_registry() -> None:
    from prometheus_client import REGISTRY

    first, second = PrometheusMetrics(), PrometheusMetrics()  # used to fail: duplicated series
    before = REGISTRY.get_sample_value("firstwrite_cache_hits_total") or 0.0
    first.count("firstwrite_cache_hits_total")
    second.count("firstwrite_cache_hits_total")
    assert REGISTRY.get_sample_value("firstwrite_cache_hits_total") == before + 2
    other = PrometheusMetrics(namespace="svc")  # another namespace: its own series
    other.count("firstwrite_cache_hits_total")
    assert REGISTRY.get_sample_value("svc_firstwrite_cache_hits_total") == 1
