"""Lambda events and a context for testing handlers, in the shapes of AWS's sample events.

``sqs_event(bodies)`` (a standard queue's batch, one record per JSON body),
``fifo_event([(group, step), ...])`` (a FIFO queue's: ``MessageGroupId`` and a content-based
``MessageDeduplicationId`` each), ``kinesis_event(datas)`` (base64 JSON data, sequence numbers in
order) and ``http_event(shape, body, encoding)`` (API Gateway REST v1 and HTTP v2, ALB, Function
URL: :data:`HTTP_SHAPES`; the body as JSON, base64 or base64+gzip: :data:`BODY_ENCODINGS`) build
events as Lambda delivers them::

    event = sqs_event([{"order_id": "o-1"}, {"order_id": "o-1"}])   # a duplicate
    assert lambda_handler(event, FakeContext()) == {"batchItemFailures": []}

:class:`FakeContext` is Lambda's context with ``remaining`` seconds (30) on the real clock; the
consumers use only ``get_remaining_time_in_millis()``, and ``context=None`` works too (no
deadline). Of an SQS record, ``SQSBatch`` reads ``messageId``, ``body``, ``eventSourceARN`` (a
FIFO queue's ends in ``.fifo``) and ``attributes`` (``ApproximateReceiveCount``; on FIFO
``MessageGroupId``, ``MessageDeduplicationId``; each optional). Standard library only.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import json
import time
import uuid
from typing import Any

__all__ = [
    "BODY_ENCODINGS",
    "HTTP_SHAPES",
    "FakeContext",
    "fifo_event",
    "http_event",
    "kinesis_event",
    "sqs_event",
]


class FakeContext:
    """Lambda's context: ``remaining`` seconds left, counting down on the real clock, and the
    invocation's names as Lambda sets them."""

    function_name = "handler"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:handler"
    memory_limit_in_mb = 128
    log_group_name = "/aws/lambda/handler"
    log_stream_name = "2026/01/01/[$LATEST]0123456789abcdef"

    def __init__(self, remaining: float = 30.0) -> None:
        self._deadline = time.monotonic() + remaining
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds until the invocation's deadline (0 once past it)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


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
    """A standard queue's batch, one record per JSON-encoded body."""
    return {"Records": [_sqs(json.dumps(b), QUEUE, {}) for b in bodies]}


def fifo_event(steps: list[tuple[str, int]]) -> dict[str, Any]:
    """A FIFO queue's batch: body ``{"account": group, "step": step}`` per pair, in order."""
    records = []
    for n, (group, step) in enumerate(steps):
        body = json.dumps({"account": group, "step": step})
        dedup = hashlib.sha256(body.encode()).hexdigest()  # content-based deduplication
        attrs = {"MessageGroupId": group, "MessageDeduplicationId": dedup, "SequenceNumber": str(n)}
        records.append(_sqs(body, QUEUE + ".fifo", attrs))
    return {"Records": records}


def kinesis_event(datas: list[Any]) -> dict[str, Any]:
    """A Kinesis batch: each data JSON-encoded then base64, sequence numbers ascending."""
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


