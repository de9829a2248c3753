"""Leases on DynamoDB's clock: the guard's estimate of how far its own clock is from DynamoDB's.

Every answer from DynamoDB carries a ``Date`` header (whole seconds). A call sent at local time
``s`` and answered at ``r`` with ``Date: D`` was dated by a server whose clock then read between
``D`` and ``D + resolution``, at a local instant between ``s`` and ``r``; so the offset (DynamoDB
minus local) lies in ``[D - r, D + resolution - s]``. :class:`ClockSkew` keeps the intersection
of those intervals over the answers (each older one widened by ``drift`` per second of its age,
all dropped when the clock is stepped; a test's frozen clock, standing still, is not), and
turns it into ``write`` (the latest DynamoDB time it can be: lease ends are written from it)
and ``compare`` (the earliest: stored ends are compared with it). A lease so lasts at least
its length on DynamoDB's clock, and nobody takes it over before it ended on that clock.

An estimate is *trusted* when ``|offset| + uncertainty <= max_offset``; otherwise (and before
any answer, once the last is older than ``max_age``, or once the clock was stepped) a claim's
condition takes no live lease over, and a takeover its answer shows possible is refused with
:class:`~firstwrite.idempotency.errors.ClockSkewError` unless that answer made it trusted. A
guard's first claim is written before any answer: when the answer shows its lease short, it is
renewed at once. Answers without a ``Date`` give no estimate (offset 0, uncertainty
``tolerance``). The rule: docs/guarantees.md, "Clocks".
"""

from __future__ import annotations

import calendar
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .errors import ClockSkewError, ConfigurationError

__all__ = ["ClockSkew", "ClockSkewPolicy", "Estimate", "LeaseTimes", "parse_http_date"]

UNTRUSTED = 0.001
"""The comparison instant of a claim made without a trusted estimate: before every live lease
end (``#lease < 1`` holds only for the zero lease of a retryable failure) and every
retention end, so such a claim takes nothing over."""


@dataclass(frozen=True)
class ClockSkewPolicy:
    """How the guard reads DynamoDB's clock (``IdempotencyConfig.clock_skew``).

    ``enabled``: estimate and apply the offset (``False``: leases on the guard's own clock, as
    before). ``max_offset``: the largest ``|offset| + uncertainty`` trusted for a takeover
    (seconds; ``None``: half the lease). ``max_age``: an estimate whose last answer is older is
    refreshed by a probe before a claim. ``tolerance``: seconds added to the uncertainty always
    (the skew assumed of a client whose answers carry no ``Date``). ``resolution``: the
    ``Date`` header's step (1 s in HTTP). ``drift``: how fast the local clock may drift from
    DynamoDB's between answers (seconds per second; NTP slews at most 500 ppm)."""

    enabled: bool = True
    max_offset: float | None = None
    max_age: float = 60.0
    tolerance: float = 0.0
    resolution: float = 1.0
    drift: float = 500e-6

    def __post_init__(self) -> None:
        if self.max_offset is not None and not self.max_offset > 0:
            raise ConfigurationError("clock_skew.max_offset must be > 0 seconds (or None)")
        if not self.max_age > 0 or self.tolerance < 0 or self.resolution < 0 or self.drift < 0:
            raise ConfigurationError(
                "clock_skew: max_age must be > 0, tolerance, resolution and drift >= 0"
            )


class Estimate(NamedTuple):
    """DynamoDB's clock minus the guard's (``offset``, seconds), give or take ``uncertainty``;
    ``samples``: the answers that narrowed it (0: no ``Date`` seen, the offset is assumed)."""

    offset: float
    uncertainty: float
    samples: int


class LeaseTimes(NamedTuple):
    """The instants of one lease decision, in epoch seconds on DynamoDB's clock: ``write``
    (lease and retention ends are counted from it), ``compare`` (stored ends are compared with
    it), and ``refusal``: why the estimate is not trusted (``None``: it is)."""

    write: float
    compare: float
    refusal: str | None


_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}


