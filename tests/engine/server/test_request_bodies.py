"""Request bodies DynamoDB reads in unusual forms: JSON that is not an object, and bodies sent
compressed (``Content-Encoding: gzip`` or ``deflate``), over real HTTP and through the same
``wire_call`` the boto3 binding uses.

Sources: dynalite's test/helpers.js (the SerializationException texts DynamoDB gives a value
that cannot be a structure); ScyllaDB's Alternator tests of compressed requests, run against
DynamoDB (test_compressed_request.py; PRs scylladb#27049, #27917, #28820): gzip and deflate
bodies are read, several gzip members too, and an unknown coding or broken data is a 500 there;
here it is a 400 SerializationException (bad input is never a 5xx: SDKs would resend it).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import bind, dummy_session
from firstwrite.engine.server.app import ServerThread
from firstwrite.engine.wire import wire_call

TARGET = "DynamoDB_20120810."
JSON_10 = "application/x-amz-json-1.0"
SERIALIZATION = "com.amazon.coral.service#SerializationException"
KEY, SECRET = "AKIDBODIES", "bodies-secret"


@pytest.fixture
def server(engine: Engine) -> Iterator[str]:
    with ServerThread(engine, credentials={KEY: SECRET}) as url:
        yield url


def _signed(url: str, operation: str, body: bytes, **headers: str) -> httpx.Response:
    """POST ``body`` signed as botocore signs it (over the bytes sent), ``headers`` added."""
    request = AWSRequest(
        "POST",
        url + "/",
        data=body,
        headers={"Content-Type": JSON_10, "X-Amz-Target": TARGET + operation, **headers},
    )
    SigV4Auth(Credentials(KEY, SECRET), "dynamodb", "us-east-1").add_auth(request)
    return httpx.post(url + "/", content=body, headers=dict(request.headers.items()), timeout=30)


def _client(url: str, **config: Any) -> Any:
    session = boto3.session.Session(botocore_session=dummy_session("us-east-1"))
    return session.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        config=Config(retries={"total_max_attempts": 1}, **config),
    )


def _table(engine: Engine) -> None:
    engine.execute(
        "CreateTable",
        {
            "TableName": "bodies",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


def _put(pk: str, **extra: str) -> bytes:
    item = {"pk": {"S": pk}, **{k: {"S": v} for k, v in extra.items()}}
    return json.dumps({"TableName": "bodies", "Item": item}).encode()


def _stored(engine: Engine, pk: str) -> dict[str, Any] | None:
    got = engine.execute(
        "GetItem", {"TableName": "bodies", "Key": {"pk": {"S": pk}}, "ConsistentRead": True}
    )
    return got.get("Item")


# --- JSON that is not an object ------------------------------------------------------------------

NOT_OBJECTS = [
    (b"null", {"__type": SERIALIZATION}),
    (
        b"[]",
        {
            "__type": SERIALIZATION,
            "Message": "Unrecognized collection type class "
            "com.amazonaws.dynamodb.v20120810.ListTablesInput",
        },
    ),
    (b'[{"TableName": "x"}]', None),  # the same, whatever the list holds
    (b"1", {"__type": SERIALIZATION, "Message": "Unexpected field type"}),
    (b'"x"', {"__type": SERIALIZATION, "Message": "Unexpected field type"}),
    (b"true", {"__type": SERIALIZATION, "Message": "Unexpected field type"}),
    (b"2.5", {"__type": SERIALIZATION, "Message": "Unexpected field type"}),
]


@pytest.mark.parametrize(("body", "expected"), NOT_OBJECTS)
def test_a_body_that_is_not_an_object(
    engine: Engine, server: str, body: bytes, expected: dict[str, str] | None
) -> None:
    if expected is None:
        expected = dict(NOT_OBJECTS[1][1] or {})
    # In process: the binding's path (wire_call), as the HTTP server's.
    status, payload = wire_call(engine, TARGET + "ListTables", body)
    assert (status, json.loads(payload)) == (400, expected)
    # Over HTTP, signed: refused after the signature is checked, as dynalite orders it.
    response = _signed(server, "ListTables", body)
    assert (response.status_code, response.json()) == (400, expected)
    # An unknown operation is still reported as such, and an empty body is still {}.
    status, payload = wire_call(engine, TARGET + "NoSuchOperation", body)
    assert json.loads(payload)["__type"].endswith("#UnknownOperationException")
    assert wire_call(engine, TARGET + "ListTables", b"")[0] == 200


def test_direct_callers_still_pass_no_request(engine: Engine) -> None:
    assert engine.execute("ListTables") == {"TableNames": []}


# --- compressed bodies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("coding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("GZip", gzip.compress),  # codings are case-insensitive
        ("gzip", lambda b: gzip.compress(b[:10]) + gzip.compress(b[10:])),  # two members
        ("identity", lambda b: b),
        ("deflate, gzip", lambda b: gzip.compress(zlib.compress(b))),  # undone last to first
    ],
)
def test_compressed_bodies_are_read(
    engine: Engine, server: str, coding: str, compress: Any
) -> None:
    _table(engine)
    body = compress(_put("p1", v="compressed"))
    response = _signed(server, "PutItem", body, **{"Content-Encoding": coding})
    assert (response.status_code, response.json()) == (200, {})
    assert _stored(engine, "p1") == {"pk": {"S": "p1"}, "v": {"S": "compressed"}}


def test_botocore_request_compression_end_to_end(engine: Engine, server: str) -> None:
    """A real SDK compressing its requests (botocore's requestcompression, switched on for
    DynamoDB's operations as ScyllaDB's tests do) reads and writes as usual."""
    _table(engine)
    client = _client(server, request_min_compression_size_bytes=1)
    model = client.meta.service_model._service_description
    for operation in model["operations"].values():
        operation["requestcompression"] = {"encodings": ["gzip"]}
    sent: list[bytes | None] = []
    client.meta.events.register(
        "before-send.dynamodb",
        lambda request, **_: sent.append(request.headers.get("Content-Encoding")) and None,
    )
    client.put_item(TableName="bodies", Item={"pk": {"S": "sdk"}, "n": {"N": "1.50"}})
    got = client.get_item(TableName="bodies", Key={"pk": {"S": "sdk"}}, ConsistentRead=True)
    assert got["Item"] == {"pk": {"S": "sdk"}, "n": {"N": "1.5"}}
    assert sent == [b"gzip", b"gzip"]  # the SDK compressed both calls


@pytest.mark.parametrize(
    ("coding", "body"),
    [
        ("gzip", _put("bad")),  # not gzip at all
        ("gzip", b""),  # empty is not valid gzip
        # mtime=0: the same bytes in every process, so xdist workers collect the same test ids
        ("gzip", gzip.compress(_put("bad"), mtime=0)[:-1]),  # truncated
        ("gzip", gzip.compress(_put("bad"), mtime=0) + b"junk"),  # DynamoDB ignores it; we refuse
        ("deflate", _put("bad")),
        ("deflate", b""),
        ("deflate", zlib.compress(_put("bad")[:10]) + zlib.compress(_put("bad")[10:])),
        ("br", _put("bad")),  # a coding DynamoDB does not read
        ("garbage", _put("bad")),
    ],
)
def test_broken_or_unknown_codings_are_a_400(
    engine: Engine, server: str, coding: str, body: bytes
) -> None:
    _table(engine)
    response = _signed(server, "PutItem", body, **{"Content-Encoding": coding})
    assert response.status_code == 400  # DynamoDB: 500, which SDKs would retry
    error = response.json()
    assert error["__type"] == SERIALIZATION
    assert error["Message"].startswith("The request body could not be decoded: ")
    assert int(response.headers["x-amz-crc32"]) == zlib.crc32(response.content)
    assert _stored(engine, "bad") is None  # nothing applied


def test_a_body_that_decodes_past_the_limit_is_refused(engine: Engine, server: str) -> None:
    _table(engine)
    body = _put("bomb", v="x" * 100)
    body = body[:-1] + b" " * (17 * 1024 * 1024) + body[-1:]  # valid JSON, 17 MiB
    compressed = gzip.compress(body)
    assert len(compressed) < 100_000
    response = _signed(server, "PutItem", compressed, **{"Content-Encoding": "gzip"})
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert _stored(engine, "bomb") is None
    # Just under the limit it is an ordinary request.
    body = _put("fits", v="x" * 100)
    body = body[:-1] + b" " * (15 * 1024 * 1024) + body[-1:]
    response = _signed(server, "PutItem", gzip.compress(body), **{"Content-Encoding": "gzip"})
    assert response.status_code == 200
    assert _stored(engine, "fits") is not None


def test_the_signature_covers_the_compressed_bytes(engine: Engine, server: str) -> None:
    _table(engine)
    body = gzip.compress(_put("signed"), mtime=0)
    request = AWSRequest(
        "POST",
        server + "/",
        data=_put("signed"),  # signed over the uncompressed body: not what was sent
        headers={"Content-Type": JSON_10, "X-Amz-Target": TARGET + "PutItem"},
    )
    SigV4Auth(Credentials(KEY, SECRET), "dynamodb", "us-east-1").add_auth(request)
    headers = {**dict(request.headers.items()), "Content-Encoding": "gzip"}
    response = httpx.post(server + "/", content=body, headers=headers, timeout=30)
    assert response.status_code == 400
    assert response.json()["__type"].endswith("#InvalidSignatureException")
    assert _stored(engine, "signed") is None


@pytest.mark.parametrize("full_stack", [False, True])
def test_a_bound_client_compressing_its_requests(engine: Engine, full_stack: bool) -> None:
    """In process: botocore compresses after ``before-call``, so the quick path never sees it;
    the full stack (and a call the quick path hands over) reads the body decompressed."""
    _table(engine)
    session = boto3.session.Session(botocore_session=dummy_session("us-east-1"))
    client = session.client(
        "dynamodb",
        region_name="us-east-1",
        config=Config(request_min_compression_size_bytes=1, retries={"total_max_attempts": 3}),
    )
    for operation in client.meta.service_model._service_description["operations"].values():
        operation["requestcompression"] = {"encodings": ["gzip"]}
    bind(client, engine, full_stack=full_stack)
    # One throttle first: the quick path hands the call to botocore's retry handler, whose
    # retry (compressed) must be answered once, not applied twice.
    engine.faults.throttle(operation="UpdateItem", count=1)
    client.update_item(
        TableName="bodies",
        Key={"pk": {"S": "bound"}},
        UpdateExpression="ADD n :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    got = client.get_item(TableName="bodies", Key={"pk": {"S": "bound"}}, ConsistentRead=True)
    assert got["Item"] == {"pk": {"S": "bound"}, "n": {"N": "1"}}
