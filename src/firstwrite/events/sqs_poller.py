"""A long-running SQS consumer (boto3): claim, keep alive, delete only after completion.

:class:`SQSPoller` receives messages, claims each one's key, and while the handler runs renews
the claim's lease and the message's visibility together (``ChangeMessageVisibility``), so that
neither the queue nor the table hands the message to another consumer meanwhile. A message is
deleted only once it is done (ran now, ran before, or given up for good after
``max_attempts``); one that failed or is running elsewhere is left to reappear when its
visibility ends. On a FIFO queue (URL ending in ``.fifo``) the key is the deduplication id and
a message not done holds back the rest of its group in the batch. :meth:`SQSPoller.run` stops
cleanly on SIGTERM or SIGINT (or :meth:`SQSPoller.stop`): the message in hand is finished.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Protocol

from firstwrite.idempotency import Metrics

from .core import BatchResult, Consumer, Keepalive, Ordering, RecordOutcome
from .guard import EventGuard
from .selectors import json_body, key_function
from .shapes import SQSMessage

__all__ = ["SQSClient", "SQSPoller", "message_key"]


class SQSClient(Protocol):
    """What the poller calls on a boto3 ``sqs`` client."""

    def receive_message(self, **kwargs: object) -> dict[str, list[SQSMessage]]: ...

    def delete_message(self, **kwargs: object) -> object: ...

    def change_message_visibility(self, **kwargs: object) -> object: ...


def message_key(message: SQSMessage) -> str:
    """The default key: the deduplication id (FIFO), else the message id."""
    return message.get("Attributes", {}).get("MessageDeduplicationId") or message["MessageId"]


def _group(message: SQSMessage) -> str | None:
    return message.get("Attributes", {}).get("MessageGroupId")


class SQSPoller:
    """Consumes ``queue_url`` with ``handler(message)`` until stopped.

    ``visibility``: the seconds a received message stays invisible, and the claim's lease;
    both are renewed every ``visibility / 3`` while the handler runs. ``key``, ``payload``
    (default: the body), ``validate``, ``max_attempts``, ``non_retryable``, ``scope``,
    ``metrics``: as for :class:`.Consumer`. ``wait`` is the long poll (seconds), which bounds
    how long a stop waits for an idle receive. A message running in another consumer, or held
    back behind its FIFO group, comes back after ``retry_delay`` seconds; a failed one when its
    visibility ends.
    """

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        guard: EventGuard,
        handler: Callable[[SQSMessage], object],
        *,
        key: str | Callable[[SQSMessage], str] | None = None,
        payload: Callable[[SQSMessage], object] | bool = True,
        validate: Callable[[SQSMessage], object] | None = None,
        max_attempts: int = 3,
        non_retryable: tuple[type[BaseException], ...] = (),
        scope: str | None = None,
        metrics: Metrics | None = None,
        visibility: int = 30,
        batch_size: int = 10,
        wait: int = 1,
        extend_visibility: bool = True,
        retry_delay: int = 1,
        source: str = "sqs_poller",
    ) -> None:
        self.sqs, self.queue_url, self.handler = sqs, queue_url, handler
        self.visibility, self.batch_size, self.wait = visibility, batch_size, wait
        self.extend_visibility, self.retry_delay = extend_visibility, retry_delay
        fifo = queue_url.endswith(".fifo")
        payload_fn: Callable[[SQSMessage], object] | None
        if payload is True:
            payload_fn = _body_text
        elif payload is False:
            payload_fn = None
        else:
            payload_fn = payload
        self.consumer: Consumer[SQSMessage] = Consumer(
            guard,
            key_function(key, message_key, _body_json),
            source=source,
            id=_message_id,
            payload=payload_fn,
            group=_group if fifo else None,
            ordering=Ordering.GROUPS if fifo else Ordering.INDEPENDENT,
            validate=validate,
            max_attempts=max_attempts,
            non_retryable=non_retryable,
            scope=scope,
            metrics=metrics,
        )
        self._stop = threading.Event()

    def stop(self) -> None:
        """Finish the message in hand, then return from :meth:`run`."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def poll_once(self) -> BatchResult:
        """Receive one batch, handle it, delete what is done."""
        received = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=self.wait,
            VisibilityTimeout=self.visibility,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = received.get("Messages", [])
        batch = self.consumer.consume(
            messages, self.handler, keepalive=self._keepalive if messages else None
        )
        for message, result in zip(messages, batch.results, strict=True):
            handle = message["ReceiptHandle"]
            if result.acknowledged:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=handle)
            elif result.outcome in _SOON:
                self.sqs.change_message_visibility(
                    QueueUrl=self.queue_url,
                    ReceiptHandle=handle,
                    VisibilityTimeout=self.retry_delay,
                )
        return batch

    def _keepalive(self, message: SQSMessage) -> Keepalive:
        extend: Callable[[], object] | None = None
        if self.extend_visibility:

            def extend() -> object:
                return self.sqs.change_message_visibility(
                    QueueUrl=self.queue_url,
                    ReceiptHandle=message["ReceiptHandle"],
                    VisibilityTimeout=self.visibility,
                )

        return Keepalive(every=self.visibility / 3, lease=float(self.visibility), extend=extend)

    def run(self, *, handle_signals: bool = True) -> None:
        """Poll until :meth:`stop`, SIGTERM or SIGINT (signals only from the main thread)."""
        previous: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():

            def on_signal(signum: int, frame: FrameType | None) -> None:
                self.stop()

            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, on_signal)
        try:
            while not self._stop.is_set():
                self.poll_once()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


_SOON = frozenset({RecordOutcome.IN_PROGRESS, RecordOutcome.SKIPPED})


def _message_id(message: SQSMessage) -> str:
    return message["MessageId"]


def _body_text(message: SQSMessage) -> object:
    return message["Body"]


def _body_json(message: SQSMessage) -> object:
    return json_body(message["Body"])
