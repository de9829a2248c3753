"""The estimate of DynamoDB's clock (:mod:`firstwrite.idempotency.clock_skew`): the ``Date``
header read, the offset's interval narrowed over answers, aged, dropped when the clock is
stepped, and the instants and refusals a lease decision gets from it."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any

import pytest

from firstwrite.idempotency import ClockSkewError, ConfigurationError
from firstwrite.idempotency.clock_skew import (
    UNTRUSTED,
    ClockSkew,
    ClockSkewPolicy,
    parse_http_date,
)

T0 = 1_800_000_000.0  # a whole second


class Clocks:
    """A wall clock and a monotonic clock the test moves (together, or the wall clock alone)."""

    def __init__(self) -> None:
        self.wall = T0
        self.mono = 100.0

    def pass_(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def answer(date: float | None) -> dict[str, Any]:
    headers = {"x-amzn-requestid": "r"}
    if date is not None:
        headers["date"] = formatdate(date, usegmt=True)
    return {"ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": headers}}


def skew_of(clocks: Clocks, lease: float = 60.0, **policy: Any) -> ClockSkew:
    seen: list[tuple[float, float]] = []
    skew = ClockSkew(
        ClockSkewPolicy(**policy),
        lease,
        lambda: clocks.wall,
        lambda: clocks.mono,
        lambda offset, uncertainty: seen.append((offset, uncertainty)),
    )
    skew.seen = seen  # type: ignore[attr-defined]
    return skew


def call(skew: ClockSkew, clocks: Clocks, server: float, rtt: float = 0.0) -> None:
    """One call: sent now, dated by a server whose clock reads ``server`` when it answers
    (halfway), received ``rtt`` later."""
    sent = clocks.wall
    clocks.pass_(rtt)
    skew.observe(answer(int(server)), sent)


def test_the_http_date_header_is_read_in_its_one_form_and_nothing_else_is() -> None:
    expected = datetime(2027, 1, 15, 8, 0, 0, tzinfo=UTC).timestamp()
    assert parse_http_date("Fri, 15 Jan 2027 08:00:00 GMT") == expected
    assert parse_http_date(formatdate(T0 + 7, usegmt=True)) == T0 + 7
    for bad in (
        "",
        "yesterday",
        "Thu, 15 Foo 2027 08:00:00 GMT",
        "Thu, 15 Jan 2027 08:00 GMT",
        "Thu, 15 Jan 2027 08:00:00 PST",
        "Thu, xx Jan 2027 08:00:00 GMT",
    ):
        assert parse_http_date(bad) is None, bad


def test_one_answer_bounds_the_offset_by_the_round_trip_and_the_headers_second() -> None:
    clocks = Clocks()
    skew = skew_of(clocks)
    call(skew, clocks, T0 + 30.0, rtt=0.2)  # the server is 30 s ahead
    estimate = skew.estimate()
    assert estimate is not None and estimate.samples == 1
    # offset in [D - r, D + 1 - s] = [30 - 0.2, 31]: the middle, give or take half of it
    assert estimate.offset == pytest.approx(30.4)
    assert estimate.uncertainty == pytest.approx(0.6)
    assert 30.0 - estimate.uncertainty <= estimate.offset <= 30.0 + estimate.uncertainty + 1


def test_answers_narrow_the_interval_to_the_truth_and_it_widens_with_age() -> None:
    clocks = Clocks()
    skew = skew_of(clocks)
    truth = -12.37  # DynamoDB minus local
    for _ in range(20):
        clocks.pass_(0.23)
        call(skew, clocks, clocks.wall + truth, rtt=0.01)
    estimate = skew.estimate()
    assert estimate is not None and 2 <= estimate.samples < 20  # the answers that narrowed it
    assert abs(estimate.offset - truth) <= estimate.uncertainty
    assert estimate.uncertainty < 0.1  # far under a single answer's half second
    clocks.pass_(50.0)  # no answer for 50 s: drift may have moved the clocks apart
    aged = skew.estimate()
    assert aged is not None and aged.uncertainty == pytest.approx(
        estimate.uncertainty + 500e-6 * 50, abs=1e-6
    )


def test_a_stepped_clock_starts_the_estimate_again_instead_of_keeping_a_wrong_one() -> None:
    clocks = Clocks()
    skew = skew_of(clocks)
    for _ in range(5):
        clocks.pass_(0.3)
        call(skew, clocks, clocks.wall, rtt=0.01)
    clocks.wall += 0.4  # NTP steps the wall clock (the monotonic clock does not move)
    call(skew, clocks, clocks.mono - 100.0 + T0, rtt=0.01)
    estimate = skew.estimate()
    assert estimate is not None and estimate.samples == 1
    assert abs(estimate.offset - (-0.4)) <= estimate.uncertainty


def test_an_answer_right_after_a_step_is_the_new_estimate_not_a_refusal() -> None:
    """The clock steps with DynamoDB's (an engine test moving its clock, both read it): the next
    answer narrows nothing, yet it was taken after the step, so the estimate starts again from it
    and a takeover is judged on it. (It was dropped: the takeover refused as "stepped since
    DynamoDB last answered", right after an answer; test_recovery_claim_with saw it once.)"""
    clocks = Clocks()
    skew = skew_of(clocks)
    for _ in range(5):
        clocks.pass_(0.3)
        call(skew, clocks, clocks.wall, rtt=0.01)
    clocks.wall += 2.0  # the wall clock alone: a step
    call(skew, clocks, clocks.wall, rtt=0.01)
    assert skew.times().refusal is None
    estimate = skew.estimate()
    assert estimate is not None and estimate.samples == 1


class Descheduled(Clocks):
    """Clocks read by a process the scheduler pauses: after each wall-clock read in ``pauses``
    (counted from 1), 20 ms pass before the next read of either clock."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.pauses: set[int] = set()

    def read_wall(self) -> float:
        value = self.wall
        self.reads += 1
        if self.reads in self.pauses:
            self.pass_(0.020)
        return value


def test_a_pause_between_the_two_clocks_reads_is_not_a_step() -> None:
    """On a loaded machine the process can be descheduled between reading the wall clock and
    the monotonic one: the two read 20 ms apart look like a 20 ms step. It was taken for one
    (CI's recovery proof refused a takeover as "stepped"); a careful second reading tells a
    pause from a step, and a real step is still seen through the same pauses."""
    clocks = Descheduled()
    skew = ClockSkew(ClockSkewPolicy(), 60.0, clocks.read_wall, lambda: clocks.mono)
    for _ in range(3):
        clocks.pass_(0.3)
        call(skew, clocks, clocks.wall, rtt=0.01)
    for _ in range(20):  # each decision paused right after its wall-clock read
        clocks.pass_(0.1)
        clocks.pauses = {clocks.reads + 1}
        assert skew.times().refusal is None
    clocks.pauses = {clocks.reads + 1, clocks.reads + 2}  # the careful reading paused too
    assert skew.times().refusal is None
    estimate = skew.estimate()
    assert estimate is not None and estimate.samples == 3
    clocks.wall += 0.05  # a real step, through the same pauses
    clocks.pauses = {clocks.reads + 1, clocks.reads + 2}
    assert skew.times().refusal == "the clock was stepped since DynamoDB last answered"


def test_the_lease_instants_are_widened_by_the_uncertainty_in_the_safe_direction() -> None:
    clocks = Clocks()
    skew = skew_of(clocks, tolerance=0.25)
    call(skew, clocks, T0 - 20.0, rtt=0.0)  # this clock runs 20 s ahead
    offset, uncertainty, _ = skew.estimate() or (0, 0, 0)
    write, compare, refusal = skew.times()
    assert refusal is None
    assert uncertainty == pytest.approx(0.75)  # half the header's second, plus the tolerance
    assert write == pytest.approx(clocks.wall + offset + uncertainty)
    assert compare == pytest.approx(clocks.wall + offset - uncertainty)
    assert compare <= T0 - 20.0 <= write  # DynamoDB's time lies between the two
    assert skew.seen == [(pytest.approx(offset), pytest.approx(uncertainty))]  # type: ignore[attr-defined]


def test_an_offset_past_the_bound_is_refused_half_the_lease_by_default() -> None:
    clocks = Clocks()
    skew = skew_of(clocks, lease=10.0)
    call(skew, clocks, T0 + 4.0)
    assert skew.times().refusal is None  # |4.5| + 0.5 <= 5
    call(skew, clocks, T0 + 4.0)
    later = skew_of(clocks, lease=10.0)
    call(later, clocks, T0 + 5.0)  # 5.5 + 0.5 > 5
    refusal = later.times().refusal
    assert refusal is not None and "more than the 5.000s trusted" in refusal
    error = later.refused("order-1", "IDEMPOTENCY#order-1", refusal)
    assert isinstance(error, ClockSkewError) and error.retryable
    assert error.offset == pytest.approx(5.5) and error.bound == 5.0
    assert error.retry_after_header == "1" and "order-1" in str(error)
    explicit = skew_of(clocks, lease=10.0, max_offset=8.0)
    call(explicit, clocks, T0 + 5.0)
    assert explicit.times().refusal is None


def test_before_any_answer_once_stale_or_stepped_nothing_is_taken_over() -> None:
    clocks = Clocks()
    skew = skew_of(clocks, max_age=30.0)
    assert skew.blind and skew.estimate() is None
    assert skew.times().refusal == "no answer from DynamoDB dated yet"
    call(skew, clocks, T0)
    assert not skew.blind and skew.times().refusal is None
    clocks.pass_(31.0)
    refusal = skew.times().refusal
    assert refusal is not None and "old" in refusal
    call(skew, clocks, clocks.wall)
    assert skew.times().refusal is None  # an answer refreshed it
    clocks.wall += 5.0  # stepped: the estimate no longer holds until the next answer
    assert skew.times().refusal == "the clock was stepped since DynamoDB last answered"
    assert UNTRUSTED * 1000 <= 1  # the condition's ``#lease < :now_ms`` passes a zero lease only


def test_a_clock_that_stood_still_since_the_answer_is_not_taken_as_stepped() -> None:
    # A test's frozen clock (a guard on the engine's frozen clock): the wall clock stands while
    # the monotonic one runs. Nothing moved against DynamoDB's clock as it was read, so the
    # estimate holds; moved (the test advanced it), it is a step, and the next answer says.
    clocks = Clocks()
    skew = skew_of(clocks)
    call(skew, clocks, T0)
    clocks.mono += 0.5  # real time passes, the frozen clock does not move
    assert skew.times().refusal is None and skew.estimate() is not None
    clocks.wall += 31.0  # the test advances the frozen clock
    assert skew.times().refusal == "the clock was stepped since DynamoDB last answered"
    call(skew, clocks, clocks.wall)  # the engine's clock moved too: its answer says so
    clocks.mono += 0.5
    assert skew.times().refusal is None


def test_a_blind_first_write_is_short_only_when_the_clock_is_behind_for_sure() -> None:
    def after_one_answer(server_ahead: float, **policy: Any) -> ClockSkew:
        clocks = Clocks()
        skew = skew_of(clocks, **policy)
        assert skew.blind
        call(skew, clocks, T0 + server_ahead, rtt=0.1)
        return skew

    assert after_one_answer(3.0).wrote_short()  # offset in [2.9, 4]: 3 s short at least
    assert not after_one_answer(0.0).wrote_short()  # offset in [-0.1, 1]: maybe right
    assert not after_one_answer(-3.0).wrote_short()  # ahead: the lease is longer, not short
    assert not after_one_answer(3.0, tolerance=3.0).wrote_short()  # written 3 s long already


def test_a_client_without_date_headers_gets_offset_zero_and_the_tolerance_alone() -> None:
    clocks = Clocks()
    skew = skew_of(clocks, tolerance=0.5)
    skew.observe(answer(None), clocks.wall)
    assert not skew.blind  # nothing to wait for
    assert skew.estimate() == (0.0, 0.5, 0)
    assert skew.times() == (clocks.wall + 0.5, clocks.wall - 0.5, None)
    call(skew, clocks, T0 + 3.0)  # a dated answer after all: it counts
    estimate = skew.estimate()
    assert estimate is not None and estimate.samples == 1


def test_off_means_the_guards_own_clock_and_nothing_observed() -> None:
    clocks = Clocks()
    skew = skew_of(clocks, enabled=False)
    assert not skew.blind and skew.estimate() is None
    assert skew.times() == (clocks.wall, clocks.wall, None)


@pytest.mark.parametrize(
    "policy",
    [
        {"max_offset": 0},
        {"max_offset": -1.0},
        {"max_age": 0},
        {"tolerance": -0.1},
        {"resolution": -1},
        {"drift": -1e-6},
    ],
)
def test_bad_policies_are_refused_at_construction(policy: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="clock_skew"):
        ClockSkewPolicy(**policy)


def test_the_estimate_reaches_every_sink_as_gauges() -> None:
    from prometheus_client import CollectorRegistry

    from firstwrite.idempotency import HookMetrics, MemoryMetrics, MultiMetrics, PrometheusMetrics
    from firstwrite.idempotency._machine.reporting import Reporter

    registry = CollectorRegistry()
    hooked: list[tuple[str, float]] = []
    memory = MemoryMetrics()
    sinks = MultiMetrics(
        [
            PrometheusMetrics(registry=registry),
            HookMetrics(lambda name, value, labels: hooked.append((name, value))),
            memory,
        ]
    )
    clocks = Clocks()
    skew = ClockSkew(
        ClockSkewPolicy(),
        60.0,
        lambda: clocks.wall,
        lambda: clocks.mono,
        Reporter(sinks).clock_estimate,
    )
    call(skew, clocks, T0 + 7.0)
    offset = registry.get_sample_value("firstwrite_clock_offset_seconds")
    assert offset == pytest.approx(7.5)
    assert registry.get_sample_value("firstwrite_clock_offset_uncertainty_seconds") == 0.5
    assert hooked == [
        ("firstwrite_clock_offset_seconds", offset),
        ("firstwrite_clock_offset_uncertainty_seconds", 0.5),
    ]
    assert memory.gauges["firstwrite_clock_offset_seconds"] == offset
    call(skew, clocks, T0 + 7.0)  # the same interval again: no new sample set
    assert len(hooked) == 2
