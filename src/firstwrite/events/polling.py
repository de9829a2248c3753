"""What an SQS poller does with a message, decided once for the boto3 and the aiobotocore poller.

:class:`SQSPolicy` holds a poller's options and its :class:`~.core.Consumer`, and turns each
step into the SQS request to make (:class:`SQSCall`, a plain value): the receive, the
visibility extension a keepalive makes together with the claim's renewal, and what settles a
handled message: delete it when it is done (ran now, ran before, or given up for good), make it
visible again after ``retry_delay`` when it runs elsewhere or was held back, else leave it to
reappear when its visibility ends. :class:`~.sqs_poller.SQSPoller` and
:class:`~.async_sqs_poller.AsyncSQSPoller` only make these calls. A settle or a visibility
extension that SQS refuses (a stale receipt handle, a message no longer in flight, a dropped
connection) is logged with the message's id by :meth:`SQSPolicy.settle_failed` and touches no
other message; a receive that fails is logged and retried after :meth:`SQSPolicy.receive_failed`'s
delay (see :mod:`.broker_errors`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from firstwrite.idempotency import Metrics
from firstwrite.idempotency.recovery import AnyHook

from .broker_errors import Backoff, settle_failed
from .core import Consumer, Keepalive, Ordering, RecordOutcome, RecordResult
from .guard import AnyEventGuard
from .selectors import json_body, key_function, payload_function
from .shapes import SQSMessage

__all__ = ["PollerOptions", "SQSCall", "SQSPolicy", "message_key"]

LOG = logging.getLogger("firstwrite.events")


class PollerOptions(TypedDict, total=False):
    """A poller's keyword options: see :class:`SQSPolicy`."""

    key: str | Callable[[SQSMessage], str] | None
    payload: Callable[[SQSMessage], object] | bool
    validate: Callable[[SQSMessage], object] | None
    max_attempts: int
    non_retryable: tuple[type[BaseException], ...]
    scope: str | None
    metrics: Metrics | None
    visibility: int
    batch_size: int
    wait: int
    extend_visibility: bool
    retry_delay: int
    source: str
    reconcile: AnyHook | None


@dataclass(frozen=True, slots=True)
class SQSCall:
    """One SQS request: the client method's name and its keyword arguments."""

    method: str
    params: Mapping[str, object]


def message_key(message: SQSMessage) -> str:
    """The default key: the deduplication id (FIFO), else the message id."""
    return message.get("Attributes", {}).get("MessageDeduplicationId") or message["MessageId"]


