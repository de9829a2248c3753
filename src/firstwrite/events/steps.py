"""What a consumer asks of the world: effects as plain values, one generator of them per batch.

:class:`~.core.Consumer` decides everything (claim, run, complete, fail, count an attempt, give
up, skip) in a generator that yields these effects and is sent back their answers (or has the
error thrown in); it does no I/O. Its calls to the guard are the layer's guard steps
(:mod:`firstwrite.idempotency.steps`: :class:`ClaimKey`, :class:`CompleteClaim`,
:class:`FailClaim`, :class:`ReadRecord`, :class:`ReadReplays`, re-exported here); the two
effects of its own are running the handler (:class:`RunHandler`, :class:`RunUnguarded`).

A driver does the I/O: :func:`._driving.drive` with a synchronous guard and a handler in this
thread, :func:`._adriving.adrive` with ``await``; both hand the guard steps to the layer's
drivers (:func:`firstwrite.idempotency.steps.drive`, :func:`~firstwrite.idempotency.steps.adrive`)
and answer the handler effects themselves. So the synchronous and the asyncio consumers make
the same decisions from the same code. The handler effects are named tuples: one is built per
record, and a named tuple is the cheapest immutable value to build.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from firstwrite.idempotency import Claim
from firstwrite.idempotency.steps import (
    ClaimKey,
    CompleteClaim,
    FailClaim,
    GuardStep,
    ReadRecord,
    ReadReplays,
)

__all__ = [
    "ClaimKey",
    "CompleteClaim",
    "Effect",
    "FailClaim",
    "GuardStep",
    "HandlerEffect",
    "Keepalive",
    "Ran",
    "ReadRecord",
    "ReadReplays",
    "RunHandler",
    "RunUnguarded",
    "Steps",
]

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Keepalive:
    """Keep a record's claim alive while its handler runs: every ``every`` seconds renew the
    lease to ``lease`` seconds and call ``extend`` (for example SQS's
    ``ChangeMessageVisibility``; under asyncio it may return an awaitable, which is awaited),
    so the broker and the claim expire together."""

    every: float
    lease: float | None = None
    extend: Callable[[], object] | None = None


class RunHandler(NamedTuple, Generic[R]):
    """Run the handler on ``record`` while ``keepalive`` renews ``claim``: answered with
    :class:`Ran` (never thrown: the handler's error is a value here)."""

    record: R
    claim: Claim
    keepalive: Keepalive | None


class Ran(NamedTuple):
    """How a handler run ended: its result, or the error it raised (``Exception``: it
    failed; any other ``BaseException``: it was interrupted), and the claim as last renewed."""

    claim: Claim
    result: object = None
    error: BaseException | None = None


class RunUnguarded(NamedTuple, Generic[R]):
    """Run the handler on ``record`` with no claim (the layer is disabled): answered with its
    result; its error is thrown into the steps."""

    record: R


HandlerEffect: TypeAlias = RunHandler[Any] | RunUnguarded[Any]
"""The effects a consumer's driver answers itself; the others are :class:`GuardStep` values."""
Effect: TypeAlias = GuardStep | HandlerEffect
Steps: TypeAlias = Generator[Effect, Any, T]