def parse_http_date(value: str) -> float | None:
    """Epoch seconds of an IMF-fixdate (``Mon, 07 Dec 2026 13:52:13 GMT``, RFC 9110 5.6.7),
    or ``None`` for anything else."""
    parts = value.split()
    if len(parts) != 6 or parts[5] != "GMT":
        return None
    hms = parts[4].split(":")
    month = _MONTHS.get(parts[2])
    try:
        if month is None or len(hms) != 3:
            return None
        fields = (int(parts[3]), month, int(parts[1]), int(hms[0]), int(hms[1]), int(hms[2]))
    except ValueError:
        return None
    return float(calendar.timegm((*fields, 0, 0, 0)))


_NONE: Mapping[str, Any] = {}
_WORTH = 0.001  # an answer narrowing the offset's interval by less is not kept (seconds)
_STILL = 0.001  # how far the two clocks' difference may move without a step (seconds)
_STEPPED = "the clock was stepped since DynamoDB last answered"


def _times(values: tuple[float, float, str | None]) -> LeaseTimes:
    return tuple.__new__(LeaseTimes, values)


class _State(NamedTuple):
    low: float  # the offset's interval, as of ``at`` (local clock)
    high: float
    at: float
    step: float  # local clock minus monotonic clock at ``at``: a change means a stepped clock
    margin: float  # how far ``step`` may move unstepped: _STILL and half its reading's width
    samples: int