class SQSPolicy:
    """A poller of ``queue_url`` guarded by ``guard``.

    ``visibility``: the seconds a received message stays invisible, and the claim's lease;
    both are renewed every ``visibility / 3`` while the handler runs (the visibility only with
    ``extend_visibility``). ``key``, ``payload`` (default: the body), ``validate``,
    ``max_attempts``, ``non_retryable``, ``scope``, ``metrics``: as for :class:`.Consumer`.
    ``wait`` is the long poll (seconds), which bounds how long a stop waits for an idle
    receive. A message running in another consumer, or held back behind its FIFO group, comes
    back after ``retry_delay`` seconds; a failed one when its visibility ends. On a FIFO queue
    (URL ending in ``.fifo``) the key is the deduplication id and a message not done holds back
    the rest of its group in the batch. Messages received again (``ApproximateReceiveCount``
    above 1) are read first, in one ``BatchGetItem``: those already done are not claimed.
    ``reconcile`` decides for a message whose earlier run marked recovery points and died
    (docs/recovery.md; default: the guard's hook; a coroutine function under an asyncio guard).
    """

    def __init__(
        self,
        queue_url: str,
        guard: AnyEventGuard,
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
        reconcile: AnyHook | None = None,
    ) -> None:
        self.queue_url = queue_url
        self.visibility, self.batch_size, self.wait = visibility, batch_size, wait
        self.extend_visibility, self.retry_delay = extend_visibility, retry_delay
        fifo = queue_url.endswith(".fifo")
        self.consumer: Consumer[SQSMessage] = Consumer(
            guard,
            key_function(key, message_key, _body_json),
            source=source,
            id=_message_id,
            payload=payload_function(payload, _body_text),
            group=_group if fifo else None,
            ordering=Ordering.GROUPS if fifo else Ordering.INDEPENDENT,
            validate=validate,
            max_attempts=max_attempts,
            non_retryable=non_retryable,
            scope=scope,
            metrics=metrics,
            redelivered=_redelivered,
            reconcile=reconcile,
        )
        self.backoff = Backoff()

    def receive(self) -> SQSCall:
        """The next receive."""
        return SQSCall(
            "receive_message",
            {
                "QueueUrl": self.queue_url,
                "MaxNumberOfMessages": self.batch_size,
                "WaitTimeSeconds": self.wait,
                "VisibilityTimeout": self.visibility,
                "AttributeNames": ["All"],
                "MessageAttributeNames": ["All"],
            },
        )

    def visibility_call(self, message: SQSMessage, seconds: int) -> SQSCall:
        params = {
            "QueueUrl": self.queue_url,
            "ReceiptHandle": message["ReceiptHandle"],
            "VisibilityTimeout": seconds,
        }
        return SQSCall("change_message_visibility", params)

    def keepalive(self, message: SQSMessage, call: Callable[[SQSCall], object]) -> Keepalive:
        """The keepalive of ``message`` while its handler runs; ``call`` makes an SQS call
        (the visibility extension; under asyncio it returns an awaitable). An extension SQS
        refuses is logged (:meth:`settle_failed`) and the claim's renewal goes on."""
        extend: Callable[[], object] | None = None
        if self.extend_visibility:
            request = self.visibility_call(message, self.visibility)

            def extend() -> object:
                try:
                    answer = call(request)
                except Exception as exc:
                    self.settle_failed(message, request, exc)
                    return None
                if inspect.isawaitable(answer):
                    return self._logged(message, request, answer)
                return answer

        return Keepalive(every=self.visibility / 3, lease=float(self.visibility), extend=extend)

    async def _logged(self, message: SQSMessage, call: SQSCall, answer: Awaitable[object]) -> None:
        try:
            await answer
        except Exception as exc:
            self.settle_failed(message, call, exc)

    def settle_failed(self, message: SQSMessage, call: SQSCall, exc: Exception) -> None:
        """Log that ``call`` on ``message`` failed; the poller goes on with the next message
        (the message, unless deleted meanwhile, comes back when its visibility ends)."""
        settle_failed(message["MessageId"], call.method, exc)

    def receive_failed(self, exc: Exception) -> float:
        """Log a receive that failed (a connection refused or dropped, the queue's server
        restarting, ...); the seconds to wait before the next receive."""
        delay = self.backoff.failed()
        LOG.error(
            "receiving from %s failed; retrying in %.2fs", self.queue_url, delay, exc_info=exc
        )
        return delay

    def received(self) -> None:
        """A receive succeeded: the next failure waits the shortest delay again."""
        self.backoff.succeeded()

    def settle(self, message: SQSMessage, result: RecordResult) -> SQSCall | None:
        """What to do with a handled message: delete it, show it again soon, or nothing."""
        if result.acknowledged:
            params = {"QueueUrl": self.queue_url, "ReceiptHandle": message["ReceiptHandle"]}
            return SQSCall("delete_message", params)
        if result.outcome in _SOON:
            return self.visibility_call(message, self.retry_delay)
        return None


_SOON = frozenset({RecordOutcome.IN_PROGRESS, RecordOutcome.SKIPPED})


def _redelivered(message: SQSMessage) -> bool:
    return int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1")) > 1


def _group(message: SQSMessage) -> str | None:
    return message.get("Attributes", {}).get("MessageGroupId")


def _message_id(message: SQSMessage) -> str:
    return message["MessageId"]


def _body_text(message: SQSMessage) -> object:
    return message["Body"]


def _body_json(message: SQSMessage) -> object:
    return json_body(message["Body"])
