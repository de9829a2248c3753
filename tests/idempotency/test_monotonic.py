"""The layer's deadlines run on the ``monotonic`` clock the guard is given, never on the
process's own: a fake clock, moved only by the guard's ``sleep``, decides when waiting ends."""

from __future__ import annotations

import asyncio

import pytest

from firstwrite.idempotency import (
    AsyncIdempotency,
    Claim,
    CompletionNotRecordedError,
    IdempotencyConfig,
    InProgressError,
)
from firstwrite.idempotency._machine.machine import StateMachine

from .conftest import TABLE, Backend
from .faults import throttle


class FakeMonotonic:
    """A monotonic clock that moves only when the guard sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_wait_for_a_live_request_ends_on_the_injected_clock(
    backend: Backend, table: str
) -> None:
    config = IdempotencyConfig(table_name=TABLE, in_progress_wait=1.0, poll_interval=0.1)
    first = backend.guard(config)
    assert isinstance(first.claim("live"), Claim)
    fake = FakeMonotonic()
    waiting = backend.guard(config, monotonic=fake, sleep=fake.sleep)
    with pytest.raises(InProgressError):
        waiting.claim("live")
    # Polls at 0.1, 0.2, 0.4 s, then what is left of the second: exactly the budget, on the
    # fake clock. On the process's clock the no-op sleeps would poll for a real second.
    assert fake.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.3])
    assert sum(fake.sleeps) == pytest.approx(1.0)
    assert fake.reads >= 2


def test_the_async_guard_waits_on_the_injected_clock_too(backend: Backend, table: str) -> None:
    from firstwrite.idempotency.aio import ThreadedClient

    config = IdempotencyConfig(table_name=TABLE, in_progress_wait=0.5, poll_interval=0.1)
    assert isinstance(backend.guard(config).claim("live"), Claim)
    fake = FakeMonotonic()

    async def sleep(seconds: float) -> None:
        fake.sleep(seconds)

    guard = AsyncIdempotency(
        config,
        client=ThreadedClient(backend.client),
        clock=backend.now,
        monotonic=fake,
        sleep=sleep,
    )
    with pytest.raises(InProgressError):
        asyncio.run(guard.claim("live"))
    assert fake.sleeps == pytest.approx([0.1, 0.2, 0.2])


def test_completion_retries_stop_after_one_lease_on_the_injected_clock(
    backend: Backend, table: str
) -> None:
    fake = FakeMonotonic()
    config = IdempotencyConfig(table_name=TABLE, lease=2.0)
    guard = backend.guard(config, monotonic=fake, sleep=fake.sleep, rng=lambda: 1.0)
    claim = guard.claim("slow-store")
    assert isinstance(claim, Claim)
    throttle(backend.client, "UpdateItem", 1000)
    with pytest.raises(CompletionNotRecordedError) as info:
        guard.complete(claim, "done")
    # Retried for one lease of the fake clock (plus the last call's own backoffs), which only
    # the guard's sleeps moved; on the process's clock the no-op sleeps would retry on.
    assert 2.0 <= info.value.tried_for < 3.0
    assert info.value.tried_for == pytest.approx(sum(fake.sleeps))


def test_the_machine_defaults_to_the_process_clock() -> None:
    import time

    assert StateMachine().monotonic is time.monotonic
