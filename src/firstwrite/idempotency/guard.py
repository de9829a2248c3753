"""The idempotency state machine, in one place: claim, branch on what is stored,
complete/fail/renew, replay.

Every transition is written once, as a generator method of :class:`StateMachine`
(``claim_steps``, ``complete_steps``, ``fail_steps``, ``renew_steps``, ``claim_with_steps``,
``complete_with_steps``, ``get_steps``). A transition makes every decision and does no I/O: it
yields the effect it needs (:class:`PutClaim`, :class:`Update`, :class:`Get`,
:class:`Transact`, :class:`Sleep`), receives the answer through ``send()``, and receives the
store's exceptions through ``throw()``. Two drivers of a few lines perform the effects: the
synchronous :class:`Idempotency` (below) with :class:`.store.RecordStore` and ``time.sleep``,
and :class:`.aio.AsyncIdempotency` with its asyncio store and ``asyncio.sleep``. Both therefore
make exactly the same calls, choices, metrics and logs; only ``run``, which calls the user's
function (plain or coroutine), is written in each driver.

Costs (DynamoDB calls): first request 2 writes; duplicate of a finished request 1 write (the
stored record comes back with the failed condition, ``ALL_OLD``); duplicate of a live request 1
write, plus one consistent read per poll only when ``in_progress_wait > 0``; with the local
cache on, a duplicate of a finished request costs nothing.
"""

from __future__ import annotations

import enum
import logging
import os
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar

from . import serialization
from .config import IdempotencyConfig
from .errors import (
    BusinessConditionFailedError,
    InProgressError,
    LostClaimError,
    PayloadMismatchError,
    ReplayedFailureError,
    ResultTooLargeError,
    SerializationError,
    TransactionConflictError,
)
from .keys import NO_FINGERPRINT, KeyBuilder, fingerprint
from .metrics import NULL, Metrics
from .record import TOKEN_TIME_DIGITS, Record, Status, millis, same_request
from .store import Item, Key, RecordStore, Requests

log = logging.getLogger("firstwrite.idempotency")

T = TypeVar("T")
Clock = Callable[[], float]


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET = _Unset.UNSET
"""``payload`` not given: the request is identified by its key alone (no mismatch check)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """Proof that this caller holds a key. Pass it to complete/fail/renew."""

    record_id: str
    key: Key
    owner: str
    version: int
    fingerprint: str
    claimed_at: float
    lease_expires_at: int  # epoch ms
    previous: Status | None = None  # what the claim replaced (None: a first claim)
    region: str | None = None
    expires_at: int = 0  # epoch s: the record's retention end (set by claim and renew)

    @property
    def taken_over(self) -> bool:
        """This claim replaced an abandoned PENDING claim (its worker may have done part of the
        side effect: make the side effect itself idempotent or check business state)."""
        return self.previous is Status.PENDING

    @property
    def fencing_token(self) -> str:
        """Pass downstream to let other systems refuse a stale worker."""
        return f"{self.owner}:{self.version}"


class _Attempt(NamedTuple):
    """A claim being tried: what its :class:`Claim` will be, far cheaper to build (a frozen
    dataclass costs 1.5 us) and most duplicates never become one."""

    record_id: str
    key: Key
    owner: str
    fingerprint: str
    claimed_at: float
    lease_expires_at: int
    region: str | None
    expires_at: int

    def claim(self) -> Claim:
        return Claim(
            record_id=self.record_id,
            key=self.key,
            owner=self.owner,
            version=1,
            fingerprint=self.fingerprint,
            claimed_at=self.claimed_at,
            lease_expires_at=self.lease_expires_at,
            region=self.region,
            expires_at=self.expires_at,
        )


@dataclass(frozen=True, slots=True)
class Replay:
    """The stored outcome of an earlier request with the same key and fingerprint."""

    record_id: str
    status: Status
    raw_result: str | bytes | None
    error: str | None
    expires_at: int

    @property
    def completed(self) -> bool:
        return self.status is Status.COMPLETED

    def value(self, result_type: Any = None) -> Any:
        """The replayed result, or :class:`ReplayedFailureError` for a stored failure."""
        if self.status is Status.COMPLETED:
            return serialization.decode(self.raw_result, result_type)
        error_type, message, data = serialization.read_error(self.error)
        raise ReplayedFailureError(self.record_id, error_type, message, data)


Outcome = Claim | Replay


class Verdict(enum.Enum):
    OURS = "ours"  # our own earlier write whose response was lost
    CLAIMABLE = "claimable"
    MISMATCH = "mismatch"
    REPLAY = "replay"
    IN_PROGRESS = "in_progress"


def judge(rec: Record, owner: str, fp: str, now: float) -> Verdict:
    """What a failed claim's stored record means for us (pure; shared by sync and async)."""
    if rec.owner == owner:
        return Verdict.OURS
    if rec.claimable(now, fp):
        return Verdict.CLAIMABLE
    if not same_request(rec.fingerprint, fp):
        return Verdict.MISMATCH
    if rec.status is Status.COMPLETED or (rec.status is Status.FAILED and not rec.retryable):
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


