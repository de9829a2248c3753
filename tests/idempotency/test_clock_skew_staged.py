"""Clock skew staged entirely by the engine, in process (issue 41, point 2).

The engine's clock is DynamoDB's: its answers are dated from it, and ``engine.clock.skewed(s)``
is a worker's clock ``s`` seconds ahead of it (behind when negative). The clock stands still
on whole seconds, so every instant below is exact. A contender whose clock runs ahead by up to
the lease never takes a live claim over while the estimate is on, and does with it off (so the
test can fail); an owner whose clock runs behind keeps a whole lease on DynamoDB's clock; a
contender too far off to be trusted is refused a takeover (``ClockSkewError``) and the offset
gauge shows how far off it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency import (
    Claim,
    ClockSkewError,
    ClockSkewPolicy,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    MemoryMetrics,
)

LEASE = 30.0
TABLE = "skew-staged"
ON, OFF = ClockSkewPolicy(), ClockSkewPolicy(enabled=False)


@pytest.fixture
def engine() -> Iterator[Engine]:
    with Engine() as engine:
        engine.clock.freeze(float(int(time.time())))
        Idempotency(IdempotencyConfig(table_name=TABLE), client=local_client(engine)).ensure_table()
        yield engine


def guard(
    engine: Engine,
    clock: Callable[[], float],
    policy: ClockSkewPolicy = ON,
    metrics: MemoryMetrics | None = None,
) -> Idempotency:
    config = IdempotencyConfig(table_name=TABLE, lease=LEASE, clock_skew=policy)
    return Idempotency(config, client=local_client(engine), clock=clock, metrics=metrics)


def contend(contender: Idempotency, key: str) -> str:
    try:
        outcome = contender.claim(key, payload={"n": 1}, wait=0)
    except InProgressError:
        return "in progress"
    except ClockSkewError:
        return "refused"
    assert isinstance(outcome, Claim)
    return "taken over" if outcome.taken_over else "claimed"


@pytest.mark.parametrize("ahead", [10.5, 14.0, 20.0, LEASE])
def test_a_contender_ahead_by_up_to_the_lease_never_takes_a_live_claim(
    engine: Engine, ahead: float
) -> None:
    owner = guard(engine, engine.clock.now)
    assert isinstance(owner.claim("k", payload={"n": 1}), Claim)
    engine.clock.advance(LEASE - 10)  # 10 s of the lease left, on DynamoDB's clock
    skewed = engine.clock.skewed(ahead)  # to this clock, the lease is over
    assert contend(guard(engine, skewed), "k") == "in progress"
    seasoned = guard(engine, skewed)  # one that heard DynamoDB's clock before
    seasoned.get("k")
    assert contend(seasoned, "k") == "in progress"
    assert seasoned.clock_estimate() is not None
    assert -ahead - 1 <= seasoned.clock_estimate().offset <= -ahead + 1  # type: ignore[union-attr]
    # The hazard the estimate closes: on its own clock, the same contender takes it over.
    assert contend(guard(engine, skewed, OFF), "k") == "taken over"


def test_an_owner_behind_keeps_a_whole_lease_on_dynamodbs_clock(engine: Engine) -> None:
    start = engine.clock.now()
    for key, policy in (("on", ON), ("off", OFF)):
        owner = guard(engine, engine.clock.skewed(-20), policy)
        assert isinstance(owner.claim(key, payload={"n": 1}), Claim)
    stored_on, stored_off = (guard(engine, engine.clock.now).get(key) for key in ("on", "off"))
    assert stored_on is not None and stored_off is not None
    assert stored_on.lease_expires_at is not None and stored_off.lease_expires_at is not None
    # Its first claim was written before it heard DynamoDB's clock; the answer showed its
    # clock behind for sure, and the lease was renewed at once from the estimate.
    assert stored_on.lease_expires_at / 1000 >= start + LEASE
    assert stored_off.lease_expires_at / 1000 == start - 20 + LEASE  # 10 s of lease, really
    engine.clock.advance(15)
    right = guard(engine, engine.clock.now)
    assert contend(right, "on") == "in progress"
    assert contend(right, "off") == "taken over"  # the short lease: a live claim taken over


def test_over_the_direct_client_a_contender_ahead_reads_the_offset_too(engine: Engine) -> None:
    """The direct client dates its answers as the bound clients do, so a guard over it reads
    DynamoDB's clock (it read none: offset 0 assumed, and a contender 14 s ahead took a live
    claim over)."""
    from firstwrite.engine.direct import DirectClient

    config = IdempotencyConfig(table_name=TABLE, lease=LEASE, clock_skew=ON)
    owner = Idempotency(config, client=DirectClient(engine), clock=engine.clock.now)
    assert isinstance(owner.claim("k", payload={"n": 1}), Claim)
    engine.clock.advance(LEASE - 10)
    contender = Idempotency(config, client=DirectClient(engine), clock=engine.clock.skewed(14))
    assert contend(contender, "k") == "in progress"
    estimate = contender.clock_estimate()
    assert estimate is not None and estimate.samples >= 1
    assert -15 <= estimate.offset <= -13


def test_a_contender_too_far_off_is_refused_and_the_gauge_shows_how_far(engine: Engine) -> None:
    owner = guard(engine, engine.clock.now)
    assert isinstance(owner.claim("k", payload={"n": 1}), Claim)
    engine.clock.advance(LEASE + 1)  # the owner stalled: its lease is over on DynamoDB's clock
    metrics = MemoryMetrics()
    far = guard(engine, engine.clock.skewed(20), metrics=metrics)  # past max_offset (15 s)
    with pytest.raises(ClockSkewError) as refused:
        far.claim("k", payload={"n": 1}, wait=0)
    error = refused.value
    assert error.retryable and error.bound == LEASE / 2
    assert error.offset is not None and -20.5 <= error.offset <= -19.5
    assert -20.5 <= metrics.gauges["firstwrite_clock_offset_seconds"] <= -19.5
    assert metrics.gauges["firstwrite_clock_offset_uncertainty_seconds"] <= 0.5
    assert metrics.total("firstwrite_claims_total", outcome="clock_skew_refused") == 1
    # A worker whose clock is within max_offset judges the lease over, and takes the key over.
    near = guard(engine, engine.clock.skewed(5), metrics=metrics)
    assert contend(near, "k") == "taken over"
    assert metrics.total("firstwrite_claims_total", outcome="takeover") == 1


def test_a_guard_on_the_engines_clock_reads_no_offset(engine: Engine) -> None:
    on_time = guard(engine, engine.clock.now)
    on_time.get("nothing")
    estimate = on_time.clock_estimate()
    assert estimate is not None and estimate.samples >= 1
    assert abs(estimate.offset) + estimate.uncertainty <= 1.0  # the Date's whole second
    engine.clock.advance(3600)  # DynamoDB's clock moves, and the guard's with it
    on_time.get("nothing")
    moved = on_time.clock_estimate()
    assert moved is not None and abs(moved.offset) + moved.uncertainty <= 1.0
