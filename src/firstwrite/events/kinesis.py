"""Kinesis as a Lambda event source: a shard's batch, stopped at its first record not done.

Each record is guarded on its own key, by default its sequence number (a key expression selects
from the base64 JSON ``data``). Lambda checkpoints a shard at the first sequence number a
partial batch response reports and delivers everything after it again, so :class:`KinesisBatch`
stops at the first record that failed or is running elsewhere, reports only it, and leaves the
records after it untried; their redelivery runs them, and replays what already ran.
"""

from __future__ import annotations

from collections.abc import Callable

from .core import Ordering
from .lambda_source import LambdaSource, response
from .selectors import base64_json
from .shapes import KinesisEvent, KinesisRecord, LambdaContext, PartialBatchResponse

__all__ = ["KinesisBatch"]


class KinesisBatch(LambdaSource[KinesisRecord]):
    """Kinesis batches for one handler; options as :class:`.lambda_source.LambdaSource`'s (default
    key: the sequence number; default payload: ``data``)."""

    source = "kinesis"
    ordering = Ordering.STREAM

    def own_id(self, record: KinesisRecord) -> str:
        return record["kinesis"]["sequenceNumber"]

    def body(self, record: KinesisRecord) -> object:
        return base64_json(record["kinesis"]["data"])

    def content(self, record: KinesisRecord) -> object:
        return record["kinesis"]["data"]

    def handle(
        self,
        event: KinesisEvent,
        context: LambdaContext | None,
        handler: Callable[[KinesisRecord], object],
    ) -> PartialBatchResponse:
        """The partial batch response to return from your Lambda handler."""
        return response(self.process(event["Records"], context, handler))
