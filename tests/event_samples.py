"""Lambda events for docs/events.md's examples, in the shapes of AWS's sample events.

``sqs_event(bodies)``, ``fifo_event([(group, step), ...])``, ``kinesis_event(datas)`` build an
event around JSON bodies; ``FakeContext`` is Lambda's context with 30 s left.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from typing import Any

from events.conftest import FakeContext

__all__ = ["FakeContext", "fifo_event", "kinesis_event", "sqs_event"]

QUEUE = "arn:aws:sqs:us-east-1:123456789012:orders"


def _sqs(body: str, arn: str, attributes: dict[str, str]) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": "AQEB" + uuid.uuid4().hex,
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1545082649183",
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": "1545082649185",
            **attributes,
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": "us-east-1",
    }


def sqs_event(bodies: list[Any]) -> dict[str, Any]:
    return {"Records": [_sqs(json.dumps(b), QUEUE, {}) for b in bodies]}


def fifo_event(steps: list[tuple[str, int]]) -> dict[str, Any]:
    records = []
    for n, (group, step) in enumerate(steps):
        body = json.dumps({"account": group, "step": step})
        dedup = hashlib.sha256(body.encode()).hexdigest()  # content-based deduplication
        attrs = {"MessageGroupId": group, "MessageDeduplicationId": dedup, "SequenceNumber": str(n)}
        records.append(_sqs(body, QUEUE + ".fifo", attrs))
    return {"Records": records}


def kinesis_event(datas: list[Any]) -> dict[str, Any]:
    records = []
    for n, data in enumerate(datas):
        seq = f"4959033827149025660855969253836157109592157598913658{n:04d}"
        records.append(
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": "1",
                    "sequenceNumber": seq,
                    "data": base64.b64encode(json.dumps(data).encode()).decode(),
                    "approximateArrivalTimestamp": 1545084650.987,
                },
                "eventSource": "aws:kinesis",
                "eventID": f"shardId-000000000000:{seq}",
                "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/sensors",
            }
        )
    return {"Records": records}
