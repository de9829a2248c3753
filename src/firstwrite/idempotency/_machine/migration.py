"""A key-scheme change's window: claims under the new key and every previous one, in one transaction.

The new record is authoritative; an old-scheme record decides only where no new one refuses.
Claim: one ``TransactWriteItems``, the new key's claim ``Put`` first, then a ``Put`` under each
old key in the old item shape (same owner token, lease and expiry) with the claim condition.
A refusal is judged on the first refusing item (``ALL_OLD``), counted in
``firstwrite_legacy_key_hits_total{scheme}`` when on an old key. Completion, failure and renewal
write the old key first (fenced), then the new: a crash between leaves the old key finished,
so both versions replay it. Interleavings: an old version's live or finished claim (old key
only) refuses the new version's transaction, which answers "in progress" or replays it (polls
re-run the transaction); a new version's claim writes the old key too, so an old version's
plain claim meets it and waits or replays; a lease run out on one key is taken over as always,
and the loser's fenced old-key write raises ``LostClaimError``. Past the window a claim writes the new
key alone (a plain call); a claim made inside it still finishes both keys. The transactional
variant (:mod:`.transactional`) puts the same old-key claims, or fenced completions, in its one
transaction, beside the caller's items. A record carrying recovery points, under the new key
or an old one, refuses the window's claim: it is taken over as seen, every key carrying all the
points found (:func:`.recovery.merged`), then reconciled (:func:`.recovery.marked`; refused
without a hook). docs/migrations.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import requests as q
from ..client_errors import error_code, is_sdk_error
from ..effects import Sleep, Steps
from ..errors import (
    CompletionNotRecordedError,
    DeadlineExceededError,
    InProgressError,
    TransactionConflictError,
    TransactionValidationError,
)
from ..key_migration import KeyMigration
from ..outcomes import Attempt, Claim, Outcome, key_of
from ..record import Record, Status, convert_item
from ..recovery import Interrupted, points_of
from ..requests import Item, Key, Requests
from ..verdicts import Verdict, fenced_outcome
from . import recovery
from .budget import Deadline
from .cancellation import TRANSIENT_REASONS, Kind, read
from .machine import OldKeysOf, StateMachine
from .old_schemes import Scheme
from .retry import backoff, budget_spent
from .transactional import transact

_MAX_ROUNDS = 64  # as the plain claim's


@dataclass(frozen=True, slots=True)
class LegacyClaim(Claim):
    """A :class:`~firstwrite.idempotency.outcomes.Claim` made inside the window: it also holds ``legacy``, the old
    keys claimed with it (``(scheme index, Key)``), which its completion, failure and renewal
    write first."""

    legacy: tuple[tuple[int, Key], ...] = ()


class Migrating:
    """The window's transitions over one :class:`~.machine.StateMachine` (see the module
    docstring); the machine's ``claim`` is this object's while a migration is configured."""

    __slots__ = ("ends_at", "m", "schemes")

    def __init__(self, m: StateMachine, migration: KeyMigration) -> None:
        self.m = m
        self.ends_at = migration.ends_at(m.config.retention)
        self.schemes = [Scheme(s, m.config) for s in migration.previous]

    def legacy_keys(self, key: str, scope: str | None, dkey: Key) -> list[tuple[int, Key]]:
        """The old keys of ``key`` (those that differ from the new key ``dkey``)."""
        found: list[tuple[int, Key]] = []
        for i, scheme in enumerate(self.schemes):
            old, _ = scheme.keys.key(key, scope)
            if old != dkey and all(old != k for _, k in found):
                found.append((i, old))
        return found

    # -- the claim -------------------------------------------------------------------------------

    def claim(
        self,
        key: str,
        payload: Any,
        scope: str | None,
        lease: float | None,
        wait: float | None,
        deadline: Deadline | None = None,
    ) -> Steps[Outcome]:
        """The machine's ``claim``: both schemes inside the window, the plain claim after."""
        m = self.m
        dkey, record_id = m.keys.key(key, scope)
        legacy = self.window_keys(key, scope, dkey)
        if not legacy:
            return (yield from type(m).claim(m, key, payload, scope, lease, wait, deadline))
        fp = m.fingerprint_of(payload)
        hit = m.cached(record_id, fp)
        if hit is not None:
            return hit
        budget = m.config.in_progress_wait if wait is None else wait
        waiting_until: float | None = None
        interval = m.config.poll_interval
        seen: list[str | None] = [None] * (1 + len(legacy))  # replace as seen, by item
        # By item: the marked record it holds (in the current layout), taken over as seen
        # carrying its points, then reconciled.
        marks: list[Item | None] = [None] * (1 + len(legacy))
        transient = 0
        for _ in range(_MAX_ROUNDS):
            trying, item, now = m.new_claim(key, record_id, dkey, fp, lease)
            marked = recovery.merged(m, marks)
            if marked is not None:  # its marks carried in the claim's own items
                item = recovery.carrying(m, item, marked)
            actions = [self._put(m.requests, item, fp, now, seen[0])]
            actions += self.claim_puts(legacy, trying, now, seen[1:], marked)
            call = m.requests.transact(actions, trying.owner)
            reasons = yield from transact(m, call, key, record_id, deadline)
            if reasons is None:
                claim = _legacy_claim(m.claimed(trying, marked), legacy)
                if claim.recovering is None or m.settle is None:
                    return claim
                return (yield from m.settle(m, claim, deadline))
            cancelled = read(reasons, "duplicate", own=len(actions))
            m.report.cancellation(key, record_id, "claim", reasons, cancelled.labels, logging.INFO)
            if cancelled.kind is Kind.VALIDATION:
                raise TransactionValidationError(
                    key, reasons, record_id=record_id, own=len(actions)
                )
            refused = cancelled.refused
            if refused is None:
                transient = yield from self._back_off(reasons, key, record_id, transient, deadline)
                continue
            stored = cancelled.own_item
            if refused == 0:
                stored = yield from m.refused_item(stored, dkey, key, record_id, deadline)
                rec = None if stored is None else m.read(stored)
            else:
                stored = yield from self.stored_item(
                    legacy[refused - 1], stored, key, record_id, deadline
                )
                rec = None if stored is None else self.read(legacy[refused - 1], stored)
            marks[refused] = None
            if rec is None:
                seen[refused] = None
                continue
            if refused:
                self.legacy_hit(legacy[refused - 1])
            now = m.skew.times().compare
            verdict = m.on_conflict(trying, rec, now)
            if verdict is Verdict.REPLAY:
                return m.replay_of(trying, rec)
            if verdict is Verdict.IN_PROGRESS:
                if budget <= 0:
                    raise m.in_progress(trying, rec, now)
                if waiting_until is None:
                    waiting_until = m.monotonic() + budget
                remaining = waiting_until - m.monotonic()
                if deadline is not None:
                    remaining = min(remaining, deadline.left())
                lease_left = (rec.lease_expires_at or 0) / 1000 - now
                if remaining <= 0 or lease_left <= 0:
                    raise m.in_progress(trying, rec, now)
                yield Sleep(min(interval, remaining, lease_left))
                interval = min(interval * 2, 0.5)
                m.report.poll()
                continue
            if verdict is Verdict.LATE:
                m.late(trying, rec, now, refuse=m.config.refuse_late_retries)
            if verdict is Verdict.CLAIMABLE:  # marked: reconcile, never rerun
                marks[refused] = self.marked(legacy, refused, trying, stored, rec)
            replaced = verdict is Verdict.LATE or verdict is Verdict.REPLACE
            replaced = replaced or marks[refused] is not None
            seen[refused] = q.fence(rec.owner, rec.version) if replaced else None
        raise InProgressError(key, m.config.poll_interval, record_id=record_id)  # churn

    @staticmethod
    def _put(
        builder: Requests,
        item: Item,
        fp: str,
        now: float,
        seen: str | None,
    ) -> dict[str, Any]:
        if seen is None:
            return builder.transact_claim(item, fp, now)
        return builder.transact_replace_claim(item, seen)

    @staticmethod
    def _old_item(builder: Requests, old_key: Key, trying: Attempt) -> Item:
        return builder.new_item(
            old_key, trying.owner, trying.fingerprint, trying.lease_expires_at, trying.expires_at
        )

    def _back_off(
        self,
        reasons: list[dict[str, Any]],
        key: str,
        record_id: str,
        attempt: int,
        deadline: Deadline | None,
    ) -> Steps[int]:
        """A conflict or throttling on some item: sleep before the next round (its number)."""
        m = self.m
        codes = {str(r.get("Code")) for r in reasons} - {"None"}
        attempt += 1
        if not codes <= TRANSIENT_REASONS or attempt >= m.config.retry.max_attempts:
            raise TransactionConflictError(key, reasons, record_id=record_id, own=len(reasons))
        delay = backoff(m.config.retry, attempt, m.rng)
        if deadline is not None and deadline.left() <= delay:
            code = next(iter(sorted(codes)), "TransactionCanceledException")
            raise budget_spent(
                "TransactWriteItems", code, delay, key, record_id, deadline, m.report
            )
        yield Sleep(delay)
        return attempt

    def marked(
        self,
        legacy: OldKeysOf,
        refused: int,
        trying: Attempt,
        stored: Item | None,
        rec: Record,
    ) -> Item | None:
        """For a claim refused past its lease by own item ``refused`` (0: the current key, else
        ``legacy[refused - 1]``), stored as ``stored``: that record in the current layout when it
        carries recovery points (:func:`.recovery.marked`: refused without a hook), else
        ``None``. Points under an old key that the current layout cannot carry (``marks=None``)
        are refused, never rerun."""
        m = self.m
        if refused == 0:
            return recovery.marked(m, trying, stored, rec)
        layout = self.schemes[legacy[refused - 1][0]].layout
        if stored is None or layout.marks is None or layout.marks not in stored:
            return None
        if m.layout.marks is None:
            points = points_of(stored, layout.marks)
            interrupted = Interrupted(trying.idempotency_key, trying.record_id, points, rec)
            raise recovery.refusal(m, interrupted)
        return recovery.marked(m, trying, convert_item(stored, m.layout, layout), rec)

    # -- the old keys as items of a transaction (this claim's, and :mod:`.transactional`'s) -----

    def window_keys(self, key: str, scope: str | None, dkey: Key) -> OldKeysOf:
        """``key``'s old keys while the window lasts; none after it."""
        if self.m.clock() >= self.ends_at:
            return ()
        return tuple(self.legacy_keys(key, scope, dkey))

    def claim_puts(
        self,
        old: OldKeysOf,
        attempt: Attempt,
        now: float,
        seen: Sequence[str | None],
        marked: Item | None = None,
    ) -> list[dict[str, Any]]:
        """The claim's ``Put`` under each of ``old``: the old scheme's item shape with
        ``attempt``'s owner token, lease and expiry, carrying the points of ``marked`` (a
        record the claim takes over, in the current layout), and the claim condition, which a
        record carrying points past its lease refuses (the replace condition over a record as
        ``seen``, where one was)."""
        points = None if marked is None else marked.get(self.m.layout.marks or "")
        actions = []
        for (i, old_key), was in zip(old, seen, strict=True):
            scheme = self.schemes[i]
            builder = scheme.requests
            item = self._old_item(builder, old_key, attempt)
            if points is not None and scheme.layout.marks is not None:
                item[scheme.layout.marks] = points
            actions.append(self._put(builder, item, attempt.fingerprint, now, was))
        return actions

    def stored_record(
        self,
        old: tuple[int, Key],
        item: Item | None,
        key: str,
        record_id: str,
        deadline: Deadline | None,
    ) -> Steps[Record | None]:
        """The record under the old key that refused a write, read in its scheme's layout
        (:meth:`stored_item`); ``None``: nothing stored any more."""
        item = yield from self.stored_item(old, item, key, record_id, deadline)
        return None if item is None else self.schemes[old[0]].read(item)

    def stored_item(
        self,
        old: tuple[int, Key],
        item: Item | None,
        key: str,
        record_id: str,
        deadline: Deadline | None,
    ) -> Steps[Item | None]:
        """The item under the old key that refused a write: the ``item`` it returned
        (``ALL_OLD``), or one consistent read from an endpoint that does not return it; ``None``:
        nothing stored any more."""
        if item is None:
            i, old_key = old
            get = self.schemes[i].requests.get(old_key)
            item = (yield from self.m.call(get, key, record_id, deadline)).get("Item")
        return item

    def read(self, old: tuple[int, Key], item: Item) -> Record:
        """The record stored under the old key ``old`` as ``item``, in its scheme's layout."""
        return self.schemes[old[0]].read(item)

    def legacy_hit(self, old: tuple[int, Key]) -> None:
        """Count a claim answered by the record under an old key."""
        self.m.report.legacy_hit(self.schemes[old[0]].label)

    @staticmethod
    def holding(claim: Claim, old: OldKeysOf) -> Claim:
        """``claim``, made with ``old`` in its transaction: a :class:`LegacyClaim`."""
        return _legacy_claim(claim, old) if old else claim

    @staticmethod
    def old_keys_of(claim: Claim) -> OldKeysOf:
        """The old keys ``claim`` holds (none unless made inside the window)."""
        return claim.legacy if isinstance(claim, LegacyClaim) else ()

    def complete_updates(
        self, claim: Claim, old: OldKeysOf, value: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The fenced completion of ``claim`` under each of ``old``, as transaction items."""
        return [
            self.schemes[i].requests.transact_complete(old_key, claim.owner, claim.version, value)
            for i, old_key in old
        ]

    def fence_checks(self, claim: Claim, old: OldKeysOf) -> list[dict[str, Any]]:
        """A ``ConditionCheck`` that ``claim`` still holds each of ``old``, as transaction items."""
        return [
            self.schemes[i].requests.transact_fence(old_key, claim.owner, claim.version)
            for i, old_key in old
        ]

    # -- the old keys' share of complete, fail and renew ----------------------------------------

    def complete(
        self, claim: Claim, result: Any, value: dict[str, Any], deadline: Deadline | None
    ) -> Steps[None]:
        """Complete ``claim``'s old keys (before its new one); a write that fails for a reason
        that may pass gives :class:`~firstwrite.idempotency.errors.CompletionNotRecordedError` with ``result``."""
        if not isinstance(claim, LegacyClaim):
            return
        try:
            for i, old_key in claim.legacy:
                call = self.schemes[i].requests.complete(old_key, claim.owner, claim.version, value)
                yield from self._fenced(
                    claim, i, old_key, call, Status.COMPLETED, "complete", deadline
                )
        except Exception as exc:
            if not (is_sdk_error(exc) or isinstance(exc, DeadlineExceededError)):
                raise
            code = (
                exc.dynamo_error_code if isinstance(exc, DeadlineExceededError) else error_code(exc)
            )
            self.m.report.completion_not_recorded(key_of(claim), claim.record_id, code, 0.0)
            raise CompletionNotRecordedError(
                key_of(claim),
                result,
                claim,
                tried_for=0.0,
                lease_expires_at=claim.lease_expires_at / 1000,
                reason=code,
                record_id=claim.record_id,
            ) from exc

    def fail(
        self, claim: Claim, info: str, retryable: bool, deadline: Deadline | None
    ) -> Steps[None]:
        """Fail ``claim``'s old keys (before its new one)."""
        if not isinstance(claim, LegacyClaim):
            return
        for i, old_key in claim.legacy:
            call = self.schemes[i].requests.fail(
                old_key, claim.owner, claim.version, info, retryable
            )
            yield from self._fenced(claim, i, old_key, call, Status.FAILED, "fail", deadline)

    def renew(
        self, claim: Claim, lease_ms: int, now: float, deadline: Deadline | None
    ) -> Steps[None]:
        """Renew ``claim``'s old keys (before its new one)."""
        if not isinstance(claim, LegacyClaim):
            return
        for i, old_key in claim.legacy:
            call = self.schemes[i].requests.renew(
                old_key, claim.owner, claim.version, lease_ms, now
            )
            yield from self._fenced(claim, i, old_key, call, Status.PENDING, "renew", deadline)

    def _fenced(
        self,
        claim: Claim,
        index: int,
        old_key: Key,
        call: Any,
        status: Status,
        operation: str,
        deadline: Deadline | None,
    ) -> Steps[None]:
        m = self.m
        key = key_of(claim)
        ok, old = yield from m.conditional(call, key, claim.record_id, deadline)
        if ok:
            return
        if old is None:
            get = self.schemes[index].requests.get(old_key)
            old = (yield from m.call(get, key, claim.record_id, deadline)).get("Item")
        rec = None if old is None else self.schemes[index].read(old)
        if not fenced_outcome(rec, claim, status):
            raise m.lost(claim, rec, operation)


def _legacy_claim(claim: Claim, legacy: OldKeysOf) -> LegacyClaim:
    """``claim`` holding its old keys too."""
    c = claim
    return LegacyClaim(
        c.record_id,
        c.key,
        c.owner,
        c.version,
        c.fingerprint,
        c.claimed_at,
        c.lease_expires_at,
        c.previous,
        c.region,
        c.expires_at,
        c.idempotency_key,
        c.recovering,
        legacy,
    )


def install(m: StateMachine) -> StateMachine:
    """``m`` with its configuration's key migration in place (the drivers call it on their
    machine): the window's claim replaces the plain one, and the old keys are written on
    completion, failure and renewal. Without ``key_migration``, ``m`` unchanged."""
    migration = m.config.key_migration
    if migration is not None:
        m.migration = migrating = Migrating(m, migration)
        m.claim = migrating.claim  # type: ignore[method-assign]
    return m
