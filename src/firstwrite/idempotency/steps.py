"""A guard's calls as plain values, and the drivers that make them: for code built on a guard.
A decision made with a guard (the middleware's, a consumer's) is a generator yielding these
steps, sent each result and thrown each exception; :func:`drive` makes the calls on a
:class:`~.protocols.Guard`, :func:`adrive` awaits them on an :class:`~.protocols.AsyncGuard`
(a synchronous guard's in a worker thread); :func:`working` surrounds the claim's work.

=======================  ==================================================  ==================
step                     guard call                                          answer
=======================  ==================================================  ==================
:class:`ClaimKey`        ``claim(key, payload, scope=, lease=, wait=)``      a Claim or Replay
:class:`ClaimWithItems`  ``claim_with(key, transact_items, payload, ...)``   a Claim or Replay
:class:`CompleteClaim`   ``complete(claim, result)``                         a Replay
:class:`FailClaim`       ``fail(claim, error, retryable=, data=)``           ``None``
:class:`ReleaseClaim`    ``fail(claim, reason, retryable=True)``             ``None``
:class:`RenewClaim`      ``renew(claim, lease)``                             the renewed Claim
:class:`MarkClaim`       ``mark(claim, step, reference)``                    a RecoveryPoint
:class:`ReadRecord`      ``get(key, scope=)``                                a Record or None
:class:`ReadReplays`     ``replays(requests, scope=)``                       Replay or None each
=======================  ==================================================  ==================
"""

# Every step takes the call's ``budget`` too (``None``: the guard's own). A generator may yield
# effects of its own besides (an event consumer's "run the handler"): the drivers hand those to
# the ``other`` function they are given. Two levels of effects: a step here is one guard call;
# inside the guard, that call runs one transition of the state machine, a generator of DynamoDB
# calls (.effects: Call, Sleep) the guard performs on its client. Both levels run on the one
# effect loop of .effects (perform, aperform), so an exception is thrown into a generator the
# same way at both.

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn, TypeAlias, TypeVar, cast

from .effects import aperform, perform
from .outcomes import UNSET, Claim
from .protocols import AsyncGuard, Guard
from .recovery import RUNNING

__all__ = [
    "ClaimKey",
    "ClaimWithItems",
    "CompleteClaim",
    "FailClaim",
    "GuardStep",
    "MarkClaim",
    "ReadRecord",
    "ReadReplays",
    "ReleaseClaim",
    "RenewClaim",
    "Steps",
    "adrive",
    "drive",
    "working",
]

T = TypeVar("T")

AnyGuard: TypeAlias = Guard | AsyncGuard


class GuardStep:
    """One guard call; :meth:`call` makes it (a coroutine on an :class:`AsyncGuard`)."""

    __slots__ = ()

    def call(self, guard: AnyGuard) -> object:  # pragma: no cover - every step overrides it
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class ClaimKey(GuardStep):
    """``guard.claim(key, payload, scope=, lease=, wait=, budget=)``: answered with a
    :class:`~.outcomes.Claim` or a :class:`~.outcomes.Replay`."""

    key: str
    payload: Any = UNSET
    scope: str | None = None
    lease: float | None = None
    wait: float | None = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.claim(
            self.key,
            self.payload,
            scope=self.scope,
            lease=self.lease,
            wait=self.wait,
            budget=self.budget,
        )


@dataclass(frozen=True, slots=True)
class ClaimWithItems(GuardStep):
    """``guard.claim_with(key, transact_items, payload, scope=, lease=, budget=)``: the claim
    and the caller's writes in one transaction; answered as :class:`ClaimKey` is."""

    key: str
    transact_items: Sequence[dict[str, Any]]
    payload: Any = UNSET
    scope: str | None = None
    lease: float | None = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.claim_with(
            self.key,
            self.transact_items,
            self.payload,
            scope=self.scope,
            lease=self.lease,
            budget=self.budget,
        )


@dataclass(frozen=True, slots=True)
class CompleteClaim(GuardStep):
    """``guard.complete(claim, result, budget=)``: answered with the stored
    :class:`~.outcomes.Replay`."""

    claim: Claim
    result: Any = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.complete(self.claim, self.result, budget=self.budget)


