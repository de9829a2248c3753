"""The idempotency state machine: every decision, no I/O.

Every transition is written once, as a generator method of :class:`StateMachine` (``claim``,
``fail``, ``renew``, ``get``) or over one (the completion in :mod:`.completion`, the
transactional variant's in :mod:`.transactional`, the table set-up in :mod:`.table_setup`). A
transition yields the effects it needs (a :class:`~firstwrite.idempotency.effects.Call` built by :mod:`firstwrite.idempotency.requests`,
or a :class:`~firstwrite.idempotency.effects.Sleep`), is sent their answers and receives the client's exceptions
through ``throw()``, as h11's connection is fed events. Retries are effects too
(:func:`.retry.perform`), logs and metrics go through :class:`~.reporting.Reporter`. The drivers, :class:`firstwrite.idempotency.guard.Idempotency` and
:class:`firstwrite.idempotency.aio.AsyncIdempotency`, perform the effects with a blocking or an asyncio client, so
both make exactly the same calls, choices, logs and metrics; a call's time budget reaches a
transition as a :class:`~.budget.Deadline`. What a failed claim's stored record means is
:func:`firstwrite.idempotency.verdicts.judge`, one ordered table of rules.

Costs (DynamoDB calls): first request 2 writes; duplicate of a finished request 1 write (the
stored record comes back with the failed condition, ``ALL_OLD``); duplicate of a live request 1
write, plus one consistent read per poll while it waits (``in_progress_wait``); with the local
cache on, a duplicate of a finished request costs nothing.
Size: one concept, every decision of the state machine in one module (h11's ``_state.py``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from .. import requests as q
from .. import serialization
from ..clock_skew import UNTRUSTED, ClockSkew
from ..config import IdempotencyConfig
from ..effects import Call, Sleep, Steps
from ..errors import (
    ConfigurationError,
    InProgressError,
    LateRetryError,
    LostClaimError,
    PayloadMismatchError,
)
from ..keys import KeyBuilder, fingerprinter
from ..layout import layout_of
from ..metrics import Metrics
from ..outcomes import UNSET, Attempt, Claim, Outcome, Replay, key_of
from ..record import Record, Status
from ..recovery import AnyHook, Interrupted, points_of
from ..requests import NO_FINGERPRINT, Item, Key, millis, new_token
from ..result_placement import Placement
from ..verdicts import Verdict, fenced_outcome, judge
from .budget import Deadline
from .cache import ReplayCache
from .reporting import Reporter
from .retry import perform

OldKeysOf = tuple[tuple[int, Key], ...]
"""A claim's keys under previous schemes: ``(scheme index, Key)`` each."""


class OldKeys(Protocol):
    """A key migration's writes of a claim's old keys (:class:`.migration.Migrating`): made
    before the same write of its new key, or, for the transactional variant
    (:mod:`.transactional`), as more items of its transaction."""

    def window_keys(self, key: str, scope: str | None, dkey: Key) -> OldKeysOf: ...
    def claim_puts(
        self,
        old: OldKeysOf,
        attempt: Attempt,
        now: float,
        seen: Sequence[str | None],
        marked: Item | None = None,
    ) -> list[dict[str, Any]]: ...
    def marked(
        self,
        legacy: OldKeysOf,
        refused: int,
        trying: Attempt,
        stored: Item | None,
        rec: Record,
    ) -> Item | None: ...
    def stored_record(
        self,
        old: tuple[int, Key],
        item: Item | None,
        key: str,
        record_id: str,
        deadline: Deadline | None,
    ) -> Steps[Record | None]: ...
    def stored_item(
        self,
        old: tuple[int, Key],
        item: Item | None,
        key: str,
        record_id: str,
        deadline: Deadline | None,
    ) -> Steps[Item | None]: ...
    def read(self, old: tuple[int, Key], item: Item) -> Record: ...
    def legacy_hit(self, old: tuple[int, Key]) -> None: ...
    def holding(self, claim: Claim, old: OldKeysOf) -> Claim: ...
    def old_keys_of(self, claim: Claim) -> OldKeysOf: ...
    def complete_updates(
        self, claim: Claim, old: OldKeysOf, value: dict[str, Any]
    ) -> list[dict[str, Any]]: ...
    def fence_checks(self, claim: Claim, old: OldKeysOf) -> list[dict[str, Any]]: ...

    def complete(
        self, claim: Claim, result: Any, value: dict[str, Any], deadline: Deadline | None
    ) -> Steps[None]: ...
    def fail(
        self, claim: Claim, info: str, retryable: bool, deadline: Deadline | None
    ) -> Steps[None]: ...
    def renew(
        self, claim: Claim, lease_ms: int, now: float, deadline: Deadline | None
    ) -> Steps[None]: ...


