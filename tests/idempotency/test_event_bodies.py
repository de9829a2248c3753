"""Selectors reaching into HTTP event bodies (API Gateway v1/v2, ALB, Function URL; JSON text,
base64, base64+gzip), Powertools' JMESPath function spellings checked against Powertools' own
``query``, and each handler run through the real layer on the engine."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from event_samples import BODY_ENCODINGS, HTTP_SHAPES, FakeContext, http_event
from firstwrite.events.selectors import key_function
from firstwrite.idempotency.decorators import idempotent_handler
from firstwrite.idempotency.errors import MissingKeyError
from firstwrite.idempotency.guard import Idempotency
from firstwrite.idempotency.keys import key_from, select

ORDER = {"order_id": "o-17", "amount": 5, "lines": [{"sku": "a"}]}

# The expression Powertools users write for each encoding.
POWERTOOLS = {
    "json": "powertools_json(body).order_id",
    "base64": "powertools_json(powertools_base64(body)).order_id",
    "base64+gzip": "powertools_json(powertools_base64_gzip(body)).order_id",
}
SHORT = {
    "json": "json(body).order_id",
    "base64": "json(base64(body)).order_id",
    "base64+gzip": "json(base64_gzip(body)).order_id",
}


def replayed(response: dict[str, Any]) -> dict[str, Any]:
    """A replayed proxy response without its ``Idempotent-Replayed: true`` (asserted)."""
    unmarked = dict(response)
    headers = dict(unmarked.pop("headers"))
    assert headers.pop("Idempotent-Replayed") == "true"
    if headers:
        unmarked["headers"] = headers
    return unmarked


@pytest.mark.parametrize("encoding", BODY_ENCODINGS)
@pytest.mark.parametrize("shape", HTTP_SHAPES)
def test_a_handler_keyed_on_the_body_runs_once_per_order(
    guard: Idempotency, shape: str, encoding: str
) -> None:
    runs: list[str] = []

    @idempotent_handler(guard, key="body.order_id", payload="body")
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        runs.append(event["requestContext"].get("requestId", shape))
        return {"statusCode": 201, "body": json.dumps({"charged": ORDER["amount"]})}

    event = http_event(shape, ORDER, encoding)
    first = handler(event, FakeContext())
    assert replayed(handler(http_event(shape, ORDER, encoding), FakeContext())) == first
    assert len(runs) == 1
    # The key is the body's field itself, and the payload the decoded body: the same order sent
    # in another encoding is a replay, a changed amount a mismatch.
    record = guard.get("o-17")
    assert record is not None and record.status.name == "COMPLETED"
    other = "json" if encoding != "json" else "base64"
    assert replayed(handler(http_event(shape, ORDER, other), FakeContext())) == first
    assert len(runs) == 1


@pytest.mark.parametrize("encoding", BODY_ENCODINGS)
@pytest.mark.parametrize("shape", HTTP_SHAPES)
def test_powertools_spellings_select_what_powertools_selects(shape: str, encoding: str) -> None:
    from aws_lambda_powertools.utilities.jmespath_utils import query

    event = http_event(shape, ORDER, encoding)
    for expression in (POWERTOOLS[encoding], POWERTOOLS[encoding].removesuffix(".order_id")):
        assert select(event, expression) == query(event, expression)
    assert select(event, POWERTOOLS[encoding]) == "o-17"
    assert key_from(event, POWERTOOLS[encoding]) == key_from(event, "body.order_id") == "o-17"
    assert key_from(event, SHORT[encoding]) == "o-17"
    # A selection that is not a string is fingerprinted the same way whichever spelling found it.
    lines = POWERTOOLS[encoding].replace(".order_id", ".lines")
    assert key_from(event, lines) == key_from(event, "body.lines")
    assert select(event, lines) == query(event, lines) == ORDER["lines"]


@pytest.mark.parametrize("shape", HTTP_SHAPES)
def test_a_powertools_key_through_the_layer(guard: Idempotency, shape: str) -> None:
    runs: list[int] = []

    @idempotent_handler(guard, key=POWERTOOLS["base64+gzip"])
    def handler(event: dict[str, Any], context: Any) -> int:
        runs.append(1)
        return len(runs)

    event = http_event(shape, ORDER, "base64+gzip")
    assert handler(event, FakeContext()) == handler(event, FakeContext()) == 1
    assert guard.get("o-17") is not None


def test_automatic_decoding_applies_to_http_events_only() -> None:
    body = json.dumps(ORDER)
    # No requestContext: not an HTTP event, its body stays a string (an SQS-like record).
    with pytest.raises(MissingKeyError):
        key_from({"body": body}, "body.order_id")
    assert key_from({"body": body}, "powertools_json(body).order_id") == "o-17"
    # An HTTP event whose body is already a dict (a test harness): read as it is.
    event = http_event("api_gateway_v2", ORDER)
    event["body"] = dict(ORDER)
    assert key_from(event, "body.order_id") == "o-17"
    # requestContext without httpMethod or http: not one of the four shapes.
    with pytest.raises(MissingKeyError):
        key_from({"body": body, "requestContext": {"stage": "x"}}, "body.order_id")
    # An expression that decodes itself gets the raw body: no double decoding.
    event = http_event("alb", ORDER, "base64")
    assert select(event, "powertools_base64(body)") == json.dumps(ORDER)
    assert select(event, "body") == ORDER
    # Fields beside the body are untouched; a body that is not JSON is its text.
    event = http_event("api_gateway_v1", ORDER)
    assert select(event, "[body.order_id, httpMethod]") == ["o-17", "POST"]
    event["body"] = "order_id=o-17"
    assert select(event, "body") == "order_id=o-17"
    with pytest.raises(MissingKeyError):
        key_from(event, "body.order_id")


@pytest.mark.parametrize(
    ("body", "base64_encoded", "expression"),
    [
        ("not base64 at all!", True, "body.order_id"),  # decodes to bytes that are not UTF-8
        (base64.b64encode(b"\x1f\x8b broken gzip").decode(), True, "body.order_id"),
        ("{not json", False, "powertools_json(body).order_id"),
        (base64.b64encode(b"\xff\xfe").decode(), False, "powertools_base64(body)"),
        ("x", False, "powertools_base64_gzip(body)"),
    ],
)
def test_a_body_that_does_not_decode_is_a_missing_key(
    guard: Idempotency, body: str, base64_encoded: bool, expression: str
) -> None:
    event = http_event("api_gateway_v2", ORDER)
    event["body"], event["isBase64Encoded"] = body, base64_encoded
    with pytest.raises(MissingKeyError):
        key_from(event, expression)
    runs: list[int] = []

    @idempotent_handler(guard, key=expression)
    def handler(event: dict[str, Any], context: Any) -> None:
        runs.append(1)

    answer = handler(event, FakeContext())  # an HTTP event: the middleware's 400, as a proxy
    assert answer["statusCode"] == 400 and "idempotency-key-missing" in answer["body"]
    assert runs == []


def test_gzip_is_recognised_by_its_bytes_not_a_header() -> None:
    event = http_event("function_url", ORDER, "base64")
    event["body"] = base64.b64encode(gzip.compress(json.dumps(ORDER).encode())).decode()
    assert "content-encoding" not in event["headers"]
    assert key_from(event, "body.order_id") == "o-17"


def test_event_sources_share_the_selectors_and_their_functions() -> None:
    """firstwrite.events selects record keys with the same implementation: Powertools'
    functions work there too, over the record's decoded body."""
    body = {"envelope": json.dumps({"id": "inner-1"})}
    select_key = key_function("powertools_json(envelope).id", lambda r: "own", lambda r: r)
    assert select_key(body) == "inner-1"
    assert key_function("json(envelope).id", lambda r: "own", lambda r: r)(body) == "inner-1"


