"""Workers with skewed clocks never take over a live claim (issue 41, point 2).

Threads share keys whose owner is still working (renewing its lease); every worker's guard is
given a clock that runs behind or ahead of the real one by up to the lease. Over HTTP the
engine's answers carry a real ``Date``: with the estimate on (the default), no contender ever
gets a claim on a live key, and the owners never lose theirs; with it off, the same run shows
the takeovers, so the test can fail. In process the bound client's answers are dated from the
engine's clock too, and the skewed clocks are the engine's (``engine.clock.skewed``): the same
holds there (tests/idempotency/test_clock_skew_staged.py stages it step by step).
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from botocore.config import Config

from firstwrite.idempotency import (
    Claim,
    ClockSkewError,
    ClockSkewPolicy,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    LostClaimError,
    MemoryMetrics,
    Replay,
)

LEASE = 4.0
RUN = 5.0  # longer than a lease: an owner's first lease would have run out without renewals

# The owners' clocks run behind (their leases look over early to others), the contenders'
# ahead (they see leases as over early): up to the lease, and both kinds on every key.
OWNER_SKEWS = (0.0, -1.0, -2.5, -3.9)
CONTENDER_SKEWS = (0.0, 1.5, 3.0, 3.9, -3.9)


def skewed(seconds: float) -> Callable[[], float]:
    return lambda: time.time() + seconds


def http_client(url: str) -> Any:
    import boto3

    return boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDSKEW",
        aws_secret_access_key="secret",
        config=Config(
            retries={"max_attempts": 2},
            max_pool_connections=32,
            connect_timeout=1,
            read_timeout=2,
        ),
    )


def race(
    make_client: Callable[[], Any],
    table: str,
    policy: ClockSkewPolicy,
    owner_skews: tuple[float, ...] = OWNER_SKEWS,
    contender_skews: tuple[float, ...] = CONTENDER_SKEWS,
    clock_of: Callable[[float], Callable[[], float]] = skewed,
) -> dict[str, Any]:
    """Owners claim one key each and work for :data:`RUN` seconds, renewing every half
    second; contenders claim the same keys in a loop meanwhile. The contenders' outcomes, the
    owners' lost claims, and what the metrics saw."""
    config = IdempotencyConfig(table_name=table, lease=LEASE, clock_skew=policy, budget=5.0)
    metrics = MemoryMetrics()
    Idempotency(config, client=make_client()).ensure_table()
    keys = [f"k-{i}-{uuid.uuid4().hex[:6]}" for i in range(len(owner_skews))]
    outcomes: Counter[str] = Counter()
    lost: list[str] = []
    lock = threading.Lock()
    working = threading.Event()
    done = threading.Event()
    claimed = threading.Barrier(len(owner_skews) + 1)

    def owner(key: str, skew: float) -> None:
        guard = Idempotency(config, client=make_client(), clock=clock_of(skew), metrics=metrics)
        claim = guard.claim(key, payload={"k": key})
        assert isinstance(claim, Claim)
        claimed.wait()
        ends = time.monotonic() + RUN
        try:
            while time.monotonic() < ends:
                time.sleep(0.5)
                claim = guard.renew(claim)
            guard.complete(claim, {"ran": key})
        except LostClaimError:
            with lock:
                lost.append(key)

    def contender(skew: float) -> None:
        guard = Idempotency(config, client=make_client(), clock=clock_of(skew), metrics=metrics)
        working.wait()
        for key in itertools.cycle(keys):
            if done.is_set():
                return
            try:
                outcome = guard.claim(key, payload={"k": key}, wait=0)
            except InProgressError:
                seen = "in_progress"
            except ClockSkewError:
                seen = "refused"
            else:
                seen = "taken_over" if isinstance(outcome, Claim) else "replay"
                assert isinstance(outcome, (Claim, Replay))
            with lock:
                outcomes[seen] += 1
            time.sleep(0.01)

    owners = [
        threading.Thread(target=owner, args=(k, s)) for k, s in zip(keys, owner_skews, strict=True)
    ]
    contenders = [threading.Thread(target=contender, args=(s,)) for s in contender_skews]
    for thread in owners + contenders:
        thread.start()
    claimed.wait()
    working.set()
    for thread in owners:
        thread.join(RUN + 30)
    done.set()
    for thread in contenders:
        thread.join(30)
    return {"outcomes": outcomes, "lost": lost, "metrics": metrics}


@pytest.fixture
def url(http_server: Any) -> str:
    return str(http_server.url)


