"""What the consumers use of a guard: :class:`EventGuard`, or its asyncio twin.

``Idempotency`` is an :class:`EventGuard`; ``AsyncIdempotency`` an :class:`AsyncEventGuard`.

Each is the layer's protocol (:class:`~firstwrite.idempotency.Guard`,
:class:`~firstwrite.idempotency.AsyncGuard`: ``claim``, ``complete``, ``fail``, ``renew``,
``get``, ``replays``, ``config``, ``is_async``) plus the one thing a consumer needs besides:
``metrics``, the sink the consumers count outcomes in. ``is_async`` says which kind a guard is;
:func:`sync_guard` and :func:`async_guard` check it where a driver needs one kind.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias, runtime_checkable

from firstwrite.idempotency import AsyncGuard, Guard, Metrics

__all__ = ["AnyEventGuard", "AsyncEventGuard", "EventGuard", "async_guard", "sync_guard"]


@runtime_checkable
class EventGuard(Guard, Protocol):
    """A synchronous guard, as :class:`firstwrite.idempotency.Idempotency` is."""

    @property
    def metrics(self) -> Metrics:
        """Where the consumers count their records' outcomes."""
        ...


@runtime_checkable
class AsyncEventGuard(AsyncGuard, Protocol):
    """An asyncio guard, as :class:`firstwrite.idempotency.AsyncIdempotency` is."""

    @property
    def metrics(self) -> Metrics:
        """See :attr:`EventGuard.metrics`."""
        ...


AnyEventGuard: TypeAlias = EventGuard | AsyncEventGuard


def sync_guard(guard: AnyEventGuard) -> EventGuard:
    """``guard``, checked to be synchronous."""
    if guard.is_async:
        raise TypeError("an asyncio guard: drive it with firstwrite.events.aio.AsyncConsumer")
    return guard


def async_guard(guard: AnyEventGuard) -> AsyncEventGuard:
    """``guard``, checked to be an asyncio one."""
    if not guard.is_async:
        raise TypeError("a synchronous guard: drive it with Consumer.consume or .process")
    return guard