# HTTP events, trimmed (most headers and identity fields left out) from AWS's published samples:
# API Gateway REST (v1) and HTTP API (v2) payloads as in aws-powertools/powertools-lambda-python
# tests/events/apiGatewayProxyEvent.json and apiGatewayProxyV2Event.json; the Function URL one
# as in its tests/events/lambdaFunctionUrlEvent.json; the ALB one from the Lambda developer
# guide, "Using AWS Lambda with an Application Load Balancer" (services-alb.html).
_HTTP_SAMPLES: dict[str, dict[str, Any]] = {
    "api_gateway_v1": {
        "version": "1.0",
        "resource": "/my/path",
        "path": "/my/path",
        "httpMethod": "POST",
        "headers": {"header1": "value1", "Origin": "https://aws.amazon.com"},
        "multiValueHeaders": {"header1": ["value1"]},
        "queryStringParameters": {"parameter1": "value1"},
        "multiValueQueryStringParameters": {"parameter1": ["value1", "value2"]},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "id",
            "domainName": "id.execute-api.us-east-1.amazonaws.com",
            "extendedRequestId": "request-id",
            "httpMethod": "POST",
            "identity": {"sourceIp": "192.168.0.1/32", "userAgent": "user-agent"},
            "path": "/my/path",
            "protocol": "HTTP/1.1",
            "requestId": "id=",
            "requestTime": "04/Mar/2020:19:15:17 +0000",
            "requestTimeEpoch": 1583349317135,
            "resourcePath": "/my/path",
            "stage": "$default",
        },
        "pathParameters": None,
        "stageVariables": None,
        "body": "Hello from Lambda!",
        "isBase64Encoded": False,
    },
    "api_gateway_v2": {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/my/path",
        "rawQueryString": "parameter1=value1&parameter1=value2&parameter2=value",
        "cookies": ["cookie1", "cookie2"],
        "headers": {"header1": "value1", "header2": "value1,value2"},
        "queryStringParameters": {"parameter1": "value1,value2", "parameter2": "value"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api-id",
            "domainName": "id.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "id",
            "http": {
                "method": "POST",
                "path": "/my/path",
                "protocol": "HTTP/1.1",
                "sourceIp": "192.168.0.1/32",
                "userAgent": "agent",
            },
            "requestId": "id",
            "routeKey": "$default",
            "stage": "$default",
            "time": "12/Mar/2020:19:03:58 +0000",
            "timeEpoch": 1583348638390,
        },
        "body": '{"message": "hello world", "username": "tom"}',
        "pathParameters": {"parameter1": "value1"},
        "isBase64Encoded": False,
        "stageVariables": {"stageVariable1": "value1"},
    },
    "alb": {
        "requestContext": {
            "elb": {
                "targetGroupArn": "arn:aws:elasticloadbalancing:us-east-2:123456789012:"
                "targetgroup/lambda-279XGJDqGZ5rsrHC2Fjr/49e9d65c45c6791a"
            }
        },
        "httpMethod": "POST",
        "path": "/lambda",
        "queryStringParameters": {"query": "1234ABCD"},
        "headers": {
            "accept-encoding": "gzip",
            "connection": "keep-alive",
            "host": "lambda-alb-123578498.us-east-2.elb.amazonaws.com",
            "x-amzn-trace-id": "Root=1-5c536348-3d683b8b04734faae651f476",
            "x-forwarded-for": "72.12.164.125",
            "x-forwarded-port": "80",
            "x-forwarded-proto": "http",
        },
        "body": "",
        "isBase64Encoded": False,
    },
    "function_url": {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": {
            "x-amzn-tls-version": "TLSv1.2",
            "x-forwarded-proto": "https",
            "x-forwarded-for": "123.123.123.123",
            "host": "<url-id>.lambda-url.us-east-1.on.aws",
            "x-amzn-trace-id": "Root=1-62ecd163-5f302e550dcde3b12402207d",
        },
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "<url-id>",
            "domainName": "<url-id>.lambda-url.us-east-1.on.aws",
            "domainPrefix": "<url-id>",
            "http": {
                "method": "POST",
                "path": "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "123.123.123.123",
                "userAgent": "agent",
            },
            "requestId": "id",
            "routeKey": "$default",
            "stage": "$default",
            "time": "05/Aug/2022:08:14:39 +0000",
            "timeEpoch": 1659687279885,
        },
        "isBase64Encoded": False,
    },
}
HTTP_SHAPES = tuple(_HTTP_SAMPLES)
BODY_ENCODINGS = ("json", "base64", "base64+gzip")


def http_event(shape: str, body: Any, encoding: str = "json") -> dict[str, Any]:
    """The ``shape`` sample carrying ``body`` (JSON-encoded) as ``encoding`` says; the same
    arguments always give the same event, byte for byte."""
    event = copy.deepcopy(_HTTP_SAMPLES[shape])
    text = json.dumps(body)
    if encoding == "json":
        event["body"], event["isBase64Encoded"] = text, False
    else:
        raw = text.encode()
        if encoding == "base64+gzip":
            # mtime=0: the same body builds the same bytes, as a resent event carries them
            # (gzip stamps the current second otherwise, a new payload across a second's edge)
            raw = gzip.compress(raw, mtime=0)
            event.setdefault("headers", {})["content-encoding"] = "gzip"
        event["body"], event["isBase64Encoded"] = base64.b64encode(raw).decode(), True
    return event
