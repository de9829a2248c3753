"""Recovery points in the state machine: the fenced mark, and the takeover that reconciles.

:func:`mark` appends one :class:`~firstwrite.idempotency.recovery.RecoveryPoint` to a live
claim's list (``SET #mk = list_append(if_not_exists(#mk, :none), :mk)``, conditioned on the
claim's fence, as complete, fail and renew are; the version is not bumped, so the claim stays
valid). The claim condition refuses a record carrying points past its lease
(:data:`~firstwrite.idempotency.requests.UNMARKED`): without a hook the claim is refused at
once, nothing written (:func:`marked`); with one the record is taken over as seen, its points
carried in the claim's own item (:func:`carrying`: never a moment without them), and the claim
comes out of the machine's ``claimed`` with them (``claim.recovering``). :func:`settle`
(installed by :func:`install`) then asks the ``reconcile`` hook
(:class:`~firstwrite.idempotency.effects.Reconcile`) before any work runs and applies its
answer. A hook that raises puts the claim back (lease ``0``), then its error propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import requests as q
from ..effects import Call, Reconcile, Steps
from ..errors import ConfigurationError, RecoveryFailedError, RecoveryRequiredError
from ..outcomes import Attempt, Claim, Outcome, key_of
from ..record import Record
from ..recovery import (
    HOOK,
    AnyHook,
    FailedFinally,
    Interrupted,
    NotDone,
    Reconciled,
    RecoveryPoint,
    asking,
    new_mark_id,
    points_of,
)
from ..requests import Item
from .budget import Deadline
from .completion import answered

if TYPE_CHECKING:
    from .machine import StateMachine

log = logging.getLogger("firstwrite.idempotency")

_NONE: dict[str, Any] = {"L": []}
_ZERO = {"N": "0"}


def _attribute(m: StateMachine) -> str:
    name = m.layout.marks
    if name is None:
        raise ConfigurationError(
            f"record layout {m.layout.name!r} has no attribute for recovery points "
            "(marks=None): give the layout a `marks` name to use recovery_point()/mark()"
        )
    return name


def _fenced_update(
    m: StateMachine, claim: Claim, update: str, names: dict[str, str], values: dict[str, Any]
) -> Call:
    """An UpdateItem of ``claim``'s record under its fence (owner, live lease, version)."""
    layout = m.layout
    names = {"#own": layout.owner, "#lease": layout.lease, **names}
    values = {":own": {"S": q.fence(claim.owner, claim.version)}, **values}
    condition = q.FENCE
    if layout.version is not None:
        names["#ver"] = layout.version
        values[":ver"] = {"N": str(claim.version)}
        condition = q.FENCE_VERSIONED
    params: dict[str, Any] = {
        "TableName": m.requests.table,
        "Key": claim.key,
        "ConditionExpression": condition,
        "UpdateExpression": update,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        **m.requests.capacity,
    }
    return Call("UpdateItem", params)


def mark(
    m: StateMachine,
    claim: Claim,
    step: str,
    reference: str | None,
    deadline: Deadline | None = None,
) -> Steps[RecoveryPoint]:
    """Append a recovery point to ``claim``'s record; raises
    :class:`~firstwrite.idempotency.errors.LostClaimError` when the claim is no longer the
    record's (taken over, completed, failed)."""
    if not isinstance(step, str) or not step:
        raise ConfigurationError("a recovery point's step must be a non-empty string")
    if reference is not None and not isinstance(reference, str):
        raise ConfigurationError("a recovery point's reference must be a string or None")
    attribute = _attribute(m)
    point = RecoveryPoint(step, reference, m.clock(), claim.owner, new_mark_id())
    call = _fenced_update(
        m,
        claim,
        "SET #mk = list_append(if_not_exists(#mk, :none), :mk)",
        {"#mk": attribute},
        {":mk": {"L": [point.item()]}, ":none": _NONE},
    )
    key = key_of(claim)
    ok, old = yield from m.conditional(call, key, claim.record_id, deadline)
    if ok:
        return point
    old = yield from m.refused_item(old, claim.key, key, claim.record_id, deadline)
    rec = None if old is None else m.read(old)
    if old is not None and any(p.mark_id == point.mark_id for p in points_of(old, attribute)):
        return point  # our own write, whose answer was lost
    raise m.lost(claim, rec, "mark")


def install(m: StateMachine, hook: AnyHook | None) -> None:
    """Give ``m`` the guard's ``reconcile`` hook, :func:`marked` and :func:`settle` for its
    claims."""
    m.reconcile = hook
    m.settle = settle
    m.marked = marked


