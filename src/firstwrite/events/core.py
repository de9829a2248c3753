"""The broker-agnostic core: every record of a batch guarded on its own idempotency key.

:class:`Consumer` claims a record's key before its handler runs, completes the claim with the
handler's result, or fails it: retryably, or for good once ``max_attempts`` runs failed
(:mod:`.attempts`) or the record is invalid. Each record ends with a
:class:`~.results.RecordOutcome` that says whether the broker may forget it (``acknowledged``:
it ran now, it ran before, or it was given up for good with its reason logged) or must deliver
it again (it failed, it is running elsewhere, it was not tried). Nothing is acknowledged before
it ran. A record whose earlier run marked recovery points and died is settled by the
``reconcile`` hook (docs/recovery.md); without one it is refused and delivered again.

:class:`~.results.Ordering` says what a failure does to the records after it (SQS standard
queues: nothing; FIFO: its group waits; Kinesis, DynamoDB Streams: the batch stops).
:func:`consume` is the whole thing for any broker; the sources are thin adapters over it.

Every outcome is counted in ``firstwrite_event_records_total{source, outcome}`` (the guard's
metrics sink unless one is given) and logged on logger ``firstwrite.events``. A guard built
with ``FIRSTWRITE_IDEMPOTENCY_DISABLED`` claims nothing: each handler just runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from firstwrite.idempotency import (
    UNSET,
    Claim,
    CompletionNotRecordedError,
    InProgressError,
    LateRetryError,
    LostClaimError,
    Metrics,
    MissingKeyError,
    PayloadMismatchError,
    RecoveryFailedError,
    RecoveryRequiredError,
    Replay,
    SerializationError,
)
from firstwrite.idempotency.recovery import AnyHook, check_blocking, reconciling_with

from ._driving import drive
from .attempts import AttemptLedger
from .guard import AnyEventGuard, EventGuard, sync_guard
from .results import LEVELS, BatchResult, Ordering, RecordOutcome, RecordResult
from .steps import (
    ClaimKey,
    CompleteClaim,
    FailClaim,
    Keepalive,
    Ran,
    ReadReplays,
    RunHandler,
    RunUnguarded,
    Steps,
)

__all__ = [
    "BatchResult",
    "Consumer",
    "Keepalive",
    "Ordering",
    "RecordOutcome",
    "RecordResult",
    "consume",
]

R = TypeVar("R")

LOG = logging.getLogger("firstwrite.events")
METRIC = "firstwrite_event_records_total"


@dataclass
class Consumer(Generic[R]):
    """Guards records of type ``R`` with ``guard``: see the module's docstring.

    * ``key(record)``: the record's idempotency key; ``id(record)``: what the broker calls it
      (a partial batch response's ``itemIdentifier``; default: the key).
    * ``payload(record)``: what is fingerprinted (a key arriving with another payload is a
      mismatch, not a duplicate); ``None``: no check.
    * ``group(record)``: the ordering group under :attr:`Ordering.GROUPS`.
    * ``validate(record)``: raises for a record that can never be handled; it is given up at
      once (FAILED final, acknowledged) with the error as its reason.
    * ``max_attempts``: failed or abandoned runs before a record is given up.
    * ``non_retryable``: exception types that give a record up at their first occurrence
      (so does an exception with ``idempotency_retryable = False``).
    * ``min_time``: with a deadline, a record is not started with less time than this left.
    * ``redelivered(record)``: true for a record the broker delivers again (SQS:
      ``ApproximateReceiveCount > 1``). A batch's redelivered records are read first, in one
      consistent ``BatchGetItem``; those stored done are replayed without a claim each, the
      others claimed as usual. First deliveries never pay for the read.
    * ``reconcile``: decides for a record whose earlier run marked recovery points
      (:func:`~firstwrite.idempotency.recovery_point`) and died (default: the guard's hook).

    ``guard`` may be an asyncio guard (:class:`~.guard.AsyncEventGuard`): then drive it with
    :class:`.aio.AsyncConsumer`; :meth:`consume` and :meth:`process` need a synchronous one.
    """

    guard: AnyEventGuard
    key: Callable[[R], str]
    source: str = "custom"
    id: Callable[[R], str] | None = None
    payload: Callable[[R], object] | None = None
    group: Callable[[R], str | None] | None = None
    ordering: Ordering = Ordering.INDEPENDENT
    validate: Callable[[R], object] | None = None
    max_attempts: int = 3
    non_retryable: tuple[type[BaseException], ...] = ()
    scope: str | None = None
    metrics: Metrics | None = None
    min_time: float = 1.0
    redelivered: Callable[[R], bool] | None = None
    logger: logging.Logger = field(default=LOG)
    reconcile: AnyHook | None = None
    attempts: AttemptLedger = field(init=False, repr=False)
    _metrics: Metrics = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.ordering is Ordering.GROUPS and self.group is None:
            raise ValueError("Ordering.GROUPS needs group=")
        if not self.guard.is_async:  # a coroutine hook needs an asyncio guard's driver
            check_blocking(self.reconcile)
        self.attempts = AttemptLedger(self.guard, self.max_attempts, self.scope)
        self._metrics = self.metrics if self.metrics is not None else self.guard.metrics

    # -- with a synchronous guard ------------------------------------------------------------

    def consume(
        self,
        records: Iterable[R],
        handler: Callable[[R], object],
        *,
        remaining: Callable[[], float] | None = None,
        keepalive: Callable[[R], Keepalive | None] | None = None,
    ) -> BatchResult:
        """Handle ``records`` in order under :attr:`ordering`. ``remaining()`` is the time left
        (seconds) to the deadline: each claim's lease is capped at it, and a record is not
        started with less than ``min_time`` left (it, and every record after it, is skipped)."""
        steps = self.batch_steps(records, remaining=remaining, keepalive=keepalive)
        with reconciling_with(self.reconcile):
            return drive(steps, sync_guard(self.guard), handler)

    def process(
        self,
        record: R,
        handler: Callable[[R], object],
        *,
        lease: float | None = None,
        keepalive: Keepalive | None = None,
    ) -> RecordResult:
        """Claim the record's key, run ``handler(record)``, record what happened. The claim's
        lease is ``lease``, else the keepalive's, else the guard's."""
        steps = self.record_steps(record, lease=lease, keepalive=keepalive)
        with reconciling_with(self.reconcile):
            return drive(steps, sync_guard(self.guard), handler)

    # -- the decisions, for any driver (see .steps) ------------------------------------------

    def batch_steps(
        self,
        records: Iterable[R],
        *,
        remaining: Callable[[], float] | None = None,
        keepalive: Callable[[R], Keepalive | None] | None = None,
    ) -> Steps[BatchResult]:
        """:meth:`consume`'s decisions, as effects."""
        results: list[RecordResult] = []
        blocked: set[str | None] = set()
        stopped = False
        known: dict[int, Replay] = {}
        if self.redelivered is not None and not self.guard.config.disabled:
            records = list(records)
            known = yield from self._stored_replays(records, self.redelivered)
        for index, record in enumerate(records):
            group = self.group(record) if self.ordering is Ordering.GROUPS and self.group else None
            lease: float | None = None
            if not stopped and remaining is not None:
                left = remaining()
                if left < self.min_time:
                    stopped = True
                else:
                    lease = min(float(self.guard.config.lease), left)
            if stopped or group in blocked:
                why = "an earlier record of its group is not done" if not stopped else None
                results.append(self._skip(record, why or "not started: no time left"))
                continue
            if index in known:
                result = self._replayed(record, known[index])
            else:
                result = yield from self.record_steps(
                    record, lease=lease, keepalive=keepalive(record) if keepalive else None
                )
            results.append(result)
            if not result.acknowledged:
                if self.ordering is Ordering.STREAM:
                    stopped = True
                elif self.ordering is Ordering.GROUPS:
                    blocked.add(group)
        return BatchResult(results, self.ordering)

    def _stored_replays(
        self, records: list[R], redelivered: Callable[[R], bool]
    ) -> Steps[dict[int, Replay]]:
        """The replays of the redelivered ``records`` that are stored done, by index."""
        indices: list[int] = []
        requests: list[tuple[str, object]] = []
        for index, record in enumerate(records):
            try:
                if redelivered(record):
                    payload = UNSET if self.payload is None else self.payload(record)
                    requests.append((self.key(record), payload))
                    indices.append(index)
            except Exception:
                continue  # its claim says what is wrong with it
        if not requests:
            return {}
        try:
            answers = yield ReadReplays(tuple(requests), self.scope)
        except Exception:  # the claims decide instead
            self.logger.warning(
                "could not read %d redelivered records", len(requests), exc_info=True
            )
            return {}
        return {i: r for i, r in zip(indices, answers, strict=True) if r is not None}

    def _replayed(self, record: R, replay: Replay) -> RecordResult:
        key = replay.idempotency_key
        if replay.completed:
            return self._done(record, key, RecordOutcome.REPLAYED)
        return self._done(record, key, RecordOutcome.REPLAYED_FAILURE, reason=replay.error)

    def _skip(self, record: R, reason: str) -> RecordResult:
        return self._done(record, None, RecordOutcome.SKIPPED, reason=reason)

    def record_steps(
        self, record: R, *, lease: float | None = None, keepalive: Keepalive | None = None
    ) -> Steps[RecordResult]:
        """:meth:`process`'s decisions, as effects."""
        if lease is None and keepalive is not None:
            lease = keepalive.lease
        if self.guard.config.disabled:  # FIRSTWRITE_IDEMPOTENCY_DISABLED: run, record nothing
            try:
                result = yield RunUnguarded(record)
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                return self._done(record, None, RecordOutcome.FAILED, reason=reason)
            return self._done(record, None, RecordOutcome.PROCESSED, result=result)
        try:
            key = self.key(record)
            payload = UNSET if self.payload is None else self.payload(record)
        except (MissingKeyError, KeyError, ValueError, TypeError) as exc:
            return self._done(record, None, RecordOutcome.INVALID, reason=f"no key: {exc!r}")
        try:
            outcome = yield ClaimKey(key, payload, self.scope, lease)
        except InProgressError as busy:
            reason = f"in progress elsewhere; retry after {busy.retry_after:g} s"
            return self._done(record, key, RecordOutcome.IN_PROGRESS, reason=reason)
        except PayloadMismatchError:
            reason = "the key was first used with another payload"
            return self._done(record, key, RecordOutcome.MISMATCH, reason=reason)
        except LateRetryError:
            return self._done(record, key, RecordOutcome.REPLAYED, reason="late retry refused")
        except RecoveryRequiredError as refused:  # no hook: left PENDING for one that has one
            marks = ", ".join(p.step for p in refused.points)
            reason = f"recovery required: an earlier run marked {marks}; no reconcile hook"
            return self._done(record, key, RecordOutcome.FAILED, reason=reason)
        except RecoveryFailedError as failed:  # the hook answered FailedFinally: stored FAILED
            return self._done(record, key, RecordOutcome.FAILED_FINAL, reason=failed.reason)
        except Exception as exc:  # DynamoDB unreachable: nothing ran, try again later
            return self._done(record, key, RecordOutcome.FAILED, reason=f"claim: {exc!r}")
        if isinstance(outcome, Replay):
            return self._replayed(record, outcome)
        claim: Claim = outcome
        if claim.taken_over:
            n = yield from self.attempts.note_steps(
                key, "abandoned: a run stopped before it finished"
            )
            if n >= self.max_attempts:
                why = f"gave up after {n} attempts: the last runs stopped before finishing"
                return (yield from self._give_up(record, key, claim, why, n))
        if self.validate is not None:
            try:
                self.validate(record)
            except Exception as exc:
                return (yield from self._give_up(record, key, claim, f"invalid record: {exc!r}", 0))
        ran: Ran = yield RunHandler(record, claim, keepalive)
        claim = ran.claim
        if isinstance(ran.error, Exception):
            return (yield from self._failed(record, key, claim, ran.error))
        if ran.error is not None:  # interrupted: free the key for the redelivery
            yield FailClaim(claim, ran.error, retryable=True)
            raise ran.error
        try:
            yield CompleteClaim(claim, ran.result)
        except LostClaimError:
            why = "ran, but another consumer took the claim over: its result is the one kept"
            return self._done(record, key, RecordOutcome.LOST, reason=why)
        except CompletionNotRecordedError as exc:
            return self._done(record, key, RecordOutcome.LOST, reason=f"not recorded: {exc}")
        except SerializationError as exc:  # the layer stored it FAILED for good
            return self._done(record, key, RecordOutcome.FAILED_FINAL, reason=repr(exc))
        return self._done(record, key, RecordOutcome.PROCESSED, result=ran.result)

    def _failed(self, record: R, key: str, claim: Claim, exc: Exception) -> Steps[RecordResult]:
        reason = f"{type(exc).__name__}: {exc}"
        final = isinstance(exc, self.non_retryable) or (
            getattr(exc, "idempotency_retryable", True) is False
        )
        try:
            n = yield from self.attempts.note_steps(key, reason)
        except Exception:  # the count could not be written: the record stays retryable
            self.logger.warning("could not count a failed attempt of %s", key, exc_info=True)
            n = 0
        if final or n >= self.max_attempts:
            why = reason if final else f"gave up after {n} attempts; last: {reason}"
            return (yield from self._give_up(record, key, claim, why, n, exc))
        try:
            yield FailClaim(claim, exc, retryable=True, data={"attempts": n})
        except LostClaimError:
            pass  # another consumer took it over: it is theirs now
        return self._done(record, key, RecordOutcome.FAILED, reason=reason, attempts=n)

    def _give_up(
        self,
        record: R,
        key: str,
        claim: Claim,
        reason: str,
        attempts: int,
        exc: BaseException | None = None,
    ) -> Steps[RecordResult]:
        error: BaseException | str = exc if exc is not None else reason
        try:
            yield FailClaim(
                claim, error, retryable=False, data={"attempts": attempts, "reason": reason}
            )
        except LostClaimError:
            why = "another consumer took the claim over before it was given up"
            return self._done(record, key, RecordOutcome.LOST, reason=why)
        return self._done(record, key, RecordOutcome.FAILED_FINAL, reason=reason, attempts=attempts)

    def _done(
        self,
        record: R,
        key: str | None,
        outcome: RecordOutcome,
        *,
        result: object = None,
        reason: str | None = None,
        attempts: int = 0,
    ) -> RecordResult:
        try:
            rid = self.id(record) if self.id is not None else (key or "?")
        except (KeyError, TypeError):
            rid = key or "?"
        if self._metrics.enabled:
            self._metrics.count(METRIC, source=self.source, outcome=outcome.value)
        level = LEVELS[outcome]
        if self.logger.isEnabledFor(level):
            self.logger.log(
                level,
                "%s record %s: %s%s",
                self.source,
                rid,
                outcome.value,
                f" ({reason})" if reason else "",
                extra={
                    "event_source": self.source,
                    "record_id": rid,
                    "idempotency_key": key,
                    "outcome": outcome.value,
                    "reason": reason,
                    "attempts": attempts,
                },
            )
        return RecordResult(rid, key, outcome, result, reason, attempts)


def consume(
    records: Iterable[R],
    handler: Callable[[R], object],
    *,
    guard: EventGuard,
    key: Callable[[R], str],
    id: Callable[[R], str] | None = None,
    payload: Callable[[R], object] | None = None,
    ordering: Ordering = Ordering.INDEPENDENT,
    group: Callable[[R], str | None] | None = None,
    max_attempts: int = 3,
    source: str = "custom",
    remaining: Callable[[], float] | None = None,
    validate: Callable[[R], object] | None = None,
    scope: str | None = None,
    metrics: Metrics | None = None,
    reconcile: AnyHook | None = None,
) -> BatchResult:
    """Handle a batch from any broker: :class:`Consumer` (same arguments) then
    :meth:`Consumer.consume`. Build a :class:`Consumer` once instead for a long-lived loop."""
    consumer: Consumer[R] = Consumer(
        guard,
        key,
        source=source,
        id=id,
        payload=payload,
        group=group,
        ordering=ordering,
        max_attempts=max_attempts,
        validate=validate,
        scope=scope,
        metrics=metrics,
        reconcile=reconcile,
    )
    return consumer.consume(records, handler, remaining=remaining)
