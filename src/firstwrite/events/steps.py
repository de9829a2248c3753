"""What a consumer asks of the world: effects as plain values, one generator of them per batch.

:class:`~.core.Consumer` decides everything (claim, run, complete, fail, count an attempt, give
up, skip) in a generator that yields these effects and is sent back their answers (or has the
error thrown in); it does no I/O. A driver does the I/O: :func:`._driving.drive` with a
synchronous guard and a handler in this thread, :func:`.aio.adrive` with ``await``. So the
synchronous and the asyncio consumers make the same decisions from the same code. Effects are
named tuples, as the layer's are: several are built per record, and a named tuple is the
cheapest immutable value to build.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from firstwrite.idempotency import Claim

__all__ = [
    "ClaimKey",
    "CompleteClaim",
    "Effect",
    "FailClaim",
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


class ClaimKey(NamedTuple):
    """``guard.claim(key, payload, scope=, lease=, wait=)``: answered with its outcome."""

    key: str
    payload: Any
    scope: str | None
    lease: float | None = None
    wait: float | None = None


class CompleteClaim(NamedTuple):
    """``guard.complete(claim, result)``."""

    claim: Claim
    result: Any


class FailClaim(NamedTuple):
    """``guard.fail(claim, error, retryable=, data=)``."""

    claim: Claim
    error: BaseException | str
    retryable: bool
    data: Any = None


class ReadRecord(NamedTuple):
    """``guard.get(key, scope=)``: answered with the stored record or ``None``."""

    key: str
    scope: str | None


class ReadReplays(NamedTuple):
    """``guard.replays(requests, scope=)``: answered with one ``Replay`` or ``None`` per
    ``(key, payload)``."""

    requests: tuple[tuple[str, Any], ...]
    scope: str | None


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


Effect: TypeAlias = (
    ClaimKey
    | CompleteClaim
    | FailClaim
    | ReadRecord
    | ReadReplays
    | RunHandler[Any]
    | RunUnguarded[Any]
)
Steps: TypeAlias = Generator[Effect, Any, T]
