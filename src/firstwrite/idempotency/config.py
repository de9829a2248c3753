"""Configuration: one frozen object, safe defaults, ``ValueError`` for anything unsafe.

The defaults follow the starting design: a duplicate of a live request waits a short, bounded
time for it (``in_progress_wait``: consistent reads with backoff, never past the call's budget
nor the live claim's lease) before "in progress"; ``0`` answers at once, at Powertools' cost of
one write. No consumed-capacity reporting and no local cache unless turned on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

from .clock_skew import ClockSkewPolicy
from .errors import ConfigurationError
from .key_migration import KeyMigration
from .layout import DEFAULT, RecordLayout
from .result_cipher import ResultCipher
from .result_store import ResultStore

MissingKeyMode = Literal["raise", "run-unguarded"]
MISSING_KEY_MODES: tuple[MissingKeyMode, ...] = ("raise", "run-unguarded")
ReplayMode = Literal["full", "status-only"]
REPLAY_MODES: tuple[ReplayMode, ...] = ("full", "status-only")
DISABLED_ENV = "FIRSTWRITE_IDEMPOTENCY_DISABLED"
"""Set to ``1`` (or ``true``, ``yes``, ``on``) to make every guard built afterwards call its
functions directly: for local runs only (duplicates then run twice)."""
_log = logging.getLogger("firstwrite.idempotency")
MAX_ITEM_SIZE = 400 * 1024  # DynamoDB's item limit, attribute names included
_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")  # DynamoDB table-name rule


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter for throttling and 5xx (never for failed
    conditions): attempt ``n`` sleeps ``uniform(0, min(cap, base * 2**n))``."""

    max_attempts: int = 4
    base: float = 0.025
    cap: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError("retry.max_attempts must be >= 1 (1 = no retry)")
        if not (self.base > 0 and self.cap >= self.base):
            raise ConfigurationError("retry needs base > 0 and cap >= base")

    @property
    def ceiling(self) -> float:
        """The longest total time this policy can spend sleeping."""
        return float(sum(min(self.cap, self.base * 2.0**n) for n in range(self.max_attempts - 1)))


class InFlight(NamedTuple):
    """What a duplicate knows about the live request it is told to wait for: the argument of a
    :class:`RetryAfter` rule. Times are epoch seconds. (A named tuple: one is made for every
    "in progress" answer, and a frozen dataclass costs several times as much to build.)"""

    key: str
    claimed_at: float | None  # from the live claim's owner token (None: a foreign token)
    lease_expires_at: float
    now: float

    @property
    def elapsed(self) -> float:
        """How long the live request has been running."""
        return _elapsed(self.claimed_at, self.now)

    @property
    def lease_remaining(self) -> float:
        """How long until the live claim may be taken over."""
        return _remaining(self.lease_expires_at, self.now)


def _elapsed(claimed_at: float | None, now: float) -> float:
    return 0.0 if claimed_at is None else max(0.0, now - claimed_at)


