"""Exactly-once consumers of event sources and queues, on the idempotency layer.

Each record is guarded on its own key with the layer's public API: claimed before its handler
runs, then COMPLETED with the result or FAILED (retryably, or for good after ``max_attempts``).

* :mod:`.core`: :func:`consume` and :class:`Consumer`, for any broker; :class:`RecordOutcome`.
* Lambda event sources: :class:`SQSBatch` (standard and FIFO), :class:`KinesisBatch`,
  :class:`DynamoDBStreamBatch` (partial batch responses), :class:`SNSEvents`,
  :class:`EventBridgeEvents` (single events); their event shapes in :mod:`.shapes`; what they
  share (subclass it for a source of your own) in :mod:`.lambda_source`
  (:class:`~.lambda_source.LambdaSource`).
* Long-running consumers: :class:`~.sqs_poller.SQSPoller` (boto3),
  :class:`~.async_sqs_poller.AsyncSQSPoller` (aiobotocore, extra ``firstwrite[async]``) and
  :class:`~.rabbitmq.RabbitMQConsumer` (pika, extra ``firstwrite[rabbitmq]``), imported from
  their modules so that their clients stay optional; both follow :class:`~.polling.SQSPolicy`.
  Decisions are steps (:mod:`.steps`), driven or awaited (:class:`~.aio.AsyncConsumer`).

See docs/events.md.
"""

from __future__ import annotations

from .attempts import AttemptLedger
from .core import (
    BatchResult,
    Consumer,
    Keepalive,
    Ordering,
    RecordOutcome,
    RecordResult,
    consume,
)
from .dynamodb_streams import DynamoDBStreamBatch
from .eventbridge import EventBridgeEvents
from .guard import EventGuard
from .kinesis import KinesisBatch
from .lambda_source import LambdaSource, NotAcknowledgedError
from .sns import SNSEvents
from .sqs import SQSBatch, sqs_key

__all__ = [
    "AttemptLedger",
    "BatchResult",
    "Consumer",
    "DynamoDBStreamBatch",
    "EventBridgeEvents",
    "EventGuard",
    "Keepalive",
    "KinesisBatch",
    "LambdaSource",
    "NotAcknowledgedError",
    "Ordering",
    "RecordOutcome",
    "RecordResult",
    "SNSEvents",
    "SQSBatch",
    "consume",
    "sqs_key",
]
