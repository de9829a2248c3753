"""Throttling injected by the engine itself (not by a client-side hook): the retry policy must
absorb it, and a condition failure must still never be retried."""

from __future__ import annotations

from firstwrite.idempotency import (
    CallCounter,
    Idempotency,
    IdempotencyConfig,
    MemoryMetrics,
    RetryPolicy,
)

from .conftest import TABLE, Backend


def test_engine_throttling_is_absorbed(backend: Backend, table: str) -> None:
    """``engine.faults.throttle(operation=, table=, count=)`` answers the next ``count``
    matching calls with ``ProvisionedThroughputExceededException`` (HTTP 400)."""
    from botocore.config import Config

    client = backend.new_client(config=Config(retries={"total_max_attempts": 1}))
    metrics = MemoryMetrics()
    sleeps: list[float] = []
    guard = Idempotency(
        IdempotencyConfig(table_name=TABLE, retry=RetryPolicy(max_attempts=5)),
        client=client,
        clock=backend.now,
        metrics=metrics,
        sleep=sleeps.append,
    )
    backend.engine.faults.throttle(operation="PutItem", table=TABLE, count=2)
    with CallCounter(client) as calls:
        assert guard.run("f1", lambda: "ok") == "ok"
    assert calls.by_operation["PutItem"] == 3 and len(sleeps) == 2
    assert metrics.total("firstwrite_dynamodb_throttles_total", operation="PutItem") == 2
