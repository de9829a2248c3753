"""What code built on the layer may rely on of a guard.

:class:`Guard` (synchronous) and :class:`AsyncGuard` (asyncio): the calls the HTTP middleware
and the event consumers make (as the steps of :mod:`.steps`), declared here once. The event
consumers' own protocol (``firstwrite.events.guard.EventGuard``) extends these with the one
attribute it needs besides, ``metrics``.

:class:`~.guard.Idempotency` is a :class:`Guard` and :class:`~.aio.AsyncIdempotency` an
:class:`AsyncGuard` (``tests/idempotency/test_package_surface.py`` checks both, with mypy and at
run time). Anything else with the same methods is one too, a test double or a wrapper, as long
as it says which kind it is: ``is_async`` is ``False`` on a :class:`Guard` and ``True`` on an
:class:`AsyncGuard`. That attribute, not the look of a method, is how a caller that takes either
decides whether to await the calls or to run them in a worker thread; a type checker narrows
``Guard | AsyncGuard`` on it. Both protocols are runtime-checkable, so ``isinstance(x, Guard)``
tells a guard (of either kind: the methods have the same names) from anything else, a factory
of one for instance.

The methods' contracts are those of :class:`~.guard.Idempotency`'s methods of the same names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from .config import IdempotencyConfig
from .outcomes import UNSET, Claim, Outcome, Replay
from .record import Record
from .recovery import RecoveryPoint

__all__ = ["AsyncGuard", "Guard"]


@runtime_checkable
class Guard(Protocol):
    """A synchronous guard: each call blocks until DynamoDB answers."""

    @property
    def is_async(self) -> Literal[False]:
        """``False``: the calls return their results."""
        ...

    @property
    def config(self) -> IdempotencyConfig:
        """The configuration (the middleware passes requests through when ``disabled``)."""
        ...

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
        """A :class:`Claim` of ``key``, or a :class:`Replay` of its stored outcome."""
        ...

    def complete(self, claim: Claim, result: Any = None, *, budget: float | None = None) -> Replay:
        """Store ``result``: the key is COMPLETED."""
        ...

    def fail(
        self,
        claim: Claim,
        error: BaseException | str,
        *,
        retryable: bool,
        data: Any = None,
        budget: float | None = None,
    ) -> None:
        """The key is FAILED: free again (``retryable``) or for good."""
        ...

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
        """Claim ``key`` and apply ``transact_items`` in one transaction, or replay."""
        ...

    def renew(
        self, claim: Claim, lease: float | None = None, *, budget: float | None = None
    ) -> Claim:
        """Extend a live claim's lease; the claim to use from now on."""
        ...

    def mark(
        self, claim: Claim, step: str, reference: str | None = None, *, budget: float | None = None
    ) -> RecoveryPoint:
        """Append a recovery point to a live claim's record (fenced)."""
        ...

    def get(
        self, key: str, *, scope: str | None = None, budget: float | None = None
    ) -> Record | None:
        """The stored record (a consistent read), or ``None``."""
        ...

    def replays(
        self,
        requests: Sequence[tuple[str, Any]],
        *,
        scope: str | None = None,
        budget: float | None = None,
    ) -> list[Replay | None]:
        """For each ``(key, payload)``, the :class:`Replay` its claim would answer now, or
        ``None`` where only a claim can decide."""
        ...


@runtime_checkable
class AsyncGuard(Protocol):
    """An asyncio guard: the same calls as :class:`Guard`, each a coroutine."""

    @property
    def is_async(self) -> Literal[True]:
        """``True``: the calls are awaited."""
        ...

    @property
    def config(self) -> IdempotencyConfig:
        """See :attr:`Guard.config`."""
        ...

    async def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
        budget: float | None = None,
    ) -> Outcome:
        """See :meth:`Guard.claim`."""
        ...

    async def complete(
        self, claim: Claim, result: Any = None, *, budget: float | None = None
    ) -> Replay:
        """See :meth:`Guard.complete`."""
        ...

    async def fail(
        self,
        claim: Claim,
        error: BaseException | str,
        *,
        retryable: bool,
        data: Any = None,
        budget: float | None = None,
    ) -> None:
        """See :meth:`Guard.fail`."""
        ...

    async def claim_with(
        self,
        key: str,
        transact_items: Sequence[dict[str, Any]],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        budget: float | None = None,
    ) -> Outcome:
        """See :meth:`Guard.claim_with`."""
        ...

    async def renew(
        self, claim: Claim, lease: float | None = None, *, budget: float | None = None
    ) -> Claim:
        """See :meth:`Guard.renew`."""
        ...

    async def mark(
        self, claim: Claim, step: str, reference: str | None = None, *, budget: float | None = None
    ) -> RecoveryPoint:
        """See :meth:`Guard.mark`."""
        ...

    async def get(
        self, key: str, *, scope: str | None = None, budget: float | None = None
    ) -> Record | None:
        """See :meth:`Guard.get`."""
        ...

    async def replays(
        self,
        requests: Sequence[tuple[str, Any]],
        *,
        scope: str | None = None,
        budget: float | None = None,
    ) -> list[Replay | None]:
        """See :meth:`Guard.replays`."""
        ...