def _put_back(m: StateMachine, claim: Claim, deadline: Deadline | None) -> Steps[None]:
    """Leave the claim's record PENDING with its points and a lease already over, for the
    next claim to reconcile (or be refused)."""
    assert claim.recovering is not None
    call = _fenced_update(m, claim, "SET #lease = :zero", {}, {":zero": _ZERO})
    ok, _ = yield from m.conditional(call, key_of(claim), claim.record_id, deadline)
    if not ok:  # taken over meanwhile: the new owner carries the points
        m.report.lost(key_of(claim), claim.record_id, "put back", None)


def hook_of(m: StateMachine) -> AnyHook | None:
    """The ``reconcile`` hook of this call: its site's (:data:`~firstwrite.idempotency.recovery.HOOK`),
    else the guard's."""
    return HOOK.get() or m.reconcile


def refusal(m: StateMachine, interrupted: Interrupted) -> RecoveryRequiredError:
    """The refusal of a takeover of ``interrupted`` work without a hook: counted, logged."""
    _count(m, "refused")
    log.warning(
        "refused to rerun %r: its interrupted work marked recovery points (%s) and no "
        "reconcile hook was given",
        interrupted.key,
        ", ".join(p.step for p in interrupted.points),
        extra={"idempotency_key": interrupted.key, "record_id": interrupted.record_id},
    )
    return RecoveryRequiredError(
        interrupted.key, interrupted.points, record_id=interrupted.record_id
    )


def marked(m: StateMachine, attempt: Attempt, stored: Item | None, rec: Record) -> Item | None:
    """For a claim refused by a record past its lease (``rec``, stored as ``stored``):
    ``stored`` when it has a marks attribute (the claim condition's refusal) and a hook will
    reconcile its points (take it over as seen, carrying them, then :func:`settle`); ``None``
    when it has none (it changed meanwhile). Without a hook, raises
    :class:`~firstwrite.idempotency.errors.RecoveryRequiredError` (nothing written)."""
    if stored is None or m.layout.marks not in stored:
        return None
    points = points_of(stored, m.layout.marks)
    if not points:  # an empty list (written by hand): taken over as seen, nothing to ask
        return stored
    if hook_of(m) is None:
        key = attempt.idempotency_key
        raise refusal(m, Interrupted(key, attempt.record_id, points, rec))
    return stored


def merged(m: StateMachine, found: Sequence[Item | None]) -> Item | None:
    """The marked records ``found`` per key of a claim (the current key's first, then a key
    migration's old keys', each read in the current layout) as one: the first one found,
    carrying every point of them all, each once; ``None`` when none was found."""
    records = [item for item in found if item is not None]
    if len(records) <= 1:
        return records[0] if records else None
    attribute = _attribute(m)
    points: list[Any] = []
    ids: set[str] = set()
    for record in records:
        for point in record[attribute].get("L", []):
            mark_id = point.get("M", {}).get("id", {}).get("S")
            if mark_id is None or mark_id not in ids:
                ids.add(mark_id)
                points.append(point)
    return {**records[0], attribute: {"L": points}}


def carrying(m: StateMachine, item: Item, marked: Item) -> Item:
    """A claim's ``item`` carrying the recovery points of the ``marked`` record it replaces
    (written in the claim's own write: the key is never without them)."""
    attribute = _attribute(m)
    return {**item, attribute: marked[attribute]}


def _count(m: StateMachine, outcome: str) -> None:
    if m.report.enabled:
        m.metrics.count("firstwrite_recovery_takeovers_total", outcome=outcome)


def settle(m: StateMachine, claim: Claim, deadline: Deadline | None) -> Steps[Outcome]:
    """Decide for a claim that replaced a record carrying recovery points: a
    :class:`~firstwrite.idempotency.outcomes.Replay` (reconciled), the claim (not done: run
    the work), or an error (failed for good; no hook)."""
    interrupted = claim.recovering
    assert interrupted is not None
    hook = hook_of(m)
    if hook is None:  # (refused before the takeover: :func:`marked`) put back, refuse
        yield from _put_back(m, claim, deadline)
        raise refusal(m, interrupted)
    try:
        answer = yield Reconcile(*asking(hook, interrupted))
    except Exception:
        _count(m, "hook_error")
        yield from _put_back(m, claim, deadline)
        raise
    if isinstance(answer, Reconciled):
        _count(m, "reconciled")
        return (yield from answered(m, claim, answer.result, deadline))
    if isinstance(answer, NotDone):
        _count(m, "not_done")
        return claim
    if isinstance(answer, FailedFinally):
        _count(m, "failed_finally")
        error = RecoveryFailedError(interrupted.key, answer.reason, record_id=claim.record_id)
        yield from m.fail(claim, error, retryable=False, data=None, deadline=deadline)
        raise error
    yield from _put_back(m, claim, deadline)
    raise ConfigurationError(
        f"the reconcile hook answered {answer!r}: answer Reconciled(result), NotDone() or "
        "FailedFinally(reason) (firstwrite.idempotency.recovery)"
    )
