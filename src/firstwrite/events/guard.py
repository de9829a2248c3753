"""What the consumers use of a guard: :class:`EventGuard`, or its asyncio twin.

``Idempotency`` is an :class:`EventGuard`; ``AsyncIdempotency`` an :class:`AsyncEventGuard`.

The layer's :class:`~firstwrite.idempotency.Guard` plus what a consumer needs besides: ``renew``
(a long handler keeps its lease), ``get`` (reading a record back), ``replays`` (the replays of
a batch's redelivered records, read without claiming them), ``config`` (the lease to
cap) and ``metrics`` (the sink the consumers count outcomes in). ``is_async`` says which kind a
guard is; :func:`sync_guard` and :func:`async_guard` check it where a driver needs one kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeAlias, cast

from firstwrite.idempotency import UNSET, Claim, IdempotencyConfig, Metrics, Outcome, Record, Replay

__all__ = ["AnyEventGuard", "AsyncEventGuard", "EventGuard", "async_guard", "sync_guard"]


class EventGuard(Protocol):
    """A synchronous guard, as :class:`firstwrite.idempotency.Idempotency` is."""

    @property
    def config(self) -> IdempotencyConfig: ...

    @property
    def metrics(self) -> Metrics: ...

    def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
    ) -> Outcome: ...

    def complete(self, claim: Claim, result: Any = None) -> Replay: ...

    def fail(
        self, claim: Claim, error: BaseException | str, *, retryable: bool, data: Any = None
    ) -> None: ...

    def renew(self, claim: Claim, lease: float | None = None) -> Claim: ...

    def get(self, key: str, *, scope: str | None = None) -> Record | None: ...

    def replays(
        self, requests: Sequence[tuple[str, Any]], *, scope: str | None = None
    ) -> list[Replay | None]: ...


class AsyncEventGuard(Protocol):
    """An asyncio guard, as :class:`firstwrite.idempotency.AsyncIdempotency` is."""

    @property
    def config(self) -> IdempotencyConfig: ...

    @property
    def metrics(self) -> Metrics: ...

    async def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
    ) -> Outcome: ...

    async def complete(self, claim: Claim, result: Any = None) -> Replay: ...

    async def fail(
        self, claim: Claim, error: BaseException | str, *, retryable: bool, data: Any = None
    ) -> None: ...

    async def renew(self, claim: Claim, lease: float | None = None) -> Claim: ...

    async def get(self, key: str, *, scope: str | None = None) -> Record | None: ...

    async def replays(
        self, requests: Sequence[tuple[str, Any]], *, scope: str | None = None
    ) -> list[Replay | None]: ...


AnyEventGuard: TypeAlias = EventGuard | AsyncEventGuard


def _is_async(guard: AnyEventGuard) -> bool:
    return getattr(guard, "is_async", False) is True


def sync_guard(guard: AnyEventGuard) -> EventGuard:
    """``guard``, checked to be synchronous."""
    if _is_async(guard):
        raise TypeError("an asyncio guard: drive it with firstwrite.events.aio.AsyncConsumer")
    return cast(EventGuard, guard)


def async_guard(guard: AnyEventGuard) -> AsyncEventGuard:
    """``guard``, checked to be an asyncio one."""
    if not _is_async(guard):
        raise TypeError("a synchronous guard: drive it with Consumer.consume or .process")
    return cast(AsyncEventGuard, guard)
