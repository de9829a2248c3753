"""Retry-After for a duplicate of a live request (issue 14, defect 9): a documented policy, not
the whole remaining lease (60 s for a one-second request)."""

from __future__ import annotations

import itertools

import pytest

from firstwrite.idempotency import (
    Claim,
    ConfigurationError,
    IdempotencyConfig,
    InFlight,
    InProgressError,
    RetryAfter,
)

from .conftest import TABLE, Backend


def busy(backend: Backend, config: IdempotencyConfig, after: float = 0.0) -> InProgressError:
    """The InProgressError a duplicate gets ``after`` seconds into a live claim. The clock
    stands on a whole second: the engine dates its answers in whole seconds, as DynamoDB does,
    and the guard reads DynamoDB's time from them (docs/guarantees.md, "Clocks")."""
    backend.engine.clock.freeze(float(int(backend.engine.clock.now())))
    guard = backend.guard(config)
    key = f"live-{next(_keys)}"
    claim = guard.claim(key, {"n": 1})
    assert isinstance(claim, Claim)
    backend.advance(after)
    with pytest.raises(InProgressError) as info:
        guard.claim(key, {"n": 1})
    return info.value


_keys = itertools.count()


def test_the_default_answers_about_a_second_not_the_lease(backend: Backend, table: str) -> None:
    error = busy(backend, IdempotencyConfig(table_name=TABLE))  # lease 60 s
    assert error.retry_after == pytest.approx(1.0, abs=0.002)
    assert error.retry_after_header == "1"
    assert error.lease_remaining == pytest.approx(60.0, abs=0.002)


def test_the_default_polls_once_the_expected_time_has_passed(backend: Backend, table: str) -> None:
    # 1.5 s in (read as at least 1 s: the Date's whole second), the expected second is over.
    error = busy(backend, IdempotencyConfig(table_name=TABLE), after=1.5)
    assert error.retry_after == pytest.approx(0.5)  # at least the poll interval
    late = busy(backend, IdempotencyConfig(table_name=TABLE), after=30)
    assert late.retry_after == pytest.approx(0.5) and late.retry_after_header == "1"


def test_an_expected_duration(backend: Backend, table: str) -> None:
    config = IdempotencyConfig(table_name=TABLE, retry_after=RetryAfter.expected_duration(5.0))
    assert busy(backend, config, after=2.0).retry_after == pytest.approx(3.0, abs=0.002)


def test_a_fixed_poll_interval_never_outlasts_the_lease(backend: Backend, table: str) -> None:
    every = IdempotencyConfig(table_name=TABLE, retry_after=RetryAfter.every(2.0))
    assert busy(backend, every).retry_after == pytest.approx(2.0)
    short = IdempotencyConfig(table_name=TABLE, lease=1.5, retry_after=RetryAfter.every(2.0))
    error = busy(backend, short)
    assert error.retry_after == pytest.approx(1.5, abs=0.002)  # then the key can be taken over
    assert error.retry_after_header == "2"  # rounded up: a client never comes back early


def test_a_rule_of_your_own(backend: Backend, table: str) -> None:
    seen: list[InFlight] = []

    def rule(live: InFlight) -> float:
        seen.append(live)
        return live.lease_remaining  # the old behaviour, if that is what you want

    config = IdempotencyConfig(table_name=TABLE, retry_after=RetryAfter.using(rule))
    error = busy(backend, config, after=10)
    assert error.retry_after == pytest.approx(50.0, abs=0.002)
    (live,) = seen
    assert live.key.startswith("live-") and live.elapsed == pytest.approx(10.0, abs=0.002)
    assert live.claimed_at is not None and live.lease_expires_at > live.now


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        RetryAfter(poll=0)
    with pytest.raises(ConfigurationError):
        RetryAfter(expected=-1)
    with pytest.raises(ConfigurationError):
        IdempotencyConfig(retry_after=5)  # type: ignore[arg-type]