def _remaining(lease_expires_at: float, now: float) -> float:
    return max(0.0, lease_expires_at - now)


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """How long a duplicate of a live request is told to wait: ``InProgressError.retry_after``,
    and the HTTP ``Retry-After`` header built from it.

    * ``expected``: the work's usual duration (seconds). The answer is what is left of it since
      the live request was claimed, and at least ``poll``.
    * ``poll``: the least wait; the whole answer when ``expected`` is ``None``
      (:meth:`every`), or once the live request has run longer than expected.
    * ``rule``: your own function of :class:`InFlight` (:meth:`using`); wins over both.

    The answer is never negative and never more than the live claim's remaining lease (after
    it, a retry takes the key over). The default, ``expected=1.0, poll=0.5``, suits requests
    that take about a second; set ``expected`` to your work's usual duration.
    """

    expected: float | None = 1.0
    poll: float = 0.5
    rule: Callable[[InFlight], float] | None = None

    def __post_init__(self) -> None:
        if not self.poll > 0:
            raise ConfigurationError("retry_after.poll must be > 0 seconds")
        if self.expected is not None and self.expected < 0:
            raise ConfigurationError("retry_after.expected must be >= 0 seconds (or None)")

    @classmethod
    def every(cls, seconds: float) -> RetryAfter:
        """A fixed poll interval."""
        return cls(expected=None, poll=seconds)

    @classmethod
    def expected_duration(cls, seconds: float, *, poll: float = 0.5) -> RetryAfter:
        """What is left of ``seconds`` since the live request was claimed (at least ``poll``)."""
        return cls(expected=seconds, poll=poll)

    @classmethod
    def using(cls, rule: Callable[[InFlight], float]) -> RetryAfter:
        """Your own rule: ``rule(in_flight) -> seconds``."""
        return cls(rule=rule)

    def __call__(self, live: InFlight) -> float:
        return self.answer(live.key, live.claimed_at, live.lease_expires_at, live.now)[0]

    def answer(
        self, key: str, claimed_at: float | None, lease_expires_at: float, now: float
    ) -> tuple[float, float]:
        """``(self(InFlight(key, claimed_at, lease_expires_at, now)), its lease_remaining)``:
        what an "in progress" answer needs, with the :class:`InFlight` built only for a
        ``rule`` (one answer per duplicate of a live request: the default policy needs none)."""
        remaining = _remaining(lease_expires_at, now)
        if self.rule is not None:
            wait = float(self.rule(InFlight(key, claimed_at, lease_expires_at, now)))
        elif self.expected is None:
            wait = self.poll
        else:
            wait = max(self.poll, self.expected - _elapsed(claimed_at, now))
        return min(max(wait, 0.0), remaining), remaining


