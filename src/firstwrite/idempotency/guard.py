"""The synchronous guard: :class:`Idempotency`.

It holds a :class:`~._machine.machine.StateMachine` (every decision) and performs the machine's
effects with blocking calls on a boto3 client (:func:`._machine.driving.drive`); only ``run``, which
calls your function, is written here. :class:`~.aio.AsyncIdempotency` is the same over asyncio.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal, TypeVar

from ._machine import abandon, completion, migration, recovery, table_setup, transactional
from ._machine.budget import Deadline, release_grace, slowest_attempt, spent_before_run
from ._machine.driving import Driver, drive
from ._machine.machine import Clock, Monotonic, StateMachine
from .config import IdempotencyConfig, from_environment
from .effects import Steps, bind
from .metrics import Metrics
from .outcomes import UNSET, Claim, Outcome, Replay
from .record import Record
from .recovery import RUNNING, ReconcileHook, RecoveryPoint, check_blocking

__all__ = ["UNSET", "Claim", "Idempotency", "Outcome", "Replay"]

T = TypeVar("T")


class Idempotency(Driver):
    """The synchronous API.

    >>> guard = Idempotency(IdempotencyConfig(table_name="idem"), client=boto3.client("dynamodb"))
    >>> guard.run("order-42", lambda: charge(card, 10), payload={"card": card, "amount": 10})

    ``client`` is a boto3 low-level DynamoDB client; without one, a local engine database file
    is used (see :mod:`.local`). ``clock`` returns epoch seconds (tests pass the engine's
    clock); ``sleep`` and ``rng`` drive the retry policy's backoff; ``monotonic`` (default
    ``time.monotonic``) times the layer's own deadlines: the wait for a live request
    (``in_progress_wait``), a completion's retries (one lease), the wait for a new table.
    ``reconcile`` decides for a claim that replaces a record whose work marked recovery points
    (:mod:`.recovery`, docs/recovery.md); without it such a claim is refused.

    Methods: :meth:`run`, :meth:`claim`, :meth:`mark`, :meth:`complete`, :meth:`fail`, :meth:`renew`,
    :meth:`claim_with`, :meth:`complete_with`, :meth:`get`, :meth:`ensure_table`; attributes
    ``config``, ``client``, ``metrics``, ``is_async`` (``False``: it is a
    :class:`~.protocols.Guard`); :meth:`record_id` and :meth:`dynamodb_key` locate a key's
    record; :meth:`clock_estimate` is how far DynamoDB's clock is from ``clock``.
    """

    __slots__ = ("_methods", "_sleep")

    is_async: ClassVar[Literal[False]] = False
    """``False``: a :class:`~.protocols.Guard`: calls return their results."""

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
        monotonic: Monotonic = time.monotonic,
        reconcile: ReconcileHook | None = None,
    ) -> None:
        resolved = from_environment(config) or IdempotencyConfig()
        if client is None:
            from .local import default_client, default_clock

            client = default_client(resolved)
            if clock is time.time:  # the local engine's clock is DynamoDB's here
                clock = default_clock()
        machine = migration.install(
            StateMachine(
                resolved,
                clock=clock,
                metrics=metrics,
                non_retryable=non_retryable,
                rng=rng,
                monotonic=monotonic,
            )
        )
        super().__init__(machine, client)
        slowest = slowest_attempt(client)
        self._methods = {op: abandon.held(m, slowest) for op, m in bind(client).items()}
        self._sleep = sleep
        recovery.install(machine, check_blocking(reconcile))

    def _drive(self, steps: Steps[T], deadline: Deadline | None = None) -> T:
        return drive(steps, self._methods, self._sleep, deadline)

    def ensure_table(self) -> bool:
        """Create the table (on-demand, TTL enabled on ``expires_at``) if it does not exist;
        ``True`` when this call created it. Safe to call at every start, from many processes."""
        return self._drive(table_setup.ensure_table(self._machine))

    # -- claim and its transitions ---------------------------------------------------------------

    def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
        budget: float | None = None,
    ) -> Outcome:
        """Claim ``key`` (one conditional PutItem). Returns a :class:`Claim` to complete or
        fail, or a :class:`Replay` of the stored outcome. Raises :class:`~.errors.InProgressError`
        (after waiting up to ``wait`` seconds, default ``config.in_progress_wait``) and
        :class:`~.errors.PayloadMismatchError`; :class:`~.errors.DeadlineExceededError` when DynamoDB keeps
        failing for the call's ``budget`` (seconds, default ``config.budget``; every method
        takes one)."""
        deadline = self._deadline(budget)
        return self._drive(
            self._machine.claim(key, payload, scope, lease, wait, deadline), deadline
        )

    def complete(self, claim: Claim, result: Any = None, *, budget: float | None = None) -> Replay:
        """Store ``result`` and mark the key COMPLETED (fenced by owner and version).

        Raises :class:`~.errors.LostClaimError` if another worker took the key over; nothing is written.
        A result that cannot be stored (:class:`~.errors.SerializationError`, including
        :class:`~.errors.ResultTooLargeError`) marks the key FAILED for good, because the side effect
        has happened and must not run again, and is then raised. A write that keeps failing
        (throttling, 5xx, no connection) is retried, with the lease renewed, for up to one
        lease, and never past the call's budget (the first attempt is always made); then
        :class:`~.errors.CompletionNotRecordedError` carries ``result``."""
        deadline = self._deadline(budget)
        return self._drive(completion.answered(self._machine, claim, result, deadline), deadline)

    def fail(
        self,
        claim: Claim,
        error: BaseException | str,
        *,
        retryable: bool,
        data: Any = None,
        budget: float | None = None,
    ) -> None:
        """Mark the key FAILED. ``retryable=True`` lets the same request claim it again at once;
        ``False`` makes the failure the key's final answer, replayed to duplicates."""
        deadline = self._deadline(budget)
        steps = self._machine.fail(claim, error, retryable=retryable, data=data, deadline=deadline)
        self._drive(steps, deadline)

    def renew(
        self, claim: Claim, lease: float | None = None, *, budget: float | None = None
    ) -> Claim:
        """Extend the lease of a live claim (long work). Returns the claim to use from now on."""
        deadline = self._deadline(budget)
        return self._drive(self._machine.renew(claim, lease, deadline), deadline)

    def mark(
        self,
        claim: Claim,
        step: str,
        reference: str | None = None,
        *,
        budget: float | None = None,
    ) -> RecoveryPoint:
        """Record on ``claim``'s record that ``step`` is about to start (or has started), with
        ``reference`` (e.g. the key passed downstream): one fenced UpdateItem, kept in order
        with the claim's other points. A later claim of the key reconciles instead of rerunning
        (:mod:`.recovery`). Raises :class:`~.errors.LostClaimError` when the claim is no longer
        the record's."""
        deadline = self._deadline(budget)
        return self._drive(recovery.mark(self._machine, claim, step, reference, deadline), deadline)

    # -- the whole dance -------------------------------------------------------------------------

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
        budget: float | None = None,
    ) -> T:
        """Run ``fn`` at most once per key (within retention); duplicates get its result
        (through ``config.on_replay`` when set). With ``config.disabled``, ``fn`` just runs.

        An exception from ``fn`` marks the key FAILED, retryable unless it is an instance of
        ``non_retryable`` (or has ``idempotency_retryable = False``), and is re-raised.

        One ``budget`` (default ``config.budget``) covers the whole call, ``fn`` included: the
        claim's retries stop at it (:class:`~.errors.DeadlineExceededError`, ``fn`` not run), and the
        completion's retries too (its first attempt is always made; then
        :class:`~.errors.CompletionNotRecordedError`)."""
        # drive() called directly, not through claim() and complete(): two frames less per call
        machine, methods, sleep = self._machine, self._methods, self._sleep
        config = machine.config
        if config.disabled:
            return fn()
        deadline = self._deadline(budget)
        outcome = drive(
            machine.claim(key, payload, scope, lease, wait, deadline), methods, sleep, deadline
        )
        if isinstance(outcome, Replay):
            value: T = outcome.answer(result_type, config.on_replay)
            return value
        self._check_left(outcome, deadline)
        token = RUNNING.set((self, outcome))
        try:
            result = fn()
        except BaseException as exc:
            self._fail_quietly(outcome, exc, deadline)
            raise
        finally:
            RUNNING.reset(token)
        drive(
            completion.complete(machine, outcome, result, False, deadline), methods, sleep, deadline
        )
        return result

    def _fail_quietly(
        self, claim: Claim, exc: BaseException, deadline: Deadline | None = None
    ) -> None:
        self._drive(self._machine.fail_quietly(claim, exc, deadline), deadline)

    def _check_left(self, claim: Claim, deadline: Deadline | None) -> None:
        """Raise :class:`~.errors.DeadlineExceededError` when ``claim`` came back with the
        budget spent: the function must not start; the claim is released first, so a retry
        can take the key at once."""
        late = spent_before_run(claim.idempotency_key or claim.record_id, claim.record_id, deadline)
        if late is None:
            return
        assert deadline is not None
        grace = release_grace(deadline)
        self._drive(self._machine.fail_quietly(claim, late, grace), grace)
        raise late

    # -- variant 3: with the caller's business writes --------------------------------------------

    def claim_with(
        self,
        key: str,
        transact_items: Sequence[dict[str, Any]],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        budget: float | None = None,
    ) -> Outcome:
        """Claim ``key`` and apply ``transact_items`` (TransactWriteItems entries, low-level
        shape) in one transaction: both happen or neither.

        Returns the :class:`Claim` (the business writes are applied) or a :class:`Replay`
        (duplicate: nothing applied). Raises :class:`~.errors.BusinessConditionFailedError` when one of
        your items failed its condition (the claim was rolled back: nothing is orphaned),
        :class:`~.errors.InProgressError`, :class:`~.errors.PayloadMismatchError`."""
        deadline = self._deadline(budget)
        steps = transactional.claim_with(
            self._machine, key, transact_items, payload, scope, lease, deadline
        )
        return self._drive(steps, deadline)

    def complete_with(
        self,
        claim: Claim,
        transact_items: Sequence[dict[str, Any]],
        result: Any = None,
        *,
        budget: float | None = None,
    ) -> Replay:
        """Mark the key COMPLETED and apply ``transact_items`` in one transaction (fenced).

        Raises :class:`~.errors.LostClaimError` (nothing applied) or
        :class:`~.errors.BusinessConditionFailedError` (nothing applied; the claim stays PENDING: fail
        it or retry)."""
        deadline = self._deadline(budget)
        steps = transactional.complete_with(self._machine, claim, transact_items, result, deadline)
        return self._drive(steps, deadline)

    # -- reads -----------------------------------------------------------------------------------

    def replays(
        self,
        requests: Sequence[tuple[str, Any]],
        *,
        scope: str | None = None,
        budget: float | None = None,
    ) -> list[Replay | None]:
        """For each ``(key, payload)``, the :class:`Replay` its claim would answer now, read
        in one consistent ``BatchGetItem`` per 100 keys and claiming nothing; ``None`` where
        only a claim can decide (nothing stored, still running, claimable, another payload).
        Worth it for requests likely done before (redeliveries): each answered one saves its
        claim's conditional write; the others cost their share of the read."""
        deadline = self._deadline(budget)
        return self._drive(self._machine.replays(requests, scope, deadline), deadline)

    def get(
        self, key: str, *, scope: str | None = None, budget: float | None = None
    ) -> Record | None:
        """The stored record (a consistent read), or ``None``; expired-but-present records are
        returned as they are (check :meth:`Record.expired`)."""
        deadline = self._deadline(budget)
        return self._drive(self._machine.get(key, scope, deadline), deadline)
