"""The asyncio consumer: :class:`AsyncConsumer` awaits a :class:`~.core.Consumer`'s decisions.

The :class:`~.core.Consumer` (built with an asyncio guard, such as
:class:`~firstwrite.idempotency.AsyncIdempotency`) decides; :func:`adrive` (:mod:`._adriving`)
answers its effects (:mod:`.steps`) by awaiting the guard, and awaits the handler while a task
renews the claim's lease (and awaits the :class:`~.core.Keepalive`'s ``extend``). A cancelled
handler frees the key for the redelivery (FAILED, retryable) and the cancellation goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from firstwrite.idempotency.recovery import reconciling_with

from ._adriving import adrive
from .core import BatchResult, Consumer, Keepalive, RecordResult
from .guard import async_guard

__all__ = ["AsyncConsumer", "adrive"]

R = TypeVar("R")


class AsyncConsumer(Generic[R]):
    """``consumer``'s decisions, awaited: ``consumer.guard`` must be an asyncio guard."""

    def __init__(self, consumer: Consumer[R]) -> None:
        self.consumer = consumer
        self.guard = async_guard(consumer.guard)

    async def consume(
        self,
        records: Iterable[R],
        handler: Callable[[R], Awaitable[object]],
        *,
        remaining: Callable[[], float] | None = None,
        keepalive: Callable[[R], Keepalive | None] | None = None,
    ) -> BatchResult:
        """:meth:`.Consumer.consume`, with an async handler."""
        steps = self.consumer.batch_steps(records, remaining=remaining, keepalive=keepalive)
        with reconciling_with(self.consumer.reconcile):
            return await adrive(steps, self.guard, handler)

    async def process(
        self,
        record: R,
        handler: Callable[[R], Awaitable[object]],
        *,
        lease: float | None = None,
        keepalive: Keepalive | None = None,
    ) -> RecordResult:
        """:meth:`.Consumer.process`, with an async handler."""
        steps = self.consumer.record_steps(record, lease=lease, keepalive=keepalive)
        with reconciling_with(self.consumer.reconcile):
            return await adrive(steps, self.guard, handler)
