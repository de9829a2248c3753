"""Variant 3's transitions.

The claim, or the completion, in one ``TransactWriteItems`` with the caller's business writes. Generators of effects over a :class:`~.machine.StateMachine`, like its
own transitions; a cancelled transaction is read item by item by :mod:`.cancellation`. Inside a
key migration's window the layer's own items are one per key, the current one and each old one
(:mod:`.migration`): claimed, or completed, in the same transaction. A record whose work
marked recovery points is never replaced by the transaction: refused without a hook, else taken
over alone and reconciled (:mod:`.recovery`), the caller's items committed only on ``NotDone``.
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
from ..outcomes import Attempt, Claim, Outcome, Replay, key_of
from ..record import Record, Status
from ..requests import Item, Key
from ..verdicts import Verdict, fenced_outcome
from . import recovery
from .budget import Deadline
from .cancellation import Cancellation, Kind, read
from .completion import encode_result, placed
from .machine import OldKeysOf, StateMachine
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
    own = cancelled.own
    if cancelled.kind is Kind.VALIDATION:
        raise TransactionValidationError(key, reasons, record_id=record_id, own=own)
    if cancelled.kind is Kind.BUSINESS:
        raise BusinessConditionFailedError(key, cancelled.business, record_id=record_id)
    if cancelled.kind is Kind.SIZE:
        raise ItemCollectionSizeLimitError(key, reasons, record_id=record_id, own=own)
    if cancelled.kind is not Kind.TRANSIENT:
        raise TransactionCancelledError(key, reasons, record_id=record_id, own=own)
    attempt += 1
    if attempt >= m.config.retry.max_attempts:
        raise TransactionConflictError(key, reasons, record_id=record_id, own=own)
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


def _fits(key: str, transact_items: Sequence[dict[str, Any]], operation: str, own: int) -> None:
    """Refuse, before any call, more items than fit beside the layer's ``own``."""
    if len(transact_items) + own > q.MAX_TRANSACT_ITEMS:
        raise TooManyTransactItemsError(
            key, len(transact_items), q.MAX_TRANSACT_ITEMS, operation=operation, own=own
        )


