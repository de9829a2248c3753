"""The asyncio SQS consumer (aiobotocore, extra ``firstwrite[async]``): :class:`AsyncSQSPoller`.

The twin of :class:`~.sqs_poller.SQSPoller`: the same :class:`~.polling.SQSPolicy` decides what
to do with each message (claim, keep the claim and the message's visibility alive together
while the handler runs, delete only once done), here awaited on an aiobotocore ``sqs`` client
with an asyncio guard (:class:`~firstwrite.idempotency.AsyncIdempotency`) and an async handler.
:meth:`AsyncSQSPoller.run` stops cleanly on SIGTERM or SIGINT (or :meth:`AsyncSQSPoller.stop`):
the message in hand is finished. SQS errors are handled as the sync poller handles them (one
message's settle error is logged with its id; a failed receive is retried). Cancelling the task running it instead frees the key of the
message in hand for its redelivery.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Protocol, Unpack

from .aio import AsyncConsumer
from .core import BatchResult, Keepalive
from .guard import AsyncEventGuard
from .polling import PollerOptions, SQSCall, SQSPolicy
from .shapes import SQSMessage

__all__ = ["AsyncSQSClient", "AsyncSQSPoller"]


class AsyncSQSClient(Protocol):
    """What the poller awaits on an aiobotocore ``sqs`` client (already entered)."""

    async def receive_message(self, **kwargs: object) -> dict[str, list[SQSMessage]]: ...

    async def delete_message(self, **kwargs: object) -> object: ...

    async def change_message_visibility(self, **kwargs: object) -> object: ...


class AsyncSQSPoller:
    """Consumes ``queue_url`` with ``await handler(message)`` until stopped; the options are
    :class:`~.polling.SQSPolicy`'s (``visibility``, ``key``, ``max_attempts``, ``wait``...)."""

    def __init__(
        self,
        sqs: AsyncSQSClient,
        queue_url: str,
        guard: AsyncEventGuard,
        handler: Callable[[SQSMessage], Awaitable[object]],
        **options: Unpack[PollerOptions],
    ) -> None:
        self.sqs, self.queue_url, self.handler = sqs, queue_url, handler
        self.policy = SQSPolicy(queue_url, guard, **options)
        self.consumer = AsyncConsumer(self.policy.consumer)
        self._stop = False

    def stop(self) -> None:
        """Finish the message in hand, then return from :meth:`run`."""
        self._stop = True

    @property
    def stopping(self) -> bool:
        return self._stop

    async def _call(self, call: SQSCall) -> object:
        method: Callable[..., Awaitable[object]] = getattr(self.sqs, call.method)
        return await method(**call.params)

    async def poll_once(self) -> BatchResult:
        """Receive one batch, handle it, delete what is done (a receive that fails raises)."""
        return await self._handle(await self._receive())

    async def _receive(self) -> list[SQSMessage]:
        received = await self.sqs.receive_message(**self.policy.receive().params)
        self.policy.received()
        return received.get("Messages", [])

    async def _handle(self, messages: list[SQSMessage]) -> BatchResult:
        batch = await self.consumer.consume(
            messages, self.handler, keepalive=self._keepalive if messages else None
        )
        for message, result in zip(messages, batch.results, strict=True):
            settle = self.policy.settle(message, result)
            if settle is not None:
                try:
                    await self._call(settle)
                except Exception as exc:  # this message's alone: the batch goes on
                    self.policy.settle_failed(message, settle, exc)
        return batch

    def _keepalive(self, message: SQSMessage) -> Keepalive:
        return self.policy.keepalive(message, self._call)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if :meth:`stop` is called meanwhile."""
        deadline = asyncio.get_running_loop().time() + seconds
        while not self._stop and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(min(0.1, seconds))

    async def run(self, *, handle_signals: bool = True) -> None:
        """Poll until :meth:`stop`, SIGTERM or SIGINT (signals need the main thread's loop); a
        receive that fails is logged and retried, with a growing delay, until one succeeds."""
        loop = asyncio.get_running_loop()
        handled: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self.stop)
                except (RuntimeError, ValueError, NotImplementedError):
                    continue  # not the main thread, or no signals on this platform
                handled.append(sig)
        try:
            while not self._stop:
                try:
                    messages = await self._receive()
                except Exception as exc:
                    await self._pause(self.policy.receive_failed(exc))
                    continue
                await self._handle(messages)
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