Clock = Callable[[], float]
"""The wall clock: epoch seconds (``time.time``). Claim times, leases and expiry are read on
it, moved onto DynamoDB's clock by the guard's estimate (:attr:`StateMachine.skew`)."""

Monotonic = Callable[[], float]
"""The clock of the layer's own deadlines (how long to wait for a live request, how long to
retry a completion, how long to wait for a new table): seconds from any origin, never going
back (``time.monotonic``). Only differences of its readings are used."""


class Marked(Protocol):
    """:func:`.recovery.marked`: the stored item of a record refused for its recovery points,
    to take over carrying them (``None``: it has none); raises when no hook will reconcile it."""

    def __call__(
        self, m: StateMachine, attempt: Attempt, stored: Item | None, rec: Record
    ) -> Item | None: ...


class Settle(Protocol):
    """:func:`.recovery.settle`: decides for a claim of a record carrying recovery points."""

    def __call__(
        self, m: StateMachine, claim: Claim, deadline: Deadline | None
    ) -> Steps[Outcome]: ...


_MAX_ROUNDS = 64  # claim attempts per call: a key changing hands this often is a bug upstream


def _retryable_by_default(exc: BaseException) -> bool:
    flag = getattr(exc, "idempotency_retryable", None)
    return True if flag is None else bool(flag)


