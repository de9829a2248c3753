"""SQS as a Lambda event source: a batch, each message guarded on its own key.

By default the key is the message's ``messageId``, or on a FIFO queue its
``MessageDeduplicationId`` (content-based or explicit: what SQS itself deduplicates on, for
five minutes only). Answer with :meth:`SQSBatch.handle`'s partial batch response
(``ReportBatchItemFailures`` on the event source mapping): a message that failed, is running in
another invocation or was not tried is reported and delivered again; a replay is acknowledged
without running. On a FIFO queue a message that is not done holds back every later message of
its group (reported too), and other groups go on. The messages SQS delivers again
(``ApproximateReceiveCount`` above 1) are read first, in one ``BatchGetItem``: those already
done are replayed without a claim each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .core import Consumer, Ordering
from .lambda_source import LambdaSource, response
from .selectors import json_body
from .shapes import LambdaContext, PartialBatchResponse, SQSEvent, SQSRecord

__all__ = ["SQSBatch", "is_fifo", "is_redelivered", "sqs_key"]


def is_fifo(record: SQSRecord) -> bool:
    """The record comes from a FIFO queue (its ARN ends in ``.fifo``)."""
    return record["eventSourceARN"].endswith(".fifo")


def is_redelivered(record: SQSRecord) -> bool:
    """SQS has delivered the record before (``ApproximateReceiveCount`` above 1)."""
    return int(record["attributes"].get("ApproximateReceiveCount", "1")) > 1


def sqs_key(record: SQSRecord) -> str:
    """The default key: the deduplication id on a FIFO queue, else the message id."""
    if is_fifo(record):
        dedup = record["attributes"].get("MessageDeduplicationId")
        if dedup:
            return dedup
    return record["messageId"]


class SQSBatch(LambdaSource[SQSRecord]):
    """SQS batches for one handler: ``SQSBatch(guard, key=..., max_attempts=...)`` once, then
    ``return batch.handle(event, context, handler)`` per invocation. Options: see
    :class:`.lambda_source.LambdaSource`; the default key is :func:`sqs_key`, the default payload the
    body, and a key expression selects from the JSON body."""

    source = "sqs"
    _fifo: Consumer[SQSRecord] | None = None

    def own_id(self, record: SQSRecord) -> str:
        return sqs_key(record)

    def item_id(self, record: SQSRecord) -> str:
        return record["messageId"]

    def body(self, record: SQSRecord) -> object:
        return json_body(record["body"])

    def content(self, record: SQSRecord) -> object:
        return record["body"]

    def group(self, record: SQSRecord) -> str | None:
        return record["attributes"].get("MessageGroupId")

    def redelivery(self) -> Callable[[SQSRecord], bool]:
        return is_redelivered

    def consumer_for(self, records: Sequence[SQSRecord]) -> Consumer[SQSRecord]:
        if not (records and is_fifo(records[0])):
            return self.consumer
        if self._fifo is None:
            self._fifo = self.make_consumer("sqs_fifo", Ordering.GROUPS)
        return self._fifo

    def handle(
        self, event: SQSEvent, context: LambdaContext | None, handler: Callable[[SQSRecord], object]
    ) -> PartialBatchResponse:
        """The partial batch response to return from your Lambda handler."""
        return response(self.process(event["Records"], context, handler))
