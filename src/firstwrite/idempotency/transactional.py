"""Variant 3's transitions: the claim, or the completion, in one ``TransactWriteItems`` with the
caller's business writes. Generators of effects over a :class:`~.machine.StateMachine`, like its
own transitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from .effects import Call, Sleep, Steps
from .errors import BusinessConditionFailedError, TransactionConflictError
from .machine import StateMachine, Verdict, fenced_outcome
from .outcomes import Attempt, Claim, Outcome, Replay
from .record import Record, Status
from .requests import Item
from .retry import backoff, error_code

_RETRY_CODES = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)


def transient_cancellation(reasons: list[dict[str, Any]]) -> bool:
    """Cancelled only by conflicts or throttling: nothing was written, retrying is safe."""
    codes = {r.get("Code") for r in reasons} - {None, "None"}
    return bool(codes) and codes <= _RETRY_CODES


def split_reasons(
    m: StateMachine, reasons: list[dict[str, Any]]
) -> tuple[Item | None, bool, dict[int, dict[str, Any]]]:
    """``(stored record if the layer's item failed, its condition failed?, business failures
    by caller index)``; counts ``transact_write_cancellation_reason``."""
    first = reasons[0] if reasons else {}
    own_failed = first.get("Code") == "ConditionalCheckFailed"
    business = {
        i - 1: reason
        for i, reason in enumerate(reasons)
        if i > 0 and reason.get("Code") not in (None, "None")
    }
    m.report.cancellation(reasons)
    return first.get("Item"), own_failed, business


def transact(m: StateMachine, call: Call, key: str) -> Steps[list[dict[str, Any]] | None]:
    """Run one TransactWriteItems: ``None`` when applied, else its cancellation reasons."""
    try:
        yield from m.call(call, key)
    except ClientError as exc:
        if error_code(exc) != "TransactionCanceledException":
            raise
        reasons = exc.response.get("CancellationReasons")
        return list(reasons) if isinstance(reasons, list) else []
    return None


def claim_with(
    m: StateMachine,
    key: str,
    transact_items: Sequence[dict[str, Any]],
    payload: Any,
    scope: str | None,
    lease: float | None,
) -> Steps[Outcome]:
    dkey, record_id = m.keys.key(key, scope)
    fp = m.fingerprint_of(payload)
    requests = m.requests
    attempt = 0
    while True:
        trying, item, now = m.new_claim(record_id, dkey, fp, lease)
        own = requests.transact_claim(item, fp, now)
        call = requests.transact([own, *transact_items], trying.owner)
        reasons = yield from transact(m, call, record_id)
        if reasons is None:
            return m.claimed(trying, None)
        old, claim_failed, business = split_reasons(m, reasons)
        if claim_failed:
            if old is None:
                old = (yield from m.call(requests.get(dkey), record_id)).get("Item")
                if old is None:
                    continue
            outcome = _duplicate(m, trying, Record.from_item(old))
            if outcome is None:
                continue
            return outcome
        if business:
            raise BusinessConditionFailedError(record_id, business)
        attempt += 1
        if not transient_cancellation(reasons) or attempt >= m.config.retry.max_attempts:
            raise TransactionConflictError(record_id, reasons)
        yield Sleep(backoff(m.config.retry, attempt, m.rng))


def _duplicate(m: StateMachine, trying: Attempt, rec: Record) -> Outcome | None:
    """What the claim's failed condition means; ``None``: try again."""
    now = m.clock()
    verdict = m.on_conflict(trying, rec, now)
    if verdict is Verdict.OURS:
        return m.claimed(trying, None)
    if verdict is Verdict.REPLAY:
        return m.replay_of(trying, rec)
    if verdict is Verdict.IN_PROGRESS:
        raise m.in_progress(trying, rec, now)
    return None


def complete_with(
    m: StateMachine, claim: Claim, transact_items: Sequence[dict[str, Any]], result: Any
) -> Steps[Replay]:
    value = m.encode_result(claim, result)
    attempt = 0
    while True:
        own = m.requests.transact_complete(claim.key, claim.owner, claim.version, value)
        call = m.requests.transact([own, *transact_items], uuid.uuid4().hex)
        reasons = yield from transact(m, call, claim.record_id)
        if reasons is None:
            break
        old, fence_failed, business = split_reasons(m, reasons)
        if fence_failed:
            rec = None if old is None else Record.from_item(old)
            if fenced_outcome(rec, claim, Status.COMPLETED):
                break
            raise m.lost(claim, rec, "complete")
        if business:
            raise BusinessConditionFailedError(claim.record_id, business)
        attempt += 1
        if not transient_cancellation(reasons) or attempt >= m.config.retry.max_attempts:
            raise TransactionConflictError(claim.record_id, reasons)
        yield Sleep(backoff(m.config.retry, attempt, m.rng))
    return m.completed(claim, value)
