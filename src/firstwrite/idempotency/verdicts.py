"""What a stored record means for a request.

The verdict table of a failed claim, and whether a failed fenced write was our own (pure; used by the machine and the transactional variant)."""

from __future__ import annotations

import enum

from . import requests as q
from .outcomes import Claim
from .record import Record, Status


class Verdict(enum.Enum):
    OURS = "ours"  # our own earlier write whose response was lost
    CLAIMABLE = "claimable"  # changed meanwhile: the claim condition would accept it now
    LATE = "late"  # a finished request's record past retention (or a tombstone), same request
    REPLACE = "replace"  # past retention (or a tombstone), another request: take the key
    MISMATCH = "mismatch"
    REPLAY = "replay"
    IN_PROGRESS = "in_progress"


def judge(
    rec: Record, owner: str, fp: str, now: float, *, retention_branch: bool = True
) -> Verdict:
    """What a failed claim's stored record means for a claim by ``owner`` with ``fp``.

    The rules, first match wins (``retention_branch``: whether the claim condition accepts a
    record past retention itself, i.e. ``refuse_late_retries`` is off):

    ====================================================== ======================
    stored record                                          verdict
    ====================================================== ======================
    our own owner token                                    OURS
    a tombstone still remembered, or a record past         LATE (a finished record,
    retention that the claim condition left to us          same request), else REPLACE
    claimable by the claim condition now                   CLAIMABLE
    a different fingerprint                                MISMATCH
    a hand-built row (no owner) in progress past its hold, REPLACE (as seen:
    or failed and not final                                :func:`.requests.replace_allows`)
    finished (COMPLETED, or FAILED for good)               REPLAY
    PENDING with a live lease                              IN_PROGRESS
    ====================================================== ======================
    """
    if rec.owner == owner:
        return Verdict.OURS
    expired = q.past_retention(rec.expires_at, now)
    removed = rec.removed_at is not None
    if removed and expired:  # a tombstone past its window: the key is forgotten
        return Verdict.CLAIMABLE if retention_branch else Verdict.REPLACE
    if removed or (expired and not retention_branch):
        if rec.finished and q.same_request(rec.fingerprint, fp):
            return Verdict.LATE
        return Verdict.REPLACE
    if q.claim_allows(rec, fp, now, retention_branch=retention_branch):
        return Verdict.CLAIMABLE
    if not q.same_request(rec.fingerprint, fp):
        return Verdict.MISMATCH
    if rec.owner[:1] == q.FOREIGN and q.lease_passed(rec.lease_expires_at, now):
        return Verdict.REPLACE
    if rec.finished:
        return Verdict.REPLAY
    return Verdict.IN_PROGRESS


def fenced_outcome(rec: Record | None, claim: Claim, target: Status) -> bool:
    """After a fenced update's condition failed: was it our own earlier write (lost response,
    retried)? Anything else is a lost claim. Completion keeps the version (it is terminal);
    renew and fail bump it."""
    version = claim.version if target is Status.COMPLETED else claim.version + 1
    return (
        rec is not None
        and rec.owner == claim.owner
        and rec.status is target
        and rec.version == version
    )
