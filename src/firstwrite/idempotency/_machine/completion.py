"""The completion: recording a result after the side effect ran, through failures that may pass.

A transition over a :class:`~.machine.StateMachine`, like those of :mod:`.transactional`. The
side effect has happened, so a write that fails for a reason that may pass (throttling, 5xx, a
lost connection) is tried again, with the claim's lease renewed meanwhile so that nobody takes
the key over, for one lease length and never past the call's budget (the first attempt is
always made); then :class:`~firstwrite.idempotency.errors.CompletionNotRecordedError`, which carries the result.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from .. import serialization
from ..client_errors import error_code, is_sdk_error
from ..effects import PlaceResult, Sleep, Steps
from ..errors import (
    CompletionNotRecordedError,
    DeadlineExceededError,
    ResultTooLargeError,
    SerializationError,
)
from ..outcomes import Claim, Replay, key_of
from ..record import Status
from ..requests import millis
from ..spooled_results import SpooledResult
from ..verdicts import fenced_outcome
from .budget import Deadline
from .retry import backoff, budget_spent, classify

if TYPE_CHECKING:
    from .machine import StateMachine


def complete(
    m: StateMachine, claim: Claim, result: Any, answer: bool, deadline: Deadline | None
) -> Steps[Replay | None]:
    """Record ``result`` for ``claim`` (see the module docstring); the :class:`Replay` of it
    when ``answer`` is true or the local cache keeps one, else ``None``."""
    key = key_of(claim)
    if m.placement is None:  # no result store, no cipher: no generator of their own
        try:
            value = encode_result(m, claim, result)
        except SerializationError as exc:
            yield from m.fail(claim, exc, retryable=False, data=None, deadline=deadline)
            raise
    else:
        value = yield from stored_value(m, claim, result, deadline)
    if m.migration is not None:  # a key-scheme change's window: the old keys first
        yield from m.migration.complete(claim, result, value, deadline)
    lease = m.config.lease
    started = m.monotonic()
    attempt = 0
    unanswered: int | None = None  # the version a renewal of ours left unanswered
    while True:
        call = m.requests.complete(claim.key, claim.owner, claim.version, value)
        try:
            ok, old = yield from m.conditional(call, key, claim.record_id, deadline)
        except Exception as exc:
            budget_out = isinstance(exc, DeadlineExceededError)
            if not (budget_out or is_sdk_error(exc)):
                raise
            spent = m.monotonic() - started
            code = (
                exc.dynamo_error_code if isinstance(exc, DeadlineExceededError) else error_code(exc)
            )
            if budget_out or classify(exc) is None or spent >= lease:
                raise _not_recorded(m, claim, result, spent, code, budget_out) from exc
            attempt += 1
            m.report.completion_retry(key, claim.record_id, code, attempt)
            renewed = yield from _keep_lease(m, claim, lease, deadline)
            if renewed is None:
                unanswered = claim.version
            else:
                claim = renewed
            delay = min(backoff(m.config.retry, attempt, m.rng), lease - spent)
            if deadline is not None and deadline.left() <= delay:  # past the budget
                cause = budget_spent(
                    call.operation, code, delay, key, claim.record_id, deadline, m.report
                )
                raise _not_recorded(m, claim, result, spent, code, True) from cause
            yield Sleep(delay)
            continue
        if ok:
            break
        old = yield from m.refused_item(old, claim.key, key, claim.record_id, deadline)
        rec = None if old is None else m.read(old)
        if fenced_outcome(rec, claim, Status.COMPLETED):
            break  # our own completion, whose answer was lost
        if (
            unanswered is not None
            and rec is not None
            and rec.owner == claim.owner
            and rec.status is Status.PENDING
            and rec.version == unanswered + 1
        ):
            # The renewal made above applied though its answer was lost: go on from it.
            claim = replace(claim, version=rec.version, lease_expires_at=rec.lease_expires_at or 0)
            unanswered = None
            continue
        raise m.lost(claim, rec, "complete")
    if answer or m.cache is not None:
        return m.completed(claim, value)
    return None


def stored_value(
    m: StateMachine, claim: Claim, result: Any, deadline: Deadline | None
) -> Steps[dict[str, Any]]:
    """The AttributeValue to record for ``result`` (:func:`placed`); a result that cannot be
    stored (not serialisable, too big with no result store) fails the key for good and is
    raised."""
    try:
        return (yield from placed(m, claim, result, encode_result(m, claim, result)))
    except SerializationError as exc:
        yield from m.fail(claim, exc, retryable=False, data=None, deadline=deadline)
        raise


def placed(
    m: StateMachine, claim: Claim, result: Any, value: dict[str, Any]
) -> Steps[dict[str, Any]]:
    """``value`` (``result``'s stored form), sealed and/or moved to the result store when one
    is configured (:class:`~firstwrite.idempotency.effects.PlaceResult`). A store or cipher that fails (the work
    ran) raises :class:`~firstwrite.idempotency.errors.CompletionNotRecordedError` with the
    result."""
    effect = place(m, claim, value)
    if effect is None:
        return value
    started = m.monotonic()
    try:
        answer: dict[str, Any] = yield effect
        if m.layout.explicit:  # seed 001's resultId is always a string
            answer = serialization.as_text(answer)
    except SerializationError:
        raise
    except Exception as exc:
        spent = m.monotonic() - started
        raise _not_recorded(m, claim, result, spent, type(exc).__name__, False) from exc
    return answer


def encode_result(m: StateMachine, claim: Claim, result: Any) -> dict[str, Any]:
    """The plain stored form of ``result`` (:func:`firstwrite.idempotency.serialization.encode`); one too big
    for the record raises :class:`~firstwrite.idempotency.errors.ResultTooLargeError`, unless a result store
    is configured (:func:`place` then moves it there)."""
    cfg = m.config
    if m.status_only:
        result = {
            "status": Status.COMPLETED.value,
            "idempotency_key": key_of(claim),
            "record_id": claim.record_id,
        }
    value = serialization.encode(
        result, threshold=cfg.compress_threshold, level=cfg.compression_level
    )
    if isinstance(value.get("B"), SpooledResult) and (
        m.placement is None or m.placement.store is None
    ):
        value = {"B": value["B"].read()}  # no store to stream it to: the record holds it
    if m.layout.explicit and m.placement is None:  # seed 001's resultId is always a string
        value = serialization.as_text(value)
    size = serialization.value_size(value)
    if size > cfg.max_item_size - 4096:  # only near the limit is the exact size worth it
        total = size + cfg.max_item_size - room(m, claim)
        if total > cfg.max_item_size and (m.placement is None or m.placement.store is None):
            raise ResultTooLargeError(key_of(claim), total, cfg.max_item_size)
    return value


def room(m: StateMachine, claim: Claim) -> int:
    """How many bytes ``claim``'s record has for its result's value."""
    item = m.requests.claim_item(claim.key, claim.owner, claim.fingerprint, 0.0, 0.0)
    # the attribute's name, the other attributes, and room for their digits to grow
    used = len(m.layout.result) + serialization.item_size(item) + 24
    return m.config.max_item_size - used


def place(m: StateMachine, claim: Claim, value: dict[str, Any]) -> PlaceResult | None:
    """The effect that seals and/or stores ``value`` elsewhere, or ``None`` when no
    result store or cipher is configured (``value`` is then recorded as it is)."""
    if m.placement is None:
        return None
    half = m.config.max_item_size // 2
    # The rest of a record (key, owner, numbers) takes a few KB at most, so with DynamoDB's
    # limit a value up to a quarter of it, sealed (+ at most 64 KB), fits in half of it
    # whatever the record holds: the exact room (an item built and measured) is a lower bound
    # worth its cost only above that.
    small = half >= 150_000 and serialization.value_size(value) <= half // 2
    space = half if small else room(m, claim)
    return PlaceResult(m.placement, value, claim.record_id, claim.owner, space)


def answered(
    m: StateMachine, claim: Claim, result: Any, deadline: Deadline | None
) -> Steps[Replay]:
    """:func:`complete`, answering the :class:`Replay` of what it stored."""
    return cast(Steps[Replay], complete(m, claim, result, True, deadline))


def _not_recorded(
    m: StateMachine, claim: Claim, result: Any, spent: float, code: str, budget_out: bool
) -> CompletionNotRecordedError:
    """The completion's give-up, reported: after ``spent`` seconds, the last error
    ``code``, and whether the call's budget (rather than the lease) ran out."""
    if budget_out:
        code = f"{code}, budget spent"
    m.report.completion_not_recorded(key_of(claim), claim.record_id, code, spent)
    return CompletionNotRecordedError(
        key_of(claim),
        result,
        claim,
        tried_for=spent,
        lease_expires_at=claim.lease_expires_at / 1000,
        reason=code,
        record_id=claim.record_id,
    )


def _keep_lease(
    m: StateMachine, claim: Claim, lease: float, deadline: Deadline | None
) -> Steps[Claim | None]:
    """Renew ``claim`` when less than half a lease is left, so that nobody takes the key
    over while its completion is retried. ``None``: the renewal failed (logged by the retry
    loop; it may have been applied all the same)."""
    if claim.lease_expires_at - millis(m.skew.times().write) >= lease * 500:
        return claim
    try:
        return (yield from m.renew(claim, lease, deadline))
    except Exception as exc:
        if not (is_sdk_error(exc) or isinstance(exc, DeadlineExceededError)):
            raise
        return None