@dataclass(frozen=True, slots=True)
class IdempotencyConfig:
    """Everything the layer needs to know; immutable, validated at construction.

    Times are seconds. ``retention`` is how long a COMPLETED (or non-retryable FAILED) record
    answers duplicates; it must cover ``client_retry_ceiling``, the longest time after a first
    attempt that any client may still retry, or a retry could arrive after TTL removed the
    record and run the side effect again.

    ``budget`` is the time one guarded call may take (``run``, ``claim``, ``complete``..., a
    request through the middleware): every retry, the client's own included, fits inside it,
    and past it the call raises :class:`~.errors.DeadlineExceededError` (retryable) instead of
    retrying on; ``None`` sets no bound. A call may pass its own (``budget=``).

    ``retry_after`` is the policy behind ``InProgressError.retry_after``. With
    ``refuse_late_retries``, a request whose key's record is past retention (still stored, or
    removed by TTL and remembered by the TTL audit's tombstone) and that carries the same
    fingerprint is refused with :class:`~.errors.LateRetryError` instead of running again; by
    default such a late retry runs and is counted and logged (see ``docs/guarantees.md``).

    ``on_missing_key`` is what a decorated call whose key selector finds nothing does:
    ``"raise"`` (:class:`~.errors.MissingKeyError`), or ``"run-unguarded"``: the function runs
    without the layer, with a logged warning and ``firstwrite_unguarded_runs_total`` counted
    (Powertools' ``raise_on_no_idempotency_key=False``). ``on_replay(key, value)`` is called
    once for every replay ``run`` and the decorators answer, with the stored result as it is
    returned; what it returns is returned instead (``None``: the value unchanged). ``disabled``
    makes ``run`` and the decorators call the function directly; the guards set it when
    ``FIRSTWRITE_IDEMPOTENCY_DISABLED`` is set (:func:`from_environment`).

    ``result_store`` (:mod:`.result_store`) takes results whose stored form is over
    ``result_store_threshold`` bytes, or over what the record can hold, and the record keeps a
    pointer; ``result_cipher`` (:mod:`.result_cipher`) seals every stored result to its record
    (``docs/results.md``). ``replay="status-only"`` records no result at all, only that the
    call completed: a replay answers ``{"status": "COMPLETED", "idempotency_key": ...,
    "record_id": ...}`` (for calls whose result is a secret minted once).

    ``layout`` names the record's attributes: :class:`~.layout.RecordLayout` (the default) or
    ``RecordLayout.seed_001()`` for seed 001's item (see ``docs/idempotency-record.md``).
    ``load_result(result_id)`` turns the ``resultId`` of a succeeded *hand-built* row (one
    without ``owner``) into the replayed value (default: the ``resultId`` as stored); called in
    the caller's thread each time such a replay is answered.

    ``key_migration`` (:class:`~.key_migration.KeyMigration`) names the previous key schemes
    whose keys are also claimed, completed and failed until its window ends
    (``docs/migrations.md``); ``None``, the default, writes this configuration's key alone.

    ``clock_skew`` (:class:`~.clock_skew.ClockSkewPolicy`) puts leases on DynamoDB's clock, as
    estimated from its answers' ``Date``, and bounds the offset trusted for a takeover
    (``docs/guarantees.md``, "Clocks"); ``ClockSkewPolicy(enabled=False)`` compares leases on
    the guard's own clock.
    """

    table_name: str = "firstwrite-idempotency"
    scope: str = ""
    key_prefix: str = "IDEMPOTENCY"
    partition_key: str = "pk"
    sort_key: str | None = None
    retention: float = 24 * 3600.0
    client_retry_ceiling: float = 3600.0
    lease: float = 60.0
    budget: float | None = 10.0
    in_progress_wait: float = 1.0
    poll_interval: float = 0.02
    hash_function: str = "sha256"
    max_key_length: int = 250
    payload_validation: bool = True
    local_cache_size: int = 0
    compress_threshold: int = 4096
    compression_level: int = 6
    max_item_size: int = MAX_ITEM_SIZE
    region: str | None = None
    return_consumed_capacity: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    retry_after: RetryAfter = field(default_factory=RetryAfter)
    refuse_late_retries: bool = False
    on_missing_key: MissingKeyMode = "raise"
    on_replay: Callable[[str, Any], Any] | None = None
    disabled: bool = False
    layout: RecordLayout = DEFAULT
    load_result: Callable[[Any], Any] | None = None
    key_migration: KeyMigration | None = None
    result_store: ResultStore | None = None
    result_store_threshold: int = 64 * 1024
    result_cipher: ResultCipher | None = None
    replay: ReplayMode = "full"
    clock_skew: ClockSkewPolicy = field(default_factory=ClockSkewPolicy)

    def __post_init__(self) -> None:
        if not _NAME.match(self.table_name):
            raise ConfigurationError(f"invalid DynamoDB table name {self.table_name!r}")
        if not self.partition_key or self.partition_key == self.sort_key:
            raise ConfigurationError("partition_key must be non-empty and differ from sort_key")
        if "#" in self.key_prefix or not self.key_prefix:
            raise ConfigurationError("key_prefix must be non-empty and must not contain '#'")
        if self.lease <= 0:
            raise ConfigurationError("lease must be > 0 seconds")
        if self.retention < 1:
            raise ConfigurationError("retention must be >= 1 second")
        if self.retention < self.lease:
            raise ConfigurationError("retention must be >= lease")
        if self.client_retry_ceiling < 0:
            raise ConfigurationError("client_retry_ceiling must be >= 0")
        if self.retention < self.client_retry_ceiling:
            # The TTL race: a retry arriving after the record's removal looks like a new key.
            raise ConfigurationError(
                f"retention ({self.retention}s) must cover client_retry_ceiling "
                f"({self.client_retry_ceiling}s): a retry after the record expires would run "
                "the side effect again"
            )
        if self.budget is not None and not self.budget > 0:
            raise ConfigurationError("budget must be > 0 seconds (or None: no bound)")
        if self.in_progress_wait < 0 or self.poll_interval <= 0:
            raise ConfigurationError("in_progress_wait must be >= 0 and poll_interval > 0")
        try:
            hashlib.new(self.hash_function)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"unknown hash function {self.hash_function!r}") from exc
        if self.hash_function in ("md5", "sha1"):
            raise ConfigurationError("md5 and sha1 are not collision resistant; use sha256")
        if not 64 <= self.max_key_length <= 1024:
            raise ConfigurationError("max_key_length must be within 64..1024")
        if self.local_cache_size < 0:
            raise ConfigurationError("local_cache_size must be >= 0")
        if self.compress_threshold < 0 or not 0 <= self.compression_level <= 9:
            raise ConfigurationError("compress_threshold >= 0 and compression_level 0..9")
        if not isinstance(self.retry_after, RetryAfter):
            raise ConfigurationError(
                "retry_after must be a RetryAfter policy (RetryAfter.every(s), "
                "RetryAfter.expected_duration(s) or RetryAfter.using(fn))"
            )
        if not isinstance(self.layout, RecordLayout):
            raise ConfigurationError(
                "layout must be a RecordLayout (RecordLayout() or RecordLayout.seed_001())"
            )
        if self.partition_key in self.layout.names().values() or (
            self.sort_key is not None and self.sort_key in self.layout.names().values()
        ):
            raise ConfigurationError("the key attributes must differ from the layout's names")
        if not 1024 <= self.max_item_size <= MAX_ITEM_SIZE:
            raise ConfigurationError(f"max_item_size must be within 1024..{MAX_ITEM_SIZE}")
        if self.on_missing_key not in MISSING_KEY_MODES:
            raise ConfigurationError(
                f"on_missing_key must be one of {', '.join(map(repr, MISSING_KEY_MODES))}"
            )
        if self.result_store is not None and not isinstance(self.result_store, ResultStore):
            raise ConfigurationError("result_store must be a ResultStore (docs/results.md)")
        if self.result_cipher is not None and not isinstance(self.result_cipher, ResultCipher):
            raise ConfigurationError("result_cipher must be a ResultCipher (docs/results.md)")
        if self.result_store_threshold < 0:
            raise ConfigurationError("result_store_threshold must be >= 0 bytes")
        if self.replay not in REPLAY_MODES:
            raise ConfigurationError(f"replay must be one of {', '.join(map(repr, REPLAY_MODES))}")
        if self.on_replay is not None and not callable(self.on_replay):
            raise ConfigurationError("on_replay must be a function of (key, value)")
        if self.load_result is not None and not callable(self.load_result):
            raise ConfigurationError("load_result must be a function of (result_id)")
        if self.key_migration is not None:
            self._check_migration(self.key_migration)

    def _check_migration(self, migration: KeyMigration) -> None:
        if not isinstance(migration, KeyMigration):
            raise ConfigurationError("key_migration must be a KeyMigration (or None)")
        keys = {self.partition_key, self.sort_key}
        for scheme in migration.previous:
            if keys & set(scheme.layout.names().values()):
                raise ConfigurationError(
                    "the key attributes must differ from the previous scheme's layout's names"
                )
            same_key = scheme.key_prefix == self.key_prefix and scheme.scope == self.scope
            if same_key and (not scheme.empty_scope_part or self.sort_key is not None):
                raise ConfigurationError(
                    f"the previous key scheme {scheme.name!r} writes the same keys as this "
                    "configuration: a layout alone cannot be dual-written (one item per key), "
                    "change the key_prefix with it (docs/migrations.md)"
                )

    def with_(self, **changes: Any) -> IdempotencyConfig:
        """A copy with ``changes`` applied (and validated)."""
        return replace(self, **changes)


_warned_disabled = False


def from_environment(config: IdempotencyConfig | None) -> IdempotencyConfig | None:
    """``config`` with ``disabled=True`` when :data:`DISABLED_ENV` is set (read at each guard's
    construction, never per call); the first time, a warning is logged."""
    global _warned_disabled
    if os.environ.get(DISABLED_ENV, "").strip().lower() not in ("1", "true", "yes", "on"):
        return config
    if not _warned_disabled:
        _warned_disabled = True
        _log.warning(
            "%s is set: idempotency guards call functions directly, duplicates run again",
            DISABLED_ENV,
        )
    return (config or IdempotencyConfig()).with_(disabled=True)