class _Cache:
    """LRU of finished records (COMPLETED and non-retryable FAILED) keyed by record id."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._data: OrderedDict[str, tuple[str | None, Replay]] = OrderedDict()

    def get(self, record_id: str, fp: str, now: float) -> Replay | None:
        with self._lock:
            hit = self._data.get(record_id)
            if hit is None:
                return None
            stored_fp, replay = hit
            if replay.expires_at < int(now) or not same_request(stored_fp, fp):
                return None  # expired or a mismatch: let DynamoDB give the answer
            self._data.move_to_end(record_id)
            return replay

    def put(self, fp: str | None, replay: Replay) -> None:
        with self._lock:
            self._data[replay.record_id] = (fp, replay)
            self._data.move_to_end(replay.record_id)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


def new_token(now: float) -> str:
    """A claim's owner token: the claim time (epoch ms, 12 hex digits) then 80 random bits.
    Unique per claim, and it dates the claim without a ``claimed_at`` attribute."""
    return f"{millis(now):0{TOKEN_TIME_DIGITS}x}{os.urandom(10).hex()}"


def _retryable_by_default(exc: BaseException) -> bool:
    flag = getattr(exc, "idempotency_retryable", None)
    return True if flag is None else bool(flag)


_MAX_ROUNDS = 64  # claim attempts per call: a key changing hands this often is a bug upstream

_RETRY_CODES = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)


def transient_cancellation(reasons: list[dict[str, Any]]) -> bool:
    """Cancelled only by conflicts or throttling: nothing was written, retrying is safe."""
    codes = {r.get("Code") for r in reasons} - {None, "None"}
    return bool(codes) and codes <= _RETRY_CODES


# -- effects: what a transition asks its driver to do ----------------------------------------
# The fields are the arguments of the store method (or sleep) that performs the effect, so a
# driver performs one as ``method(*effect)``: a dict lookup and a call, no per-effect code.


class PutClaim(NamedTuple):
    """A conditional PutItem of a claim. Answer: ``(ok, ALL_OLD item or None)``."""

    request: dict[str, Any]


class Update(NamedTuple):
    """A fenced UpdateItem. Answer: ``(ok, ALL_OLD item or None)``."""

    request: dict[str, Any]


class Get(NamedTuple):
    """A consistent GetItem. Answer: the item or ``None``."""

    key: Key


class Transact(NamedTuple):
    """One TransactWriteItems. Answer: ``None`` when applied, else the cancellation reasons."""

    items: Sequence[dict[str, Any]]
    token: str


class Sleep(NamedTuple):
    """A pause (in-progress polling, transaction backoff). Answer: ``None``."""

    seconds: float


Effect = PutClaim | Update | Get | Transact | Sleep
Steps = Generator[Effect, Any, T]
"""A transition: yields effects, is sent their answers, returns its outcome."""


def performers(store: Any, sleep: Callable[[float], Any]) -> dict[type[Effect], Callable[..., Any]]:
    """What performs each effect: a method of ``store`` (:class:`.store.RecordStore`, or the
    asyncio store, whose methods return awaitables) or ``sleep``."""
    return {
        PutClaim: store.put_claim,
        Update: store.update,
        Get: store.get,
        Transact: store.transact,
        Sleep: sleep,
    }


class StateMachine:
    """The idempotency state machine: configuration, keys, fingerprints, the cache, metrics,
    the pure decisions, and every transition as a generator of effects (``*_steps``).

    It performs no I/O: :class:`Idempotency` and :class:`.aio.AsyncIdempotency` subclass it
    and drive the transitions with their own store and sleep."""

    def __init__(
        self,
        config: IdempotencyConfig | None,
        clock: Clock,
        metrics: Metrics | None,
        non_retryable: Sequence[type[BaseException]],
    ) -> None:
        self.config = config = config or IdempotencyConfig()
        self.clock = clock
        self.metrics = metrics or NULL
        self.requests = Requests(config)
        self.keys = KeyBuilder(
            prefix=config.key_prefix,
            scope=config.scope,
            partition_key=config.partition_key,
            sort_key=config.sort_key,
            max_key_length=config.max_key_length,
            hash_function=config.hash_function,
        )
        self.cache = _Cache(config.local_cache_size) if config.local_cache_size else None
        self.non_retryable = tuple(non_retryable)
        self.rng: Callable[[], float] = random.random

    # -- pure helpers --------------------------------------------------------------------------

    def fingerprint_of(self, payload: Any) -> str:
        if payload is UNSET or not self.config.payload_validation:
            return NO_FINGERPRINT
        return fingerprint(payload, self.config.hash_function)

    def is_retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, self.non_retryable):
            return False
        return _retryable_by_default(exc)

    def new_claim(
        self, record_id: str, key: Key, fp: str, lease: float | None
    ) -> tuple[_Attempt, Item, float]:
        now = self.clock()
        owner = new_token(now)
        length = self.config.lease if lease is None else lease
        item = self.requests.claim_item(key, owner, fp, now, length)
        attempt = _Attempt(
            record_id,
            key,
            owner,
            fp,
            now,
            millis(now + length),
            self.config.region,
            int(now + self.config.retention),  # as in the claim item
        )
        return attempt, item, now

    def claimed(self, attempt: _Attempt, old: Item | None) -> Claim:
        claim = attempt.claim()
        previous = None if not old else Record.from_item(old)
        outcome = "claimed"
        if previous is not None:
            if previous.expired(claim.claimed_at):
                outcome = "reclaimed_expired"
            elif previous.status is Status.PENDING:
                outcome = "takeover"
            elif previous.status is Status.FAILED:
                outcome = "reclaimed_failed"
            if previous.status is Status.PENDING and outcome == "takeover":
                log.warning(
                    "took over abandoned claim %s (previous owner %s)",
                    claim.record_id,
                    previous.owner,
                    extra={"idempotency_key": claim.record_id},
                )
        self.count_claim(outcome)
        if previous is None:
            return claim
        return replace(claim, previous=previous.status)

    def count_claim(self, outcome: str) -> None:
        if self.metrics.enabled:
            self.metrics.count("firstwrite_claims_total", outcome=outcome)

    def on_conflict(self, claim: Claim | _Attempt, rec: Record, now: float) -> Verdict:
        verdict = judge(rec, claim.owner, claim.fingerprint, now)
        if (
            self.metrics.enabled
            and rec.region is not None
            and self.config.region is not None
            and rec.region != self.config.region
        ):
            self.metrics.count("dynamo_cross_region_duplicate_detected_total", region=rec.region)
        if verdict is Verdict.MISMATCH:
            self.count_claim("mismatch")
            raise PayloadMismatchError(claim.record_id, rec.fingerprint, claim.fingerprint)
        return verdict

    def replay_of(self, claim_or_id: Claim | _Attempt | str, rec: Record) -> Replay:
        record_id = claim_or_id if isinstance(claim_or_id, str) else claim_or_id.record_id
        replay = Replay(record_id, rec.status, rec.result, rec.error, rec.expires_at)
        self.count_claim(
            "replayed_completed" if rec.status is Status.COMPLETED else "replayed_failed"
        )
        if self.cache is not None:
            self.cache.put(rec.fingerprint, replay)
        return replay

    def in_progress(self, claim: Claim | _Attempt, rec: Record, now: float) -> InProgressError:
        self.count_claim("in_progress")
        retry_after = max(0.0, ((rec.lease_expires_at or 0) - now * 1000) / 1000)
        return InProgressError(claim.record_id, retry_after)

    def backoff(self, attempt: int) -> float:
        from .retry import backoff

        return backoff(self.config.retry, attempt, self.rng)

    def cached(self, record_id: str, fp: str) -> Replay | None:
        if self.cache is None:
            return None
        hit = self.cache.get(record_id, fp, self.clock())
        if hit is not None and self.metrics.enabled:
            self.metrics.count("firstwrite_cache_hits_total")
        return hit

    def encode_result(self, claim: Claim, result: Any) -> dict[str, Any]:
        cfg = self.config
        value = serialization.encode(
            result, threshold=cfg.compress_threshold, level=cfg.compression_level
        )
        size = serialization.value_size(value)
        if size > cfg.max_item_size - 4096:  # only near the limit is the exact size worth it
            total = size + len("result") + self._overhead(claim)
            if total > cfg.max_item_size:
                raise ResultTooLargeError(claim.record_id, total, cfg.max_item_size)
        return value

    def _overhead(self, claim: Claim) -> int:
        item = self.requests.claim_item(claim.key, claim.owner, claim.fingerprint, 0.0, 0.0)
        return serialization.item_size(item) + 24  # room for N digits growing over time

    def lost(self, claim: Claim, rec: Record | None, operation: str) -> LostClaimError:
        if self.metrics.enabled:
            self.metrics.count("firstwrite_lost_claims_total", operation=operation)
        log.error(
            "lost claim on %s at %s: now owned by %s",
            claim.record_id,
            operation,
            rec.owner if rec else None,
            extra={
                "idempotency_key": claim.record_id,
                "dynamo_error_code": "ConditionalCheckFailedException",
                "operation": operation,
            },
        )
        return LostClaimError(
            claim.record_id,
            claim.owner,
            rec.owner if rec else None,
            rec.status.value if rec else None,
        )

    def completed(self, claim: Claim, value: dict[str, Any]) -> Replay:
        """The replay of a completion just stored (remembered when the local cache is on)."""
        raw = value.get("S", value.get("B"))
        replay = Replay(claim.record_id, Status.COMPLETED, raw, None, claim.expires_at)
        if self.cache is not None:
            fp = None if claim.fingerprint == NO_FINGERPRINT else claim.fingerprint
            self.cache.put(fp, replay)
        return replay

    def split_reasons(
        self, claim: Claim | _Attempt, reasons: list[dict[str, Any]]
    ) -> tuple[Item | None, bool, dict[int, dict[str, Any]]]:
        """Variant 3: ``(stored record if the claim item failed, claim failed?, business
        failures by caller index)``; counts ``transact_write_cancellation_reason``."""
        first = reasons[0] if reasons else {}
        claim_failed = first.get("Code") == "ConditionalCheckFailed"
        business = {
            i - 1: reason
            for i, reason in enumerate(reasons)
            if i > 0 and reason.get("Code") not in (None, "None")
        }
        if self.metrics.enabled:
            if claim_failed:
                self.metrics.count("transact_write_cancellation_reason", reason="duplicate")
            for reason in business.values():
                code = reason.get("Code", "")
                label = "business_condition_failed" if code == "ConditionalCheckFailed" else code
                self.metrics.count("transact_write_cancellation_reason", reason=label)
            if first.get("Code") not in (None, "None", "ConditionalCheckFailed"):
                self.metrics.count("transact_write_cancellation_reason", reason=first["Code"])
        return first.get("Item"), claim_failed, business

    # -- the transitions: each one written once, driven by both guards ---------------------

    def claim_steps(
        self, key: str, payload: Any, scope: str | None, lease: float | None, wait: float | None
    ) -> Steps[Outcome]:
        dkey, record_id = self.keys.key(key, scope)
        fp = self.fingerprint_of(payload)
        hit = self.cached(record_id, fp)
        if hit is not None:
            return hit
        budget = self.config.in_progress_wait if wait is None else wait
        deadline: float | None = None  # the budget is for waiting: it starts at "in progress"
        interval = self.config.poll_interval
        for _ in range(_MAX_ROUNDS):
            trying, item, now = self.new_claim(record_id, dkey, fp, lease)
            ok, old = yield PutClaim(self.requests.put_claim(item, fp, now))
            if ok:
                return self.claimed(trying, old)
            if old is None:  # a DynamoDB without ReturnValuesOnConditionCheckFailure
                old = yield Get(dkey)
                if old is None:
                    continue
            rec = Record.from_item(old)
            while True:
                verdict = self.on_conflict(trying, rec, self.clock())
                if verdict is Verdict.OURS:
                    return self.claimed(trying, None)
                if verdict is Verdict.REPLAY:
                    return self.replay_of(trying, rec)
                if verdict is Verdict.CLAIMABLE:
                    break  # changed (or expired) meanwhile: trying again
                if budget <= 0:  # the default: answer "in progress" at once
                    raise self.in_progress(trying, rec, self.clock())
                if deadline is None:
                    deadline = time.monotonic() + budget
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.in_progress(trying, rec, self.clock())
                yield Sleep(min(interval, remaining))
                interval = min(interval * 2, 0.5)
                if self.metrics.enabled:
                    self.metrics.count("firstwrite_in_progress_polls_total")
                current = yield Get(dkey)
                if current is None:
                    break
                rec = Record.from_item(current)
        raise InProgressError(record_id, self.config.poll_interval)  # pathological churn

    def complete_steps(self, claim: Claim, result: Any) -> Steps[Replay]:
        try:
            value = self.encode_result(claim, result)
        except SerializationError as exc:
            yield from self.fail_steps(claim, exc, retryable=False, data=None)
            raise
        request = self.requests.complete(claim.key, claim.owner, claim.version, value)
        ok, old = yield Update(request)
        if not ok:
            rec = None if old is None else Record.from_item(old)
            if not fenced_outcome(rec, claim, Status.COMPLETED):
                raise self.lost(claim, rec, "complete")
        return self.completed(claim, value)

    def fail_steps(
        self, claim: Claim, error: BaseException | str, *, retryable: bool, data: Any
    ) -> Steps[None]:
        info = serialization.error_info(error, data)
        request = self.requests.fail(claim.key, claim.owner, claim.version, info, retryable)
        ok, old = yield Update(request)
        if not ok:
            rec = None if old is None else Record.from_item(old)
            if not fenced_outcome(rec, claim, Status.FAILED):
                raise self.lost(claim, rec, "fail")

    def renew_steps(self, claim: Claim, lease: float | None) -> Steps[Claim]:
        now = self.clock()
        lease_ms = millis(now + (self.config.lease if lease is None else lease))
        expires = int(now + self.config.retention)  # as in the renew request
        request = self.requests.renew(claim.key, claim.owner, claim.version, lease_ms, now)
        ok, old = yield Update(request)
        if not ok:
            rec = None if old is None else Record.from_item(old)
            if not fenced_outcome(rec, claim, Status.PENDING):
                raise self.lost(claim, rec, "renew")
            assert rec is not None
            lease_ms = rec.lease_expires_at or lease_ms
            expires = rec.expires_at
        return replace(
            claim, version=claim.version + 1, lease_expires_at=lease_ms, expires_at=expires
        )

    def claim_with_steps(
        self,
        key: str,
        transact_items: Sequence[dict[str, Any]],
        payload: Any,
        scope: str | None,
        lease: float | None,
    ) -> Steps[Outcome]:
        dkey, record_id = self.keys.key(key, scope)
        fp = self.fingerprint_of(payload)
        attempt = 0
        while True:
            trying, item, now = self.new_claim(record_id, dkey, fp, lease)
            items = [self.requests.transact_claim(item, fp, now), *transact_items]
            reasons = yield Transact(items, trying.owner)
            if reasons is None:
                return self.claimed(trying, None)
            old, claim_failed, business = self.split_reasons(trying, reasons)
            if claim_failed:
                if old is None:
                    old = yield Get(dkey)
                    if old is None:
                        continue
                rec = Record.from_item(old)
                verdict = self.on_conflict(trying, rec, self.clock())
                if verdict is Verdict.OURS:
                    return self.claimed(trying, None)
                if verdict is Verdict.REPLAY:
                    return self.replay_of(trying, rec)
                if verdict is Verdict.IN_PROGRESS:
                    raise self.in_progress(trying, rec, self.clock())
                continue
            if business:
                raise BusinessConditionFailedError(record_id, business)
            attempt += 1
            if not transient_cancellation(reasons) or attempt >= self.config.retry.max_attempts:
                raise TransactionConflictError(record_id, reasons)
            yield Sleep(self.backoff(attempt))

    def complete_with_steps(
        self, claim: Claim, transact_items: Sequence[dict[str, Any]], result: Any
    ) -> Steps[Replay]:
        value = self.encode_result(claim, result)
        token = uuid.uuid4().hex
        attempt = 0
        while True:
            update = self.requests.complete(claim.key, claim.owner, claim.version, value)
            update.pop("ReturnConsumedCapacity", None)
            items = [{"Update": update}, *transact_items]
            reasons = yield Transact(items, token)
            if reasons is None:
                break
            old, fence_failed, business = self.split_reasons(claim, reasons)
            if fence_failed:
                rec = None if old is None else Record.from_item(old)
                if fenced_outcome(rec, claim, Status.COMPLETED):
                    break
                raise self.lost(claim, rec, "complete")
            if business:
                raise BusinessConditionFailedError(claim.record_id, business)
            attempt += 1
            if not transient_cancellation(reasons) or attempt >= self.config.retry.max_attempts:
                raise TransactionConflictError(claim.record_id, reasons)
            token = uuid.uuid4().hex
            yield Sleep(self.backoff(attempt))
        return self.completed(claim, value)

    def get_steps(self, key: str, scope: str | None) -> Steps[Record | None]:
        dkey, _ = self.keys.key(key, scope)
        item = yield Get(dkey)
        return None if item is None else Record.from_item(item)


class Idempotency(StateMachine):
    """The synchronous API: drives the :class:`StateMachine` transitions with blocking calls.

    >>> guard = Idempotency(IdempotencyConfig(table_name="idem"), client=boto3.client("dynamodb"))
    >>> guard.run("order-42", lambda: charge(card, 10), payload={"card": card, "amount": 10})

    ``client`` is a boto3 low-level DynamoDB client; without one, a local engine database file
    is used (see :mod:`.local`). ``clock`` returns epoch seconds (tests pass the engine's clock).
    """

    def __init__(
        self,
        config: IdempotencyConfig | None = None,
        *,
        client: Any = None,
        clock: Clock = time.time,
        metrics: Metrics | None = None,
        non_retryable: Sequence[type[BaseException]] = (),
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        super().__init__(config, clock, metrics, non_retryable)
        if client is None:
            from .local import default_client

            client = default_client(self.config)
        self.client = client
        self.store = RecordStore(client, self.config, metrics=self.metrics, sleep=sleep, rng=rng)
        self.sleep = sleep
        self.rng = rng
        self._io = performers(self.store, self._pause)

    def _pause(self, seconds: float) -> None:
        self.sleep(seconds)  # looked up per call: ``sleep`` may be replaced after construction

    def _drive(self, steps: Steps[T]) -> T:
        """Perform a transition's effects in turn; a store exception goes back into it."""
        io = self._io
        try:
            effect = next(steps)
            while True:
                try:
                    answer = io[type(effect)](*effect)
                except BaseException as exc:
                    effect = steps.throw(exc)
                else:
                    effect = steps.send(answer)
        except StopIteration as stop:
            outcome: T = stop.value
            return outcome

    def ensure_table(self) -> bool:
        """Create the table (on-demand, TTL enabled on ``expires_at``) if it does not exist."""
        return self.store.ensure_table()

    # -- claim ---------------------------------------------------------------------------------

    def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
    ) -> Outcome:
        """Claim ``key`` (one conditional PutItem). Returns a :class:`Claim` to complete or
        fail, or a :class:`Replay` of the stored outcome. Raises :class:`InProgressError`
        (after waiting up to ``wait`` seconds, default ``config.in_progress_wait``) and
        :class:`PayloadMismatchError`."""
        return self._drive(self.claim_steps(key, payload, scope, lease, wait))

    # -- transitions ---------------------------------------------------------------------------

    def complete(self, claim: Claim, result: Any = None) -> Replay:
        """Store ``result`` and mark the key COMPLETED (fenced by owner and version).

        Raises :class:`LostClaimError` if another worker took the key over; nothing is written.
        A result that cannot be stored (:class:`SerializationError`, including
        :class:`ResultTooLargeError`) marks the key FAILED for good, because the side effect
        has happened and must not run again, and is then raised."""
        return self._drive(self.complete_steps(claim, result))

    def fail(
        self, claim: Claim, error: BaseException | str, *, retryable: bool, data: Any = None
    ) -> None:
        """Mark the key FAILED. ``retryable=True`` lets the same request claim it again at once;
        ``False`` makes the failure the key's final answer, replayed to duplicates."""
        self._drive(self.fail_steps(claim, error, retryable=retryable, data=data))

    def renew(self, claim: Claim, lease: float | None = None) -> Claim:
        """Extend the lease of a live claim (long work). Returns the claim to use from now on."""
        return self._drive(self.renew_steps(claim, lease))

    # -- the whole dance -----------------------------------------------------------------------

    def run(
        self,
        key: str,
        fn: Callable[[], T],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        result_type: Any = None,
        lease: float | None = None,
        wait: float | None = None,
    ) -> T:
        """Run ``fn`` at most once per key (within retention); duplicates get its result.

        An exception from ``fn`` marks the key FAILED, retryable unless it is an instance of
        ``non_retryable`` (or has ``idempotency_retryable = False``), and is re-raised."""
        outcome = self.claim(key, payload, scope=scope, lease=lease, wait=wait)
        if isinstance(outcome, Replay):
            value: T = outcome.value(result_type)
            return value
        try:
            result = fn()
        except BaseException as exc:
            self._fail_quietly(outcome, exc)
            raise
        self.complete(outcome, result)
        return result

    def _fail_quietly(self, claim: Claim, exc: BaseException) -> None:
        try:
            self.fail(claim, exc, retryable=self.is_retryable(exc))
        except Exception:  # the caller's exception matters more; the lease will expire
            log.exception("could not record the failure of %s", claim.record_id)

    # -- variant 3: with the caller's business writes ------------------------------------------

    def claim_with(
        self,
        key: str,
        transact_items: Sequence[dict[str, Any]],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
    ) -> Outcome:
        """Claim ``key`` and apply ``transact_items`` (TransactWriteItems entries, low-level
        shape) in one transaction: both happen or neither.

        Returns the :class:`Claim` (the business writes are applied) or a :class:`Replay`
        (duplicate: nothing applied). Raises :class:`BusinessConditionFailedError` when one of
        your items failed its condition (the claim was rolled back: nothing is orphaned),
        :class:`InProgressError`, :class:`PayloadMismatchError`."""
        return self._drive(self.claim_with_steps(key, transact_items, payload, scope, lease))

    def complete_with(
        self, claim: Claim, transact_items: Sequence[dict[str, Any]], result: Any = None
    ) -> Replay:
        """Mark the key COMPLETED and apply ``transact_items`` in one transaction (fenced).

        Raises :class:`LostClaimError` (nothing applied) or
        :class:`BusinessConditionFailedError` (nothing applied; the claim stays PENDING: fail
        it or retry)."""
        return self._drive(self.complete_with_steps(claim, transact_items, result))

    # -- reads -----------------------------------------------------------------------------------

    def get(self, key: str, *, scope: str | None = None) -> Record | None:
        """The stored record (a consistent read), or ``None``; expired-but-present records are
        returned as they are (check :meth:`Record.expired`)."""
        return self._drive(self.get_steps(key, scope))
