"""EventBridge as a Lambda event source: one event per invocation, guarded on its ``id``.

The same rules as SNS: :meth:`EventBridgeEvents.handle` returns the event's outcome when it is
done (ran now, ran before, or given up for good) and raises :class:`.NotAcknowledgedError`, so
that Lambda retries the asynchronous invocation, when it must come again. A key expression
selects from the whole event (``detail.order_id``); the default payload is ``detail``.
"""

from __future__ import annotations

from collections.abc import Callable

from .core import RecordResult
from .lambda_source import LambdaSource, single
from .shapes import EventBridgeEvent, LambdaContext

__all__ = ["EventBridgeEvents"]


class EventBridgeEvents(LambdaSource[EventBridgeEvent]):
    """EventBridge events for one handler; options as :class:`.lambda_source.LambdaSource`'s."""

    source = "eventbridge"

    def own_id(self, record: EventBridgeEvent) -> str:
        return record["id"]

    def body(self, record: EventBridgeEvent) -> object:
        return record

    def content(self, record: EventBridgeEvent) -> object:
        return record["detail"]

    def handle(
        self,
        event: EventBridgeEvent,
        context: LambdaContext | None,
        handler: Callable[[EventBridgeEvent], object],
    ) -> RecordResult:
        """The event's outcome; raises :class:`.NotAcknowledgedError` if it must come again."""
        batch = self.process([event], context, handler)
        single(batch)
        return batch.results[0]
