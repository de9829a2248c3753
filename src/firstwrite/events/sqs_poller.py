"""A long-running SQS consumer (boto3): claim, keep alive, delete only after completion.

:class:`SQSPoller` receives messages, claims each one's key, and while the handler runs renews
the claim's lease and the message's visibility together (``ChangeMessageVisibility``), so that
neither the queue nor the table hands the message to another consumer meanwhile. A message is
deleted only once it is done (ran now, ran before, or given up for good after
``max_attempts``); one that failed or is running elsewhere is left to reappear when its
visibility ends. What to do with each message is :class:`~.polling.SQSPolicy`'s decision (the
asyncio poller, :mod:`.async_sqs_poller`, shares it); this module makes the calls. An SQS
error settling one message is logged with its id and the poller goes on; so is a receive that
fails, retried with backoff.
:meth:`SQSPoller.run` stops cleanly on SIGTERM or SIGINT (or :meth:`SQSPoller.stop`): the
message in hand is finished.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Protocol, Unpack

from .core import BatchResult, Consumer, Keepalive
from .guard import EventGuard
from .polling import PollerOptions, SQSCall, SQSPolicy, message_key
from .shapes import SQSMessage

__all__ = ["SQSClient", "SQSPoller", "message_key"]


class SQSClient(Protocol):
    """What the poller calls on a boto3 ``sqs`` client."""

    def receive_message(self, **kwargs: object) -> dict[str, list[SQSMessage]]: ...

    def delete_message(self, **kwargs: object) -> object: ...

    def change_message_visibility(self, **kwargs: object) -> object: ...


class SQSPoller:
    """Consumes ``queue_url`` with ``handler(message)`` until stopped; the options are
    :class:`~.polling.SQSPolicy`'s (``visibility``, ``key``, ``max_attempts``, ``wait``...)."""

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        guard: EventGuard,
        handler: Callable[[SQSMessage], object],
        **options: Unpack[PollerOptions],
    ) -> None:
        self.sqs, self.queue_url, self.handler = sqs, queue_url, handler
        self.policy = SQSPolicy(queue_url, guard, **options)
        self.consumer: Consumer[SQSMessage] = self.policy.consumer
        self._stop = threading.Event()

    def stop(self) -> None:
        """Finish the message in hand, then return from :meth:`run`."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _call(self, call: SQSCall) -> object:
        method: Callable[..., object] = getattr(self.sqs, call.method)
        return method(**call.params)

    def poll_once(self) -> BatchResult:
        """Receive one batch, handle it, delete what is done (a receive that fails raises)."""
        return self._handle(self._receive())

    def _receive(self) -> list[SQSMessage]:
        received = self.sqs.receive_message(**self.policy.receive().params)
        self.policy.received()
        return received.get("Messages", [])

    def _handle(self, messages: list[SQSMessage]) -> BatchResult:
        batch = self.consumer.consume(
            messages, self.handler, keepalive=self._keepalive if messages else None
        )
        for message, result in zip(messages, batch.results, strict=True):
            settle = self.policy.settle(message, result)
            if settle is not None:
                try:
                    self._call(settle)
                except Exception as exc:  # this message's alone: the batch goes on
                    self.policy.settle_failed(message, settle, exc)
        return batch

    def _keepalive(self, message: SQSMessage) -> Keepalive:
        return self.policy.keepalive(message, self._call)

    def run(self, *, handle_signals: bool = True) -> None:
        """Poll until :meth:`stop`, SIGTERM or SIGINT (signals only from the main thread); a
        receive that fails is logged and retried, with a growing delay, until one succeeds."""
        previous: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():

            def on_signal(signum: int, frame: FrameType | None) -> None:
                self.stop()

            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, on_signal)
        try:
            while not self._stop.is_set():
                try:
                    messages = self._receive()
                except Exception as exc:
                    self._stop.wait(self.policy.receive_failed(exc))
                    continue
                self._handle(messages)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