class StateMachine:
    """Configuration, keys, fingerprints, the cache, the reporter, and every transition as a
    generator of effects. Performs no I/O."""

    def __init__(
        self,
        config: IdempotencyConfig | None = None,
        *,
        clock: Clock = time.time,
        metrics: Metrics | None = None,
        non_retryable: Sequence[type[BaseException]] = (),
        rng: Callable[[], float] = random.random,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.config = config = config or IdempotencyConfig()
        self.clock = clock
        self.monotonic = monotonic
        self.report = Reporter(metrics)
        self.metrics = self.report.metrics
        # Where "now" for leases comes from: DynamoDB's clock, as estimated from its answers.
        self.skew = ClockSkew(
            config.clock_skew, config.lease, clock, monotonic, self.report.clock_estimate
        )
        self.requests = q.Requests(config)
        self.layout = config.layout
        self.keys = KeyBuilder(
            prefix=config.key_prefix,
            scope=config.scope,
            partition_key=config.partition_key,
            sort_key=config.sort_key,
            max_key_length=config.max_key_length,
            hash_function=config.hash_function,
        )
        self.cache = ReplayCache(config.local_cache_size) if config.local_cache_size else None
        self.non_retryable = tuple(non_retryable)
        self.rng = rng
        self.retention_branch = not config.refuse_late_retries
        self._fingerprint = (
            fingerprinter(config.hash_function) if config.payload_validation else None
        )
        # A key migration's old-key writes (:func:`.migration.install`, by the drivers).
        self.migration: OldKeys | None = None
        self.placement = (
            None
            if config.result_store is None and config.result_cipher is None
            else Placement(
                config.table_name,
                config.result_store,
                config.result_cipher,
                config.result_store_threshold,
            )
        )
        self.status_only = config.replay == "status-only"
        # The guard's ``reconcile`` hook and the transition deciding for a claim of a record
        # with recovery points (:func:`.recovery.install`, by the drivers).
        self.reconcile: AnyHook | None = None
        self.settle: Settle | None = None
        self.marked: Marked | None = None

    # -- pure helpers ----------------------------------------------------------------------------

    def read(self, item: Item) -> Record:
        """The record in a stored ``item`` (in the configuration's layout). An item of another
        layout (or none) under the key raises :class:`~firstwrite.idempotency.errors.ConfigurationError`: the table
        holds records this configuration cannot read (docs/idempotency-record.md, "Moving
        records")."""
        try:
            return Record.from_item(item, self.layout)
        except (KeyError, ValueError, TypeError) as exc:
            found = layout_of(item)
            if found is not None and found.name == self.layout.name:  # e.g. a hand-built row
                raise ConfigurationError(
                    f"the item stored under this key cannot be read in the {found.name!r} "
                    f"layout: {exc} (docs/idempotency-record.md, Adopting a table filled by hand)"
                ) from exc
            what = "no known layout" if found is None else f"the {found.name!r} layout"
            raise ConfigurationError(
                f"the item stored under this key is in {what}, not this configuration's "
                f"{self.layout.name!r} layout: move the records (docs/idempotency-record.md, "
                "Moving records) or configure the table's layout"
            ) from exc

    def fingerprint_of(self, payload: Any) -> str:
        if payload is UNSET or self._fingerprint is None:
            return NO_FINGERPRINT
        return self._fingerprint(payload)

    def is_retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, self.non_retryable):
            return False
        return _retryable_by_default(exc)

    def new_claim(
        self, key: str, record_id: str, dkey: Key, fp: str, lease: float | None
    ) -> tuple[Attempt, Item, float]:
        """A claim's attempt and item, and the instant its condition compares stored ends
        with (one that takes nothing over while the clock is not trusted)."""
        now, compare, refusal = self.skew.times()
        owner = new_token(now)
        config = self.config
        lease_ms = millis(now + (config.lease if lease is None else lease))
        expires_at = int(now + config.retention)
        item = self.requests.new_item(dkey, owner, fp, lease_ms, expires_at)
        attempt = Attempt(record_id, dkey, owner, fp, now, lease_ms, config.region, expires_at, key)
        return attempt, item, compare if refusal is None else UNTRUSTED

    def claimed(self, attempt: Attempt, old: Item | None, *, late_reported: bool = False) -> Claim:
        if not old:
            self.report.claim("claimed")
            return attempt.claim()
        previous = self.read(old)
        if previous.removed:
            outcome = "reclaimed_removed"
        elif previous.expired(attempt.claimed_at):
            outcome = "reclaimed_expired"
            if (
                not late_reported
                and previous.finished
                and q.same_request(previous.fingerprint, attempt.fingerprint)
            ):
                self.late(attempt, previous, attempt.claimed_at, refuse=False)
        elif previous.status is Status.PENDING:
            outcome = "takeover"
            self.report.takeover(attempt.idempotency_key, attempt.record_id, previous.owner)
        elif previous.status is Status.FAILED:
            outcome = "reclaimed_failed"
        else:
            outcome = "claimed"
        self.report.claim(outcome)
        if outcome != "takeover" and outcome != "reclaimed_failed":
            return attempt.claim(previous.status)
        # PENDING past its lease, or retryable FAILED: its work may have marked points
        claim = attempt.claim(previous.status)
        points = points_of(old, self.layout.marks)
        if not points:
            return claim
        interrupted = Interrupted(attempt.idempotency_key, attempt.record_id, points, previous)
        return replace(claim, recovering=interrupted)

    def on_conflict(self, attempt: Attempt | Claim, rec: Record, now: float) -> Verdict:
        verdict = judge(
            rec, attempt.owner, attempt.fingerprint, now, retention_branch=self.retention_branch
        )
        region = self.config.region
        if rec.region is not None and region is not None and rec.region != region:
            self.report.cross_region(rec.region)
        if verdict is Verdict.CLAIMABLE:  # by a lease or retention the condition did not pass
            refusal = self.skew.times().refusal
            if refusal is not None:
                self.report.clock_refused(key_of(attempt), attempt.record_id, refusal)
                raise self.skew.refused(key_of(attempt), attempt.record_id, refusal)
        if verdict is Verdict.MISMATCH:
            self.report.claim("mismatch")
            raise PayloadMismatchError(
                key_of(attempt), rec.fingerprint, attempt.fingerprint, record_id=attempt.record_id
            )
        return verdict

    def late(self, attempt: Attempt, rec: Record, now: float, *, refuse: bool) -> None:
        """A retry of a finished request past its retention: counted, logged, maybe refused."""
        claimed_at = rec.claimed_at
        age = None if claimed_at is None else max(0.0, now - claimed_at)
        self.report.late_retry(
            attempt.idempotency_key,
            attempt.record_id,
            age=age,
            status=rec.status.value,
            removed=rec.removed,
            refused=refuse,
        )
        if refuse:
            self.report.claim("late_retry_refused")
            raise LateRetryError(
                attempt.idempotency_key,
                age=age,
                status=rec.status.value,
                removed=rec.removed,
                record_id=attempt.record_id,
            )

    def replay_of(self, attempt: Attempt, rec: Record) -> Replay:
        replay = Replay(
            attempt.record_id,
            rec.status,
            rec.result,
            rec.error,
            rec.expires_at,
            attempt.idempotency_key,
            self.config.load_result if rec.owner[:1] == q.FOREIGN else None,
            placement=self.placement,
        )
        self.report.claim(
            "replayed_completed" if rec.status is Status.COMPLETED else "replayed_failed"
        )
        if self.cache is not None:
            self.cache.put(rec.fingerprint, replay)
        return replay

    def in_progress(self, attempt: Attempt, rec: Record, now: float) -> InProgressError:
        self.report.claim("in_progress")
        key = attempt.idempotency_key
        retry_after, remaining = self.config.retry_after.answer(
            key, rec.claimed_at, (rec.lease_expires_at or 0) / 1000, now
        )
        return InProgressError(
            key, retry_after, record_id=attempt.record_id, lease_remaining=remaining
        )

    def cached(self, record_id: str, fp: str) -> Replay | None:
        if self.cache is None:
            return None
        hit = self.cache.get(record_id, fp, self.clock())
        if hit is not None:
            self.report.cache_hit()
        return hit

    def lost(self, claim: Claim, rec: Record | None, operation: str) -> LostClaimError:
        self.report.lost(key_of(claim), claim.record_id, operation, rec.owner if rec else None)
        return LostClaimError(
            key_of(claim),
            claim.owner,
            rec.owner if rec else None,
            rec.status.value if rec else None,
            record_id=claim.record_id,
        )

    def completed(self, claim: Claim, value: dict[str, Any]) -> Replay:
        """The replay of a completion just stored (remembered when the local cache is on)."""
        raw = value.get("S", value.get("B"))
        replay = Replay(
            claim.record_id,
            Status.COMPLETED,
            raw,
            None,
            claim.expires_at,
            claim.idempotency_key,
            placement=self.placement,
        )
        if self.cache is not None:
            fp = None if claim.fingerprint == NO_FINGERPRINT else claim.fingerprint
            self.cache.put(fp, replay)
        return replay

    # -- the two ways a request is performed -----------------------------------------------------

    def call(
        self, call: Call, key: str, record_id: str, deadline: Deadline | None = None
    ) -> Steps[dict[str, Any]]:
        """``call`` under the retry policy (:func:`.retry.perform`) within ``deadline``;
        ``key`` and ``record_id`` name the record in logs."""
        return self._performed(call, key, record_id, False, deadline)

    def conditional(
        self, call: Call, key: str, record_id: str, deadline: Deadline | None = None
    ) -> Steps[tuple[bool, Item | None]]:
        """A conditional write under the retry policy: ``(True, returned attributes)`` or
        ``(False, ALL_OLD item or None)``; a failed condition is an answer, never an error."""
        return self._performed(call, key, record_id, True, deadline)

    def _performed(
        self, call: Call, key: str, record_id: str, conditional: bool, deadline: Deadline | None
    ) -> Steps[Any]:
        policy, rng, report, skew = self.config.retry, self.rng, self.report, self.skew
        return perform(call, policy, rng, report, key, record_id, conditional, deadline, skew)

    def refused_item(
        self,
        old: Item | None,
        dkey: Key,
        key: str,
        record_id: str,
        deadline: Deadline | None = None,
    ) -> Steps[Item | None]:
        """The stored item behind a failed conditional write: the one it returned
        (``ReturnValuesOnConditionCheckFailure=ALL_OLD``) or, from an endpoint that does not
        return it, one consistent read; ``None`` when nothing is stored."""
        if old is not None:
            return old
        get = self.requests.get(dkey)
        return (yield from self.call(get, key, record_id, deadline)).get("Item")

    # -- the transitions -------------------------------------------------------------------------

    def claim(
        self,
        key: str,
        payload: Any,
        scope: str | None,
        lease: float | None,
        wait: float | None,
        deadline: Deadline | None = None,
    ) -> Steps[Outcome]:
        """Claim ``key``; a live claim is waited for up to ``wait`` seconds (default
        ``in_progress_wait``), never past ``deadline`` nor past the live claim's lease."""
        dkey, record_id = self.keys.key(key, scope)
        fp = self.fingerprint_of(payload)
        hit = self.cached(record_id, fp)
        if hit is not None:
            return hit
        budget = self.config.in_progress_wait if wait is None else wait
        waiting_until: float | None = None  # the wait starts at the first "in progress"
        interval = self.config.poll_interval
        requests = self.requests
        for _ in range(_MAX_ROUNDS):
            trying, item, now = self.new_claim(key, record_id, dkey, fp, lease)
            blind = self.skew.blind  # written before DynamoDB's clock was heard
            put = requests.put_claim(item, fp, now)
            ok, old = yield from self.conditional(put, key, record_id, deadline)
            if ok:
                claimed = self.claimed(trying, old)
                if blind and self.skew.wrote_short():  # its answer shows the lease is short
                    claimed = yield from self.renew(claimed, lease, deadline)
                if claimed.recovering is None or self.settle is None:
                    return claimed
                return (yield from self.settle(self, claimed, deadline))
            if old is None:  # a DynamoDB without ReturnValuesOnConditionCheckFailure
                get = requests.get(dkey)
                old = (yield from self.call(get, key, record_id, deadline)).get("Item")
                if old is None:
                    continue
            rec = self.read(old)
            while True:
                now = self.skew.times().compare
                verdict = self.on_conflict(trying, rec, now)
                if verdict is Verdict.OURS:
                    return self.claimed(trying, None)
                if verdict is Verdict.REPLAY:
                    return self.replay_of(trying, rec)
                if verdict is Verdict.LATE:
                    self.late(trying, rec, now, refuse=self.config.refuse_late_retries)
                taking = item
                if verdict is Verdict.CLAIMABLE:  # changed meanwhile, or refused for its marks
                    marked = None if self.marked is None else self.marked(self, trying, old, rec)
                    if marked is None:
                        break  # changed (or expired) meanwhile: trying again
                    marks = self.layout.marks
                    assert marks is not None
                    taking = {**item, marks: marked[marks]}  # carried in the claim's own write
                if taking is not item or verdict is Verdict.LATE or verdict is Verdict.REPLACE:
                    seen = q.fence(rec.owner, rec.version)
                    call = requests.replace_claim(taking, seen)
                    ok, old = yield from self.conditional(call, key, record_id, deadline)
                    if not ok:
                        break  # it changed meanwhile: start again
                    claimed = self.claimed(trying, old, late_reported=True)
                    if claimed.recovering is None or self.settle is None:
                        return claimed
                    return (yield from self.settle(self, claimed, deadline))
                if budget <= 0:  # the default: answer "in progress" at once
                    raise self.in_progress(trying, rec, now)
                if waiting_until is None:
                    waiting_until = self.monotonic() + budget
                remaining = waiting_until - self.monotonic()
                if deadline is not None:
                    remaining = min(remaining, deadline.left())
                lease_left = (rec.lease_expires_at or 0) / 1000 - now
                if remaining <= 0 or lease_left <= 0:
                    raise self.in_progress(trying, rec, now)
                yield Sleep(min(interval, remaining, lease_left))
                interval = min(interval * 2, 0.5)
                self.report.poll()
                get = requests.get(dkey)
                old = (yield from self.call(get, key, record_id, deadline)).get("Item")
                if old is None:
                    break
                rec = self.read(old)
        raise InProgressError(key, self.config.poll_interval, record_id=record_id)  # churn

    def fail(
        self,
        claim: Claim,
        error: BaseException | str,
        *,
        retryable: bool,
        data: Any,
        deadline: Deadline | None = None,
    ) -> Steps[None]:
        info = serialization.error_info(error, data)
        if self.migration is not None:
            yield from self.migration.fail(claim, info, retryable, deadline)
        request = self.requests.fail(claim.key, claim.owner, claim.version, info, retryable)
        key = key_of(claim)
        ok, old = yield from self.conditional(request, key, claim.record_id, deadline)
        if not ok:
            old = yield from self.refused_item(old, claim.key, key, claim.record_id, deadline)
            rec = None if old is None else self.read(old)
            if not fenced_outcome(rec, claim, Status.FAILED):
                raise self.lost(claim, rec, "fail")

    def fail_quietly(
        self, claim: Claim, exc: BaseException, deadline: Deadline | None = None
    ) -> Steps[None]:
        """``fail`` after the caller's function raised: the caller's exception matters more, so
        a failure to record it is logged, and the claim's lease will end on its own."""
        try:
            retryable = self.is_retryable(exc)
            yield from self.fail(claim, exc, retryable=retryable, data=None, deadline=deadline)
        except Exception:
            self.report.fail_not_recorded(key_of(claim), claim.record_id)

    def renew(
        self, claim: Claim, lease: float | None, deadline: Deadline | None = None
    ) -> Steps[Claim]:
        now = self.skew.times().write
        lease_ms = millis(now + (self.config.lease if lease is None else lease))
        expires = int(now + self.config.retention)  # as in the renew request
        if self.migration is not None:
            yield from self.migration.renew(claim, lease_ms, now, deadline)
        request = self.requests.renew(claim.key, claim.owner, claim.version, lease_ms, now)
        key = key_of(claim)
        ok, old = yield from self.conditional(request, key, claim.record_id, deadline)
        if not ok:
            old = yield from self.refused_item(old, claim.key, key, claim.record_id, deadline)
            rec = None if old is None else self.read(old)
            if rec is None or not fenced_outcome(rec, claim, Status.PENDING):
                raise self.lost(claim, rec, "renew")
            lease_ms = rec.lease_expires_at or lease_ms
            expires = rec.expires_at
        return replace(
            claim, version=claim.version + 1, lease_expires_at=lease_ms, expires_at=expires
        )

    def replays(
        self,
        requests: Sequence[tuple[str, Any]],
        scope: str | None,
        deadline: Deadline | None = None,
    ) -> Steps[list[Replay | None]]:
        """The replay a claim of each ``(key, payload)`` would get now, read without claiming
        (one consistent ``BatchGetItem`` per 100 keys), or ``None`` where a claim must
        decide: nothing stored, not finished, claimable, another payload, a key left
        unprocessed. Only a finished record (COMPLETED, or FAILED for good) whose claim would
        be refused and judged a replay is answered: such a record changes only by expiring, so
        the answer is the claim's, as of the read."""
        answers: list[Replay | None] = [None] * len(requests)
        wanted: dict[tuple[str, ...], list[tuple[int, str, str, str]]] = {}  # by stored key
        dkeys: list[Key] = []
        for i, (key, payload) in enumerate(requests):
            dkey, record_id = self.keys.key(key, scope)
            ident = tuple(v["S"] for v in dkey.values())
            if ident not in wanted:
                wanted[ident] = []
                dkeys.append(dkey)
            wanted[ident].append((i, key, record_id, self.fingerprint_of(payload)))
        table = self.requests.table
        for start in range(0, len(dkeys), 100):
            chunk = dkeys[start : start + 100]
            call = self.requests.batch_get(chunk)
            label = f"{len(chunk)} keys"
            answer = yield from self.call(call, label, label, deadline)
            now = self.skew.times().compare
            for item in answer.get("Responses", {}).get(table, ()):
                ident = tuple(item[name]["S"] for name in chunk[0])
                rec = self.read(item)
                for i, key, record_id, fp in wanted.get(ident, ()):
                    verdict = judge(rec, "", fp, now, retention_branch=self.retention_branch)
                    if verdict is Verdict.REPLAY:
                        attempt = Attempt(record_id, {}, "", fp, now, 0, None, 0, key)
                        answers[i] = self.replay_of(attempt, rec)
        return answers

    def get(
        self, key: str, scope: str | None, deadline: Deadline | None = None
    ) -> Steps[Record | None]:
        dkey, record_id = self.keys.key(key, scope)
        get = self.requests.get(dkey)
        item = (yield from self.call(get, key, record_id, deadline)).get("Item")
        return None if item is None else self.read(item)
