"""The Lambda event shapes the consumers read, as TypedDicts, and Lambda's context protocol.

Only the fields the consumers use are required; the rest of each record is carried through to
your handler untouched. The shapes follow AWS's published sample events (``tests/events/*.json``
holds one of each, and the tests feed them through every consumer).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Protocol, TypedDict

__all__ = [
    "BatchItemFailure",
    "DynamoDBStreamEvent",
    "DynamoDBStreamRecord",
    "EventBridgeEvent",
    "KinesisData",
    "KinesisEvent",
    "KinesisRecord",
    "LambdaContext",
    "PartialBatchResponse",
    "SNSEvent",
    "SNSMessage",
    "SNSRecord",
    "SQSAttributes",
    "SQSEvent",
    "SQSMessage",
    "SQSRecord",
    "StreamData",
]


class LambdaContext(Protocol):
    """What the consumers use of Lambda's context object."""

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds until Lambda ends the invocation."""
        ...


class BatchItemFailure(TypedDict):
    itemIdentifier: str


class PartialBatchResponse(TypedDict):
    """A batch handler's answer with ``ReportBatchItemFailures`` enabled on the mapping."""

    batchItemFailures: list[BatchItemFailure]


class SQSAttributes(TypedDict, total=False):
    ApproximateReceiveCount: str
    SentTimestamp: str
    SenderId: str
    ApproximateFirstReceiveTimestamp: str
    MessageGroupId: str
    MessageDeduplicationId: str
    SequenceNumber: str


class SQSRecord(TypedDict):
    messageId: str
    receiptHandle: str
    body: str
    attributes: SQSAttributes
    messageAttributes: dict[str, Any]
    md5OfBody: NotRequired[str]
    eventSource: Literal["aws:sqs"]
    eventSourceARN: str
    awsRegion: NotRequired[str]


class SQSEvent(TypedDict):
    Records: list[SQSRecord]


class SQSMessage(TypedDict):
    """A message as ``ReceiveMessage`` returns it (the SQS poller's records)."""

    MessageId: str
    ReceiptHandle: str
    Body: str
    MD5OfBody: NotRequired[str]
    Attributes: NotRequired[SQSAttributes]
    MessageAttributes: NotRequired[dict[str, Any]]


class KinesisData(TypedDict):
    kinesisSchemaVersion: NotRequired[str]
    partitionKey: str
    sequenceNumber: str
    data: str  # base64
    approximateArrivalTimestamp: NotRequired[float]


class KinesisRecord(TypedDict):
    kinesis: KinesisData
    eventSource: Literal["aws:kinesis"]
    eventID: str
    eventName: NotRequired[str]
    eventVersion: NotRequired[str]
    invokeIdentityArn: NotRequired[str]
    awsRegion: NotRequired[str]
    eventSourceARN: str


class KinesisEvent(TypedDict):
    Records: list[KinesisRecord]


class StreamData(TypedDict):
    Keys: dict[str, Any]
    NewImage: NotRequired[dict[str, Any]]
    OldImage: NotRequired[dict[str, Any]]
    SequenceNumber: str
    SizeBytes: NotRequired[int]
    StreamViewType: NotRequired[str]
    ApproximateCreationDateTime: NotRequired[float]


class DynamoDBStreamRecord(TypedDict):
    eventID: str
    eventName: Literal["INSERT", "MODIFY", "REMOVE"]
    eventVersion: NotRequired[str]
    eventSource: Literal["aws:dynamodb"]
    awsRegion: NotRequired[str]
    dynamodb: StreamData
    eventSourceARN: str


class DynamoDBStreamEvent(TypedDict):
    Records: list[DynamoDBStreamRecord]


class SNSMessage(TypedDict):
    MessageId: str
    Message: str
    TopicArn: str
    Type: NotRequired[str]
    Subject: NotRequired[str | None]
    Timestamp: NotRequired[str]
    MessageAttributes: NotRequired[dict[str, Any]]
    SignatureVersion: NotRequired[str]
    Signature: NotRequired[str]
    SigningCertUrl: NotRequired[str]
    UnsubscribeUrl: NotRequired[str]


class SNSRecord(TypedDict):
    EventSource: Literal["aws:sns"]
    EventVersion: NotRequired[str]
    EventSubscriptionArn: NotRequired[str]
    Sns: SNSMessage


class SNSEvent(TypedDict):
    Records: list[SNSRecord]


EventBridgeEvent = TypedDict(
    "EventBridgeEvent",
    {
        "version": str,
        "id": str,
        "detail-type": str,
        "source": str,
        "account": str,
        "time": str,
        "region": str,
        "resources": list[str],
        "detail": dict[str, Any],
    },
)