def _refused_record(
    m: StateMachine,
    cancelled: Cancellation,
    current: Key,
    old: OldKeysOf,
    key: str,
    record_id: str,
    deadline: Deadline | None,
) -> Steps[Record | None]:
    """The record under the first own item that refused (the current key's, or an old
    scheme's, read in that scheme's layout); ``None``: nothing stored any more."""
    refused = cancelled.refused or 0
    if refused == 0 or m.migration is None:
        item = yield from m.refused_item(cancelled.own_item, current, key, record_id, deadline)
        return None if item is None else m.read(item)
    return (
        yield from m.migration.stored_record(
            old[refused - 1], cancelled.own_item, key, record_id, deadline
        )
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
    """The claim and ``transact_items`` in one transaction; inside a key migration's window,
    with the claim of each old key too (:meth:`.migration.Migrating.claim_puts`), judged as
    the window's plain claim judges it, and the claim returned holds the old keys. A record
    whose work marked recovery points refuses the claim's condition: without a hook the claim
    is refused (:func:`.recovery.marked`), with one the record is taken over alone, carrying
    its marks, and reconciled first (:func:`_reconciled`)."""
    dkey, record_id = m.keys.key(key, scope)
    migrating = m.migration
    old = () if migrating is None else migrating.window_keys(key, scope, dkey)
    _fits(key, transact_items, "claim_with", 1 + len(old))
    fp = m.fingerprint_of(payload)
    requests = m.requests
    attempt = 0
    # Per own item: replacing a record past retention (or a tombstone) as seen.
    seen: list[str | None] = [None] * (1 + len(old))
    # Per own item: the marked record it holds (current layout), to take over alone as seen,
    # carrying its points, then reconcile.
    marks: list[Item | None] = [None] * (1 + len(old))
    while True:
        trying, item, now = m.new_claim(key, record_id, dkey, fp, lease)
        marked = recovery.merged(m, marks)
        if marked is not None:  # its marks carried in the claim's own items
            item = recovery.carrying(m, item, marked)
        own = [
            requests.transact_claim(item, fp, now)
            if seen[0] is None
            else requests.transact_replace_claim(item, seen[0])
        ]
        if migrating is not None and old:
            own += migrating.claim_puts(old, trying, now, seen[1:], marked)
        business = transact_items if marked is None else ()
        call = requests.transact([*own, *business], trying.owner)
        reasons = yield from transact(m, call, key, record_id, deadline)
        if reasons is None:
            if marked is not None:
                return (yield from _reconciled(m, trying, marked, transact_items, old, deadline))
            return _held(m, m.claimed(trying, None), old)
        cancelled = read(reasons, "duplicate", own=len(own))
        m.report.cancellation(key, record_id, "claim", reasons, cancelled.labels, cancelled.level)
        if cancelled.kind is not Kind.OWN_CONDITION:
            attempt = yield from _settle(m, cancelled, key, record_id, attempt, deadline)
            continue
        refused = cancelled.refused or 0
        stored = cancelled.own_item
        if refused == 0:  # the everyday duplicate comes with its record: no more steps
            stored = yield from m.refused_item(stored, dkey, key, record_id, deadline)
            rec = None if stored is None else m.read(stored)
        else:
            assert migrating is not None  # old keys only inside a migration's window
            was = old[refused - 1]
            stored = yield from migrating.stored_item(was, stored, key, record_id, deadline)
            rec = None if stored is None else migrating.read(was, stored)
        marks[refused] = None
        if rec is None:
            seen[refused] = None
            continue
        if refused and migrating is not None:
            migrating.legacy_hit(old[refused - 1])
        now = m.skew.times().compare
        verdict = m.on_conflict(trying, rec, now)
        if verdict is Verdict.OURS:
            return _held(m, m.claimed(trying, None), old)
        if verdict is Verdict.REPLAY:
            return m.replay_of(trying, rec)
        if verdict is Verdict.IN_PROGRESS:
            raise m.in_progress(trying, rec, now)
        if verdict is Verdict.LATE:
            m.late(trying, rec, now, refuse=m.config.refuse_late_retries)
        if verdict is Verdict.CLAIMABLE and refused == 0:
            marks[0] = recovery.marked(m, trying, stored, rec)
        elif verdict is Verdict.CLAIMABLE and migrating is not None:
            marks[refused] = migrating.marked(old, refused, trying, stored, rec)
        replaced = verdict is not Verdict.CLAIMABLE or marks[refused] is not None
        seen[refused] = q.fence(rec.owner, rec.version) if replaced else None


def _reconciled(
    m: StateMachine,
    trying: Attempt,
    replaced: Item,
    transact_items: Sequence[dict[str, Any]],
    old: OldKeysOf,
    deadline: Deadline | None,
) -> Steps[Outcome]:
    """After the claim (alone) replaced the marked record ``replaced``: the ``reconcile``
    hook decides (:func:`.recovery.settle`). Reconciled: its replay, ``transact_items`` not
    applied; failed for good: its error; not done: ``transact_items`` committed against the
    claim, fenced (:func:`_commit`)."""
    claim = m.claimed(trying, replaced)
    if claim.recovering is not None and m.settle is not None:
        outcome = yield from m.settle(m, _held(m, claim, old), deadline)
    else:
        outcome = _held(m, claim, old)
    if isinstance(outcome, Replay):
        return outcome
    return (yield from _commit(m, outcome, transact_items, old, deadline))


def _commit(
    m: StateMachine,
    claim: Claim,
    transact_items: Sequence[dict[str, Any]],
    old: OldKeysOf,
    deadline: Deadline | None,
) -> Steps[Claim]:
    """``transact_items`` in one transaction with a check of ``claim``'s fence on each of its
    keys (as many own items as its claim had). A lost fence raises
    :class:`~firstwrite.idempotency.errors.LostClaimError` (nothing applied); any other error
    fails the claim retryably first (the key is free again, its marks kept)."""
    if not transact_items:
        return claim
    key = key_of(claim)
    own = [m.requests.transact_fence(claim.key, claim.owner, claim.version)]
    if m.migration is not None and old:
        own += m.migration.fence_checks(claim, old)
    try:
        cancelled = yield from _fenced(m, claim, own, transact_items, "claim", deadline)
    except Exception as exc:
        try:
            yield from m.fail(claim, exc, retryable=True, data=None, deadline=deadline)
        except Exception:
            m.report.fail_not_recorded(key, claim.record_id)
        raise
    if cancelled is None:
        return claim
    rec = yield from _refused_record(m, cancelled, claim.key, old, key, claim.record_id, deadline)
    raise m.lost(claim, rec, "claim_with")


def _fenced(
    m: StateMachine,
    claim: Claim,
    own: Sequence[dict[str, Any]],
    transact_items: Sequence[dict[str, Any]],
    operation: str,
    deadline: Deadline | None,
) -> Steps[Cancellation | None]:
    """``own`` (``claim``'s fenced items) and ``transact_items`` in one transaction, conflicts
    and throttling retried (:func:`_settle`): ``None`` when applied, else the cancellation in
    which one of ``own`` refused."""
    key = key_of(claim)
    attempt = 0
    while True:
        call = m.requests.transact([*own, *transact_items], uuid.uuid4().hex)
        reasons = yield from transact(m, call, key, claim.record_id, deadline)
        if reasons is None:
            return None
        cancelled = read(reasons, "fence", own=len(own))
        m.report.cancellation(
            key, claim.record_id, operation, reasons, cancelled.labels, cancelled.level
        )
        if cancelled.kind is Kind.OWN_CONDITION:
            return cancelled
        attempt = yield from _settle(m, cancelled, key, claim.record_id, attempt, deadline)


def _held(m: StateMachine, claim: Claim, old: OldKeysOf) -> Claim:
    return claim if m.migration is None or not old else m.migration.holding(claim, old)


def complete_with(
    m: StateMachine,
    claim: Claim,
    transact_items: Sequence[dict[str, Any]],
    result: Any,
    deadline: Deadline | None = None,
) -> Steps[Replay]:
    """The fenced completion and ``transact_items`` in one transaction; for a claim made
    inside a key migration's window, with the fenced completion of each of its old keys."""
    key = key_of(claim)
    migrating = m.migration
    old = () if migrating is None else migrating.old_keys_of(claim)
    _fits(key, transact_items, "complete_with", 1 + len(old))
    value = yield from placed(m, claim, result, encode_result(m, claim, result))
    while True:
        own = [m.requests.transact_complete(claim.key, claim.owner, claim.version, value)]
        if migrating is not None and old:
            own += migrating.complete_updates(claim, old, value)
        cancelled = yield from _fenced(m, claim, own, transact_items, "complete", deadline)
        if cancelled is None:
            break
        rec = yield from _refused_record(
            m, cancelled, claim.key, old, key, claim.record_id, deadline
        )
        if not fenced_outcome(rec, claim, Status.COMPLETED):
            raise m.lost(claim, rec, "complete")
        refused = cancelled.refused or 0
        if refused == 0:  # the current key is always finished last: all of it is done
            break
        # An old key a plain completion of this claim finished before it was cut short: the
        # rest (the current key, the other old keys, the caller's items) is still to do.
        old = old[: refused - 1] + old[refused:]
    return m.completed(claim, value)