def test_expressions_search_a_normalised_payload_unless_it_is_json_already() -> None:
    """A decoded event is searched as it is; anything JSON would not hold as it is (tuples,
    non-string keys, dataclasses...) is normalised first, so jmespath sees JSON types."""
    assert select({"items": (1, 2)}, "length(items)") == 2
    assert select({"items": [(1, 2)]}, "items[0][1]") == 2
    assert select({"n": {1: "one"}}, 'n."1"') == "one"
    event = http_event("api_gateway_v2", ORDER)
    assert select(event, "length(keys(@))") == len(event)


@pytest.mark.parametrize("shape", HTTP_SHAPES)
def test_the_same_over_http(make_ddb: Any, table_name: str, shape: str) -> None:
    """The body selectors through the layer on the engine served over HTTP (a boto3 client
    with an endpoint URL, as against AWS): base64+gzip bodies, one run, the resend replayed."""
    from firstwrite.idempotency.config import IdempotencyConfig

    guard = Idempotency(IdempotencyConfig(table_name=table_name), client=make_ddb("http"))
    guard.ensure_table()
    runs: list[str] = []

    @idempotent_handler(guard, key="powertools_json(powertools_base64_gzip(body)).order_id")
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        runs.append(shape)
        return {"statusCode": 201, "body": "{}"}

    first = handler(http_event(shape, ORDER, "base64+gzip"), FakeContext())
    assert replayed(handler(http_event(shape, ORDER, "base64+gzip"), FakeContext())) == first
    assert runs == [shape]
    record = guard.get("o-17")
    assert record is not None and record.status.name == "COMPLETED"