class ClockSkew:
    """One guard's estimate (thread-safe: answers arrive from any thread).

    :meth:`observe` reads an answer's ``Date``; :meth:`times` gives a decision's instants;
    :attr:`blind` and :meth:`wrote_short` tell a first claim whether to renew its lease."""

    def __init__(
        self,
        policy: ClockSkewPolicy,
        lease: float,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        on_estimate: Callable[[float, float], None] | None = None,
    ) -> None:
        self.policy = policy
        self.enabled = policy.enabled
        self.bound = lease / 2 if policy.max_offset is None else policy.max_offset
        self.clock = clock
        self.monotonic = monotonic
        self._on_estimate = on_estimate
        self._lock = threading.Lock()
        self._state: _State | None = None
        self._dateless = False  # answers seen, none dated: the offset is assumed
        self.blind = self.enabled
        """Whether a lease written now is written before any answer told DynamoDB's clock."""
        self._last: tuple[str, float | None] = ("", None)  # the last header parsed
        self._heard = 0.0  # local time of the last dated answer
        self._stepped = False  # the estimate was dropped for a step of the clock
        # the policy's numbers, read on every answer
        self._drift, self._resolution = policy.drift, policy.resolution
        self._tolerance, self._max_age = policy.tolerance, policy.max_age

    # -- answers -----------------------------------------------------------------------------

    def observe(self, answer: Mapping[str, Any], sent: float) -> None:
        """Take the ``Date`` of ``answer`` (a parsed response or an error's ``response``), of
        a call sent at local time ``sent``; an answer without one marks the client dateless
        until one comes."""
        received = self.clock()
        headers = answer.get("ResponseMetadata", _NONE).get("HTTPHeaders")
        date = headers.get("date") if headers else None
        state = self._state
        if date is None:
            if state is None:
                self._dateless = True
                self.blind = False
            return
        last, dated = self._last
        if date != last:
            dated = parse_http_date(date)
            self._last = (date, dated)
        if dated is None:
            return
        low, high = dated - received, dated + self._resolution - sent
        if state is not None:  # the common case: an answer that narrows nothing worth keeping
            self._heard = received
            drifted = self._drift * abs(received - state.at)
            slack = drifted - _WORTH
            if (
                low <= state.low - slack
                and high >= state.high + slack
                and (  # and the clock was not stepped since (one read of each clock, or more)
                    received == state.at
                    or abs(received - self.monotonic() - state.step) <= state.margin + drifted
                    or not self._stepped_since(state, drifted)
                )
            ):
                return
        self.add(low, high, received)  # (after a step: the estimate starts again from it)

    def add(self, low: float, high: float, at: float) -> None:
        """Narrow the estimate with one answer's interval ``[low, high]`` taken at local ``at``."""
        policy = self.policy
        step, width = self._step()
        with self._lock:
            old = self._state
            count = 1
            slack = 0.0 if old is None else policy.drift * abs(at - old.at)
            if old is not None and abs(step - old.step) <= old.margin + width / 2 + slack:
                joined_low, joined_high = max(low, old.low - slack), min(high, old.high + slack)
                if joined_low <= joined_high:  # else: the clock moved, start again
                    low, high, count = joined_low, joined_high, old.samples + 1
            self._state = new = _State(low, high, at, step, _STILL + width / 2, count)
            self._dateless = False
            self.blind = False
            self._stepped = False
            self._heard = at
        if self._on_estimate is not None and (
            old is None or abs((old.low + old.high) - (low + high)) > 0.002
        ):
            estimate = self._estimate(new, at)
            self._on_estimate(estimate.offset, estimate.uncertainty)

    # -- decisions ---------------------------------------------------------------------------

    def _estimate(self, state: _State, now: float) -> Estimate:
        slack = self.policy.drift * abs(now - state.at)
        low, high = state.low - slack, state.high + slack
        return Estimate((low + high) / 2, (high - low) / 2 + self.policy.tolerance, state.samples)

    def estimate(self) -> Estimate | None:
        """The estimate now; ``None`` before any answer (or with the estimate off), an
        offset of 0 with ``samples=0`` from a client whose answers carry no ``Date``."""
        state = self._state
        if not self.enabled or (state is None and not self._dateless):
            return None
        if state is None:
            return Estimate(0.0, self.policy.tolerance, 0)
        return self._estimate(state, self.clock())

    def wrote_short(self) -> bool:
        """After a blind write's answer: whether the estimate shows this clock behind
        DynamoDB's by more than ``tolerance`` for sure, so the lease written is short."""
        state = self._state
        if state is None:
            return False
        slack = self.policy.drift * abs(self.clock() - state.at)
        return state.low - slack > self.policy.tolerance

    def _step(self) -> tuple[float, float]:
        """The local clock minus the monotonic one now, and how far that reading may be off:
        the process can be descheduled between two clocks' reads (on a loaded machine), so
        the clock is read between two monotonic reads, up to three times, and the narrowest
        reading kept."""
        monotonic, clock = self.monotonic, self.clock
        best = (0.0, float("inf"))
        for _ in range(3):
            before = monotonic()
            now = clock()
            after = monotonic()
            if after - before < best[1]:
                best = (now - (before + after) / 2, after - before)
                if best[1] <= 0.0002:
                    break
        return best

    def _stepped_since(self, state: _State, drifted: float) -> bool:
        """Whether the clock was stepped (moved against the monotonic one by more than
        ``drifted``, the drift allowed, and the readings' error) since ``state``'s answer, once
        one read of each clock said so: read carefully, for that may have been a pause between
        the two reads. (A clock that stood still since, a test's frozen clock, is never asked.)"""
        step, width = self._step()
        return abs(step - state.step) > state.margin + drifted + width / 2

    def times(self) -> LeaseTimes:
        """The instants of a lease decision made now (see :class:`LeaseTimes`)."""
        now = self.clock()
        if not self.enabled:
            return _times((now, now, None))
        state = self._state
        if state is not None:
            slack = self._drift * abs(now - state.at)
            if (
                now != state.at
                and abs(now - self.monotonic() - state.step) > state.margin + slack
                and self._stepped_since(state, slack)
            ):
                state = self._state = None  # stepped: the estimate no longer holds
                self._stepped = True
        if state is None:
            widen = self._tolerance
            if self._dateless:
                return _times((now + widen, now - widen, None))
            reason = _STEPPED if self._stepped else "no answer from DynamoDB dated yet"
            return _times((now + widen, now - widen, reason))
        low, high = state.low - slack, state.high + slack
        offset, uncertainty = (low + high) / 2, (high - low) / 2 + self._tolerance
        refusal = None
        if abs(offset) + uncertainty > self.bound:
            refusal = (
                f"this clock is {offset:+.3f}s (+-{uncertainty:.3f}s) off DynamoDB's, more than "
                f"the {self.bound:.3f}s trusted (clock_skew.max_offset)"
            )
        elif now - self._heard > self._max_age:
            refusal = f"the estimate is {now - self._heard:.0f}s old (clock_skew.max_age)"
        return _times((now + offset + uncertainty, now + offset - uncertainty, refusal))

    def refused(self, key: str, record_id: str, reason: str) -> ClockSkewError:
        """The error of a takeover refused for ``reason`` (:meth:`times`)."""
        estimate = self.estimate()
        return ClockSkewError(
            key,
            reason,
            offset=None if estimate is None else estimate.offset,
            uncertainty=None if estimate is None else estimate.uncertainty,
            bound=self.bound,
            record_id=record_id,
        )
