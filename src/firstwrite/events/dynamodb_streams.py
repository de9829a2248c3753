"""DynamoDB Streams as a Lambda event source: stopped at the first record not done.

Each record is guarded on its own key, by default the stream record's ``eventID`` (a key
expression selects from the record's ``dynamodb`` part, in DynamoDB JSON: for example
``NewImage.order_id.S``). The partial batch response reports the first record that failed or
is running elsewhere, by its ``SequenceNumber``; Lambda resumes the shard there, so the records
after it are left untried, as on Kinesis.
"""

from __future__ import annotations

from collections.abc import Callable

from .core import Ordering
from .lambda_source import LambdaSource, response
from .shapes import (
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    LambdaContext,
    PartialBatchResponse,
)

__all__ = ["DynamoDBStreamBatch"]


class DynamoDBStreamBatch(LambdaSource[DynamoDBStreamRecord]):
    """Stream batches for one handler; options as :class:`.lambda_source.LambdaSource`'s (default
    key: ``eventID``; default payload: the record's ``dynamodb`` part)."""

    source = "dynamodb_streams"
    ordering = Ordering.STREAM

    def own_id(self, record: DynamoDBStreamRecord) -> str:
        return record["eventID"]

    def item_id(self, record: DynamoDBStreamRecord) -> str:
        return record["dynamodb"]["SequenceNumber"]

    def body(self, record: DynamoDBStreamRecord) -> object:
        return record["dynamodb"]

    def content(self, record: DynamoDBStreamRecord) -> object:
        return record["dynamodb"]

    def handle(
        self,
        event: DynamoDBStreamEvent,
        context: LambdaContext | None,
        handler: Callable[[DynamoDBStreamRecord], object],
    ) -> PartialBatchResponse:
        """The partial batch response to return from your Lambda handler."""
        return response(self.process(event["Records"], context, handler))
