"""SNS as a Lambda event source: one notification per invocation, guarded on its ``MessageId``.

Lambda invokes SNS subscribers asynchronously and retries an invocation that raised. So
:meth:`SNSEvents.handle` returns when the notification is done (it ran now, it ran before, or
it was given up for good after ``max_attempts``) and raises :class:`.NotAcknowledgedError` when
it must come again (it failed, or it is running in another invocation). A key expression
selects from the JSON ``Message``.
"""

from __future__ import annotations

from collections.abc import Callable

from .core import BatchResult
from .lambda_source import LambdaSource, single
from .selectors import json_body
from .shapes import LambdaContext, SNSEvent, SNSRecord

__all__ = ["SNSEvents"]


class SNSEvents(LambdaSource[SNSRecord]):
    """SNS notifications for one handler; options as :class:`.lambda_source.LambdaSource`'s
    (default key: ``Sns.MessageId``; default payload: ``Sns.Message``)."""

    source = "sns"

    def own_id(self, record: SNSRecord) -> str:
        return record["Sns"]["MessageId"]

    def body(self, record: SNSRecord) -> object:
        return json_body(record["Sns"]["Message"])

    def content(self, record: SNSRecord) -> object:
        return record["Sns"]["Message"]

    def handle(
        self, event: SNSEvent, context: LambdaContext | None, handler: Callable[[SNSRecord], object]
    ) -> BatchResult:
        """Every record's outcome; raises :class:`.NotAcknowledgedError` if one must come
        again."""
        batch = self.process(event["Records"], context, handler)
        single(batch)
        return batch