def test_over_http_no_skewed_worker_takes_over_a_live_claim(url: str) -> None:
    # The engine's server dates answers from a clock it refreshes once a second (uvicorn's):
    # a Date may be a second old, so its step is taken as two seconds (docs/guarantees.md).
    policy = ClockSkewPolicy(resolution=2.0)
    seen = race(lambda: http_client(url), f"skew-on-{uuid.uuid4().hex[:8]}", policy)
    outcomes = seen["outcomes"]
    assert outcomes["taken_over"] == 0, outcomes
    assert seen["lost"] == []
    assert outcomes["in_progress"] > 50, outcomes  # the contenders did try, all along
    # Trusted or not, every worker judged every lease on DynamoDB's clock: all were live.
    assert outcomes["refused"] == 0, outcomes
    offset = seen["metrics"].gauges["firstwrite_clock_offset_seconds"]
    assert -4.5 <= offset <= 4.5  # the last estimate set, of one of the skewed clocks


def test_over_http_an_abandoned_claim_is_taken_over_on_dynamodbs_clock_or_refused(
    url: str,
) -> None:
    table = f"skew-abandoned-{uuid.uuid4().hex[:8]}"
    policy = ClockSkewPolicy(resolution=2.0)
    config = IdempotencyConfig(table_name=table, lease=LEASE, clock_skew=policy)
    Idempotency(config, client=http_client(url)).ensure_table()
    # A worker whose clock runs 3.5 s behind claims and dies: its lease ends 4 s after the
    # claim on DynamoDB's clock, not 0.5 s after.
    dead = Idempotency(config, client=http_client(url), clock=skewed(-3.5))
    assert isinstance(dead.claim("abandoned", payload=1), Claim)
    started = time.time()
    # Its first claim was written before it heard DynamoDB's clock (0.5 s of lease); the
    # answer showed the clock behind, so the lease was renewed at once from the estimate.
    stored = dead.get("abandoned")
    assert stored is not None and stored.lease_expires_at is not None
    assert stored.lease_expires_at / 1000 >= started + LEASE - 1.0
    metrics = MemoryMetrics()
    right = Idempotency(config, client=http_client(url), metrics=metrics)
    ahead = Idempotency(config, client=http_client(url), clock=skewed(3.0), metrics=metrics)
    with pytest.raises(InProgressError):  # to the clock 3 s ahead too: on DynamoDB's, 4 s
        ahead.claim("abandoned", payload=1, wait=0)
    while time.time() < started + 0.5:  # where the dead worker's own clock would end it
        time.sleep(0.05)
    with pytest.raises(InProgressError):
        right.claim("abandoned", payload=1, wait=0)
    # Over by every reading: the lease (4 s) plus both guards' uncertainties (up to 1.5 s each).
    while time.time() < started + LEASE + 3.5:
        time.sleep(0.1)
    # Over on DynamoDB's clock; to the guard 3 s off (more than half the lease, with the
    # Date's uncertainty) it cannot be judged: refused, counted, retryable.
    with pytest.raises(ClockSkewError) as refused:
        ahead.claim("abandoned", payload=1, wait=0)
    assert refused.value.retryable and refused.value.bound == LEASE / 2
    assert refused.value.offset is not None and -4.5 < refused.value.offset < -1.5
    assert metrics.total("firstwrite_claims_total", outcome="clock_skew_refused") == 1
    taken = right.claim("abandoned", payload=1, wait=0)
    assert isinstance(taken, Claim)  # the guard whose clock is right takes it over
    assert metrics.total("firstwrite_claims_total", outcome="takeover") == 1


def test_over_http_without_the_estimate_the_same_run_takes_live_claims_over(url: str) -> None:
    seen = race(
        lambda: http_client(url),
        f"skew-off-{uuid.uuid4().hex[:8]}",
        ClockSkewPolicy(enabled=False),
    )
    assert seen["outcomes"]["taken_over"] > 0, seen["outcomes"]
    assert seen["lost"], "an owner whose claim was taken over loses it at its next renewal"
    assert seen["outcomes"]["refused"] == 0


def test_in_process_the_engine_dates_its_answers_and_skewed_workers_take_nothing_live(
    tmp_path: Any,
) -> None:
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    engine = Engine(str(tmp_path / "engine.db"))
    try:
        # DynamoDB's clock is the engine's, a day off the wall clock: a guard on the wall
        # clock would be a day off; every worker's clock is the engine's, skewed.
        engine.clock.advance(86_400)
        client, skewed_clock = (lambda: local_client(engine)), engine.clock.skewed
        protected = race(client, "dated", ClockSkewPolicy(), clock_of=skewed_clock)
        exposed = race(client, "undated", ClockSkewPolicy(enabled=False), clock_of=skewed_clock)
    finally:
        engine.close()
    outcomes = protected["outcomes"]
    assert outcomes["taken_over"] == 0, outcomes
    assert protected["lost"] == [] and outcomes["in_progress"] > 50, outcomes
    assert outcomes["refused"] == 0, outcomes
    offset = protected["metrics"].gauges["firstwrite_clock_offset_seconds"]
    assert -4.5 <= offset <= 4.5  # the last estimate set, of one of the skewed clocks
    assert exposed["outcomes"]["taken_over"] > 0, exposed["outcomes"]
    assert exposed["lost"]