@dataclass(frozen=True, slots=True)
class FailClaim(GuardStep):
    """``guard.fail(claim, error, retryable=, data=, budget=)``: answered with ``None``."""

    claim: Claim
    error: BaseException | str
    retryable: bool
    data: Any = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.fail(
            self.claim, self.error, retryable=self.retryable, data=self.data, budget=self.budget
        )


@dataclass(frozen=True, slots=True)
class ReleaseClaim(GuardStep):
    """Free the key for the next request with it: ``guard.fail(claim, reason,
    retryable=True, budget=)``, answered with ``None``."""

    claim: Claim
    reason: str
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.fail(self.claim, self.reason, retryable=True, budget=self.budget)


@dataclass(frozen=True, slots=True)
class RenewClaim(GuardStep):
    """``guard.renew(claim, lease, budget=)``: answered with the claim to use from now on."""

    claim: Claim
    lease: float | None = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.renew(self.claim, self.lease, budget=self.budget)


@dataclass(frozen=True, slots=True)
class MarkClaim(GuardStep):
    """``guard.mark(claim, step, reference, budget=)``: a recovery point on the claim's record
    (:mod:`.recovery`); answered with the :class:`~.recovery.RecoveryPoint`."""

    claim: Claim
    step: str
    reference: str | None = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.mark(self.claim, self.step, self.reference, budget=self.budget)


@dataclass(frozen=True, slots=True)
class ReadRecord(GuardStep):
    """``guard.get(key, scope=, budget=)``: answered with the stored record or ``None``."""

    key: str
    scope: str | None = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.get(self.key, scope=self.scope, budget=self.budget)


@dataclass(frozen=True, slots=True)
class ReadReplays(GuardStep):
    """``guard.replays(requests, scope=, budget=)``: answered with one
    :class:`~.outcomes.Replay` or ``None`` per ``(key, payload)``."""

    requests: tuple[tuple[str, Any], ...]
    scope: str | None = None
    budget: float | None = None

    def call(self, guard: AnyGuard) -> object:
        return guard.replays(self.requests, scope=self.scope, budget=self.budget)


Steps: TypeAlias = Generator[Any, Any, T]
"""A decision: yields :class:`GuardStep` values (and any effects of the caller's own), is sent
their answers, returns its outcome."""


def _no_other(effect: object) -> NoReturn:
    raise TypeError(f"not a guard step, and the driver was given no other effects: {effect!r}")


def drive(steps: Steps[T], guard: Guard, other: Callable[[Any], object] = _no_other) -> T:
    """Run ``steps`` to its end on a synchronous ``guard``: each :class:`GuardStep` is made
    (its exception thrown in), any other effect answered by ``other(effect)``."""

    def answer(effect: Any) -> object:
        if isinstance(effect, GuardStep):
            return effect.call(guard)
        return other(effect)

    return perform(steps, answer)


async def adrive(
    steps: Steps[T],
    guard: Guard | AsyncGuard,
    other: Callable[[Any], Awaitable[object]] | None = None,
) -> T:
    """:func:`drive` with each call awaited: an :class:`AsyncGuard`'s own coroutines, a
    synchronous guard's calls each in a worker thread (the event loop never blocks on one);
    other effects are answered by ``await other(effect)``."""
    threaded = not guard.is_async

    def answer(effect: Any) -> Awaitable[object]:
        if isinstance(effect, GuardStep):
            if threaded:
                return asyncio.to_thread(effect.call, guard)
            return cast(Awaitable[object], effect.call(guard))  # an AsyncGuard's coroutine
        if other is None:
            _no_other(effect)
        return other(effect)

    return await aperform(steps, answer)


@contextmanager
def working(claim: Claim | None, guard: AnyGuard) -> Iterator[None]:
    """Around a claim's work run by code built on a guard (the middleware, the consumers):
    :func:`~.recovery.recovery_point` marks ``claim`` through ``guard`` (nothing for
    ``None``: no claim, nothing to mark)."""
    if claim is None:
        yield
        return

    token = RUNNING.set((guard, claim))
    try:
        yield
    finally:
        RUNNING.reset(token)
