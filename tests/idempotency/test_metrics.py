"""Metrics sinks: Prometheus, OpenTelemetry, hooks; structured logs with dynamo_error_code."""

from __future__ import annotations

import logging

import pytest

from firstwrite.idempotency import HookMetrics, IdempotencyConfig, MultiMetrics, PrometheusMetrics
from firstwrite.idempotency.errors import InProgressError
from firstwrite.idempotency.metrics import OpenTelemetryMetrics

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
    codes = {getattr(r, "dynamo_error_code", None) for r in caplog.records}
    assert codes == {"ProvisionedThroughputExceededException"}
    assert any(r.levelno == logging.ERROR for r in caplog.records)
