"""Compressed answers: gzip or deflate when the request's ``Accept-Encoding`` asks, as DynamoDB.

Source: ScyllaDB's Alternator test_compressed_response.py, run against DynamoDB (its
``is_aws`` branches): answers over 4 KB are compressed with the coding the client accepts,
smaller ones never; which coding a header picks (the table below is DynamoDB's, recorded
there); only the first ``Accept-Encoding`` header counts. The CRC32 a compressed answer
carries is that of the bytes sent: botocore checks it on the undecoded body, and the AWS SDK
for Java's DynamoDB client computes it "from compressed data" (its
``crc32FromCompressedDataEnabled``, on by default).
"""

from __future__ import annotations

import gzip
import http.client
import json
import zlib
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import dummy_session
from firstwrite.engine.server.app import ServerThread
from firstwrite.engine.server.response_coding import THRESHOLD, chosen_coding

TARGET = "DynamoDB_20120810."
JSON_10 = "application/x-amz-json-1.0"
TABLE = "coded"


@pytest.fixture
def server(engine: Engine) -> Iterator[str]:
    engine.execute(
        "CreateTable",
        {
            "TableName": TABLE,
            "AttributeDefinitions": [{"AttributeName": "p", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "p", "KeyType": "HASH"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    with ServerThread(engine) as url:
        yield url


def _put(engine: Engine, key: str, value: str) -> None:
    engine.execute("PutItem", {"TableName": TABLE, "Item": {"p": {"S": key}, "x": {"S": value}}})


def _post(url: str, operation: str, body: dict[str, Any], *accept: str) -> http.client.HTTPResponse:
    """POST with each of ``accept`` as an ``Accept-Encoding`` header (none: none sent); the
    answer read undecoded."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    payload = json.dumps(body).encode()
    connection.putrequest("POST", "/", skip_accept_encoding=True)
    for name, value in [
        ("Content-Type", JSON_10),
        ("X-Amz-Target", TARGET + operation),
        ("Content-Length", str(len(payload))),
        *(("Accept-Encoding", value) for value in accept),
    ]:
        connection.putheader(name, value)
    connection.endheaders(payload)
    response = connection.getresponse()
    response.raw_body = response.read()  # type: ignore[attr-defined]
    connection.close()
    return response


def _get(url: str, key: str, *accept: str) -> http.client.HTTPResponse:
    return _post(url, "GetItem", {"TableName": TABLE, "Key": {"p": {"S": key}}}, *accept)


def _decoded(response: http.client.HTTPResponse) -> bytes:
    raw: bytes = response.raw_body  # type: ignore[attr-defined]
    coding = response.getheader("Content-Encoding")
    if coding == "gzip":
        return gzip.decompress(raw)
    if coding == "deflate":
        return zlib.decompress(raw)  # zlib's format, as DynamoDB's (and Python's test) reads it
    assert coding is None, coding
    return raw


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_an_answer_over_4_kb_is_compressed_with_the_coding_asked_for(
    engine: Engine, server: str, coding: str
) -> None:
    _put(engine, "big", "x" * THRESHOLD)
    response = _get(server, "big", coding)
    assert response.status == 200
    assert response.getheader("Content-Encoding") == coding
    raw = response.raw_body  # type: ignore[attr-defined]
    assert int(response.getheader("Content-Length") or -1) == len(raw)
    assert int(response.getheader("x-amz-crc32") or -1) == zlib.crc32(raw)  # the bytes sent
    item = json.loads(_decoded(response))["Item"]
    assert item == {"p": {"S": "big"}, "x": {"S": "x" * THRESHOLD}}
    assert len(raw) * 30 < THRESHOLD  # it was compressed, not only labelled


def test_small_answers_and_requests_that_do_not_ask_go_out_as_they_are(
    engine: Engine, server: str
) -> None:
    _put(engine, "small", "x" * (THRESHOLD // 2))
    _put(engine, "big", "x" * THRESHOLD)
    small = _get(server, "small", "gzip")
    assert small.getheader("Content-Encoding") is None
    assert json.loads(small.raw_body)["Item"]["x"]["S"] == "x" * (THRESHOLD // 2)  # type: ignore[attr-defined]
    for accept in [(), ("identity",), ("br",), ("gzip;q=0",)]:
        response = _get(server, "big", *accept)
        assert response.getheader("Content-Encoding") is None, accept
        raw = response.raw_body  # type: ignore[attr-defined]
        assert int(response.getheader("x-amz-crc32") or -1) == zlib.crc32(raw)
        assert json.loads(raw)["Item"]["x"]["S"] == "x" * THRESHOLD


def test_only_the_first_accept_encoding_header_counts(engine: Engine, server: str) -> None:
    _put(engine, "big", "x" * THRESHOLD)
    assert _get(server, "big", "gzip", "identity").getheader("Content-Encoding") == "gzip"
    assert _get(server, "big", "identity", "gzip").getheader("Content-Encoding") is None


# DynamoDB's choices, as test_compressed_response.py's test_accept_encoding_header records them.
DYNAMODB_CHOICES = [
    ("identity", None),
    ("", None),
    ("br", None),
    ("x-gzip", None),
    ("gzip, deflate", "gzip"),
    ("br, identity, deflate, gzip", "deflate"),
    ("GZIP, identity", "gzip"),
    ("dog, gzip ,, cat", "gzip"),
    ("br, gzip;q=0, deflate; q = 0.5 , identity;q=0", "deflate"),
    ("*", "gzip"),
    ("*, deflate", "deflate"),
    ("*, gzip;q=0.5", "deflate"),
    ("*;q=0", None),
    ("*;q=0.5,identity", "gzip"),
    ("br;q=0.8,identity;q=0.5,*;q=0", None),
    ('"gzip"', None),
    ("gzip br", None),
    ("gzip;q=31,deflate;q=51", "gzip"),
    ("deflate;q=0.5, gzip;q=1;q=0.2", "gzip"),
    ("deflate;q=0.5,gzip;q=0.", "deflate"),
    ("deflate;q=0.5,gzip;q=0.x", "gzip"),
    ("deflate;q=-0.5,gzip;q=0.2", "gzip"),
    ("gzip;q= 0;q=1", None),
    ("gzip;q =0;q=1", "gzip"),
    ("gzip;nq=0;q=1", None),
    ("gzip;q=0, gzip;q=1, gzip;q=0", "gzip"),
    ("br,identity;q=0.5,gzip;q=0.0001", "gzip"),
]


@pytest.mark.parametrize(("accept", "expected"), DYNAMODB_CHOICES)
def test_the_coding_is_chosen_as_dynamodb_chooses(accept: str, expected: str | None) -> None:
    chosen = chosen_coding(accept.encode())
    assert (None if chosen is None else chosen.decode()) == expected


def test_a_choice_over_http(engine: Engine, server: str) -> None:
    _put(engine, "big", "x" * THRESHOLD)
    response = _get(server, "big", "*, gzip;q=0.5")
    assert response.getheader("Content-Encoding") == "deflate"
    assert json.loads(_decoded(response))["Item"]["x"]["S"] == "x" * THRESHOLD


def test_botocore_reads_compressed_answers_and_checks_their_crc32(
    engine: Engine, server: str
) -> None:
    """Botocore asks for no coding; a client that adds the header (and decodes before parsing,
    as Alternator's test does) gets compressed answers whose CRC32 botocore's check accepts
    (a mismatch is a ChecksumError, retried here zero times)."""
    session = boto3.session.Session(botocore_session=dummy_session("us-east-1"))
    client = session.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=server,
        aws_access_key_id="AKIDCODED",
        aws_secret_access_key="secret",
        config=Config(retries={"total_max_attempts": 1}),
    )
    codings: list[str] = []

    def ask(params: dict[str, Any], **_: Any) -> None:
        params["headers"]["Accept-Encoding"] = "gzip"

    def decode(response_dict: dict[str, Any], **_: Any) -> None:
        coding = response_dict["headers"].get("Content-Encoding")
        codings.append(coding)
        if coding == "gzip":
            response_dict["body"] = gzip.decompress(response_dict["body"])

    client.meta.events.register("before-call", ask)
    client.meta.events.register("before-parse", decode)
    values = {f"k{i}": f"{i:05d}" * 3000 for i in range(10)}  # 15 KB each
    for key, value in values.items():
        _put(engine, key, value)
    answer = client.batch_get_item(
        RequestItems={TABLE: {"Keys": [{"p": {"S": key}} for key in values]}}
    )
    got = {item["p"]["S"]: item["x"]["S"] for item in answer["Responses"][TABLE]}
    assert got == values
    small = client.get_item(TableName=TABLE, Key={"p": {"S": "absent"}})
    assert "Item" not in small
    assert codings == ["gzip", None]
    client.close()
