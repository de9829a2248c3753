"""A claim that comes back with the budget spent never starts the function, and frees its key.

The guard's monotonic clock is moved past the deadline by a client hook after the claim's
``PutItem`` answers (the answer arrived at the deadline): ``run`` raises
``DeadlineExceededError`` without calling the function, and the claim is released, so the
next call with the key runs at once instead of waiting out the lease as "in progress".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from firstwrite.engine import Engine, local_client
from firstwrite.idempotency import (
    AsyncIdempotency,
    DeadlineExceededError,
    Idempotency,
    IdempotencyConfig,
)
from firstwrite.idempotency.aio import ThreadedClient

BUDGET = 5.0


class Jumping:
    """A monotonic clock that jumps past the budget once the next ``PutItem`` answers."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.armed = True

    def __call__(self) -> float:
        return self.now

    def after_put(self, **_: Any) -> None:
        if self.armed:
            self.armed = False
            self.now += BUDGET + 1


def _client(clock: Jumping) -> Any:
    client = local_client(Engine())
    client.meta.events.register("after-call.dynamodb.PutItem", clock.after_put)
    return client


def test_run_does_not_start_the_function_and_releases_the_claim() -> None:
    clock = Jumping()
    config = IdempotencyConfig(table_name="spent", budget=BUDGET, lease=600)
    guard = Idempotency(config, client=_client(clock), monotonic=clock)
    guard.ensure_table()
    ran: list[str] = []
    with pytest.raises(DeadlineExceededError) as info:
        guard.run("order-1", lambda: ran.append("first"))
    assert ran == [] and info.value.dynamo_error_code == "BudgetSpentBeforeRun"
    record = guard.get("order-1")
    assert record is not None and record.status.name == "FAILED"  # released, not held
    assert guard.run("order-1", lambda: ran.append("retry") or "ok") == "ok"  # at once
    assert ran == ["retry"]


def test_the_async_guard_does_the_same() -> None:
    clock = Jumping()
    config = IdempotencyConfig(table_name="spent-async", budget=BUDGET, lease=600)
    sync = Idempotency(config, client=_client(clock), monotonic=clock)
    sync.ensure_table()
    guard = AsyncIdempotency(config, client=ThreadedClient(sync.client), monotonic=clock)
    ran: list[str] = []

    async def work() -> str:
        ran.append("ran")
        return "ok"

    async def main() -> None:
        with pytest.raises(DeadlineExceededError):
            await guard.run("order-2", work)
        assert ran == []
        assert await guard.run("order-2", work) == "ok"

    asyncio.run(main())
    assert ran == ["ran"]
