"""Variant 3's transitions.

The claim, or the completion, in one ``TransactWriteItems`` with the caller's business writes. Generators of effects over a :class:`~.machine.StateMachine`, like its
own transitions; a cancelled transaction is read item by item by :mod:`.cancellation`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from .. import requests as q
from ..client_errors import response_of
from ..effects import Call, Sleep, Steps
from ..errors import (
    BusinessConditionFailedError,
    ItemCollectionSizeLimitError,
    TooManyTransactItemsError,
    TransactionCancelledError,
    TransactionConflictError,
    TransactionValidationError,
)
from ..outcomes import Claim, Outcome, Replay, key_of
from ..record import Status
from ..verdicts import Verdict, fenced_outcome
from .budget import Deadline
from .cancellation import Cancellation, Kind, read
from .completion import encode_result, placed
from .machine import StateMachine
from .retry import backoff, budget_spent

# Top-level errors that say "another transaction holds an item": retried by the retry policy,
# then the documented TransactionConflictError.
_CONFLICT_CODES = frozenset({"TransactionConflictException", "TransactionInProgressException"})


def transact(
    m: StateMachine, call: Call, key: str, record_id: str, deadline: Deadline | None = None
) -> Steps[list[dict[str, Any]] | None]:
    """Run one TransactWriteItems: ``None`` when applied, else its cancellation reasons."""
    try:
        yield from m.call(call, key, record_id, deadline)
    except Exception as exc:
        response = response_of(exc)
        if response is None:
            raise
        code = response["Error"].get("Code")
        if code == "TransactionCanceledException":
            reasons = response.get("CancellationReasons")
            return list(reasons) if isinstance(reasons, list) else []
        if code in _CONFLICT_CODES:
            raise TransactionConflictError(key, [], record_id=record_id) from exc
        raise
    return None


def _settle(
    m: StateMachine,
    cancelled: Cancellation,
    key: str,
    record_id: str,
    attempt: int,
    deadline: Deadline | None,
) -> Steps[int]:
    """Everything but the layer's own failed condition: raise the error it means, or (for
    conflicts and throttling) sleep before the next attempt, whose number is returned."""
    reasons = cancelled.reasons
    if cancelled.kind is Kind.VALIDATION:
        raise TransactionValidationError(key, reasons, record_id=record_id)
    if cancelled.kind is Kind.BUSINESS:
        raise BusinessConditionFailedError(key, cancelled.business, record_id=record_id)
    if cancelled.kind is Kind.SIZE:
        raise ItemCollectionSizeLimitError(key, reasons, record_id=record_id)
    if cancelled.kind is not Kind.TRANSIENT:
        raise TransactionCancelledError(key, reasons, record_id=record_id)
    attempt += 1
    if attempt >= m.config.retry.max_attempts:
        raise TransactionConflictError(key, reasons, record_id=record_id)
    delay = backoff(m.config.retry, attempt, m.rng)
    if deadline is not None and deadline.left() <= delay:
        code = next(
            (str(r.get("Code")) for r in reasons if r.get("Code") not in (None, "None")), ""
        )
        raise budget_spent(
            "TransactWriteItems",
            code or "TransactionCanceledException",
            delay,
            key,
            record_id,
            deadline,
            m.report,
        )
    yield Sleep(delay)
    return attempt


def _fits(key: str, transact_items: Sequence[dict[str, Any]], operation: str) -> None:
    """Refuse, before any call, more items than fit beside the layer's own."""
    if len(transact_items) >= q.MAX_TRANSACT_ITEMS:
        raise TooManyTransactItemsError(
            key, len(transact_items), q.MAX_TRANSACT_ITEMS, operation=operation
        )


def claim_with(
    m: StateMachine,
    key: str,
    transact_items: Sequence[dict[str, Any]],
    payload: Any,
    scope: str | None,
    lease: float | None,
    deadline: Deadline | None = None,
) -> Steps[Outcome]:
    _fits(key, transact_items, "claim_with")
    dkey, record_id = m.keys.key(key, scope)
    fp = m.fingerprint_of(payload)
    requests = m.requests
    attempt = 0
    seen: str | None = None  # replacing a record past retention (or a tombstone) as seen
    while True:
        trying, item, now = m.new_claim(key, record_id, dkey, fp, lease)
        own = (
            requests.transact_claim(item, fp, now)
            if seen is None
            else requests.transact_replace_claim(item, seen)
        )
        call = requests.transact([own, *transact_items], trying.owner)
        reasons = yield from transact(m, call, key, record_id, deadline)
        if reasons is None:
            return m.claimed(trying, None)
        cancelled = read(reasons, "duplicate")
        m.report.cancellation(key, record_id, "claim", reasons, cancelled.labels, cancelled.level)
        if cancelled.kind is not Kind.OWN_CONDITION:
            attempt = yield from _settle(m, cancelled, key, record_id, attempt, deadline)
            continue
        old = cancelled.own_item
        if old is None:
            old = (yield from m.call(requests.get(dkey), key, record_id, deadline)).get("Item")
            if old is None:
                seen = None
                continue
        rec = m.read(old)
        now = m.skew.times().compare
        verdict = m.on_conflict(trying, rec, now)
        if verdict is Verdict.OURS:
            return m.claimed(trying, None)
        if verdict is Verdict.REPLAY:
            return m.replay_of(trying, rec)
        if verdict is Verdict.IN_PROGRESS:
            raise m.in_progress(trying, rec, now)
        if verdict is Verdict.LATE:
            m.late(trying, rec, now, refuse=m.config.refuse_late_retries)
        seen = q.fence(rec.owner, rec.version) if verdict is not Verdict.CLAIMABLE else None


def complete_with(
    m: StateMachine,
    claim: Claim,
    transact_items: Sequence[dict[str, Any]],
    result: Any,
    deadline: Deadline | None = None,
) -> Steps[Replay]:
    key = key_of(claim)
    _fits(key, transact_items, "complete_with")
    value = yield from placed(m, claim, result, encode_result(m, claim, result))
    attempt = 0
    while True:
        own = m.requests.transact_complete(claim.key, claim.owner, claim.version, value)
        call = m.requests.transact([own, *transact_items], uuid.uuid4().hex)
        reasons = yield from transact(m, call, key, claim.record_id, deadline)
        if reasons is None:
            break
        cancelled = read(reasons, "fence")
        m.report.cancellation(
            key, claim.record_id, "complete", reasons, cancelled.labels, cancelled.level
        )
        if cancelled.kind is not Kind.OWN_CONDITION:
            attempt = yield from _settle(m, cancelled, key, claim.record_id, attempt, deadline)
            continue
        stored = cancelled.own_item
        item = yield from m.refused_item(stored, claim.key, key, claim.record_id, deadline)
        rec = None if item is None else m.read(item)
        if fenced_outcome(rec, claim, Status.COMPLETED):
            break
        raise m.lost(claim, rec, "complete")
    return m.completed(claim, value)
