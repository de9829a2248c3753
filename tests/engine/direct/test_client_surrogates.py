"""A lone surrogate (``"\\ud800"``) in a request: every way into the engine gives DynamoDB's
answer, the bare ``SerializationException`` the HTTP server sends for a body that is not
Unicode text (issue 15, hole 5), and nothing is written.

Over HTTP, and through a bound boto3 client (botocore serialises the request to JSON first),
the body itself cannot be read. The ``DirectClient`` hands Python values to the engine, so it
checks for them itself: before, it answered 500 for some, and stored or compared others."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from firstwrite.engine import DirectClient, Engine, ServerThread, local_client
from firstwrite.engine.direct.surrogates import holds_surrogate

TABLE = "surrogates"
SERIALIZATION = "com.amazon.coral.service#SerializationException"

# (operation, request): each holds one lone surrogate somewhere DynamoDB would read it.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "S value": ("PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "x": {"S": "\ud800"}}}),
    "key value": ("PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "b\udc00"}}}),
    "attribute name": (
        "PutItem",
        {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "\udbff": {"S": "x"}}},
    ),
    "string set": (
        "PutItem",
        {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "x": {"SS": ["ok", "\ud800"]}}},
    ),
    "nested map": (
        "PutItem",
        {
            "TableName": TABLE,
            "Item": {"pk": {"S": "a"}, "m": {"M": {"l": {"L": [{"S": "\udfff"}]}}}},
        },
    ),
    "expression name": (
        "PutItem",
        {
            "TableName": TABLE,
            "Item": {"pk": {"S": "a"}},
            "ConditionExpression": "attribute_not_exists(#n)",
            "ExpressionAttributeNames": {"#n": "\ud800"},
        },
    ),
    "expression value": (
        "PutItem",
        {
            "TableName": TABLE,
            "Item": {"pk": {"S": "a"}},
            "ConditionExpression": "attribute_not_exists(pk) OR pk = :v",
            "ExpressionAttributeValues": {":v": {"S": "\ud800"}},
        },
    ),
    "table name": ("PutItem", {"TableName": TABLE + "\ud800", "Item": {"pk": {"S": "a"}}}),
    "GetItem key": ("GetItem", {"TableName": TABLE, "Key": {"pk": {"S": "\ud800"}}}),
    "Query value": (
        "Query",
        {
            "TableName": TABLE,
            "KeyConditionExpression": "pk = :v",
            "ExpressionAttributeValues": {":v": {"S": "\ud800"}},
        },
    ),
    "transaction item": (
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "t1"}}}},
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "t2"}, "x": {"S": "\udc00"}}}},
            ]
        },
    ),
    "batch item": (
        "BatchWriteItem",
        {"RequestItems": {TABLE: [{"PutRequest": {"Item": {"pk": {"S": "\ud800"}}}}]}},
    ),
}


def _method(operation: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in operation).lstrip("_")


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with Engine() as engine:
        engine.execute(
            "CreateTable",
            {
                "TableName": TABLE,
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )
        yield engine


@pytest.fixture(scope="module")
def server(engine: Engine) -> Iterator[str]:
    with ServerThread(engine) as url:
        yield url


def _items(engine: Engine) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = engine.execute("Scan", {"TableName": TABLE})["Items"]
    return items


@pytest.mark.parametrize("case", CASES)
def test_the_http_server_refuses_the_body(engine: Engine, server: str, case: str) -> None:
    # The reference: what an SDK that escapes the surrogate (json.dumps does) gets over HTTP.
    operation, request = CASES[case]
    response = httpx.post(
        server,
        content=json.dumps(request).encode(),
        headers={
            "content-type": "application/x-amz-json-1.0",
            "x-amz-target": f"DynamoDB_20120810.{operation}",
        },
    )
    assert response.status_code == 400
    assert response.json() == {"__type": SERIALIZATION}
    assert _items(engine) == []


def _clients(engine: Engine, server: str) -> dict[str, Any]:
    return {
        "DirectClient": DirectClient(engine),
        "DirectClient, validate=True": DirectClient(engine, validate=True),
        "local_client": local_client(engine),
        "boto3 over HTTP": boto3.client(
            "dynamodb",
            endpoint_url=server,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        ),
    }


@pytest.mark.parametrize(
    "way", ["DirectClient", "DirectClient, validate=True", "local_client", "boto3 over HTTP"]
)
@pytest.mark.parametrize("case", CASES)
def test_every_client_gets_the_serialization_exception(
    engine: Engine, server: str, way: str, case: str
) -> None:
    operation, request = CASES[case]
    client = _clients(engine, server)[way]
    with pytest.raises(ClientError) as caught:
        getattr(client, _method(operation))(**request)
    error = caught.value.response
    assert error["Error"] == {"Code": "SerializationException", "Message": ""}
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert isinstance(caught.value, client.exceptions.ClientError)
    assert _items(engine) == []


@pytest.mark.parametrize("make", [DirectClient, local_client])
def test_text_that_only_looks_like_a_surrogate_is_kept(
    engine: Engine, make: Callable[[Engine], Any]
) -> None:
    # No false alarm: a real non-BMP character, the six characters "\ud800", and bytes.
    client = make(engine)
    item = {
        "pk": {"S": "\U0001f600"},
        "text": {"S": "\\ud800 is a lone high surrogate"},
        "raw": {"B": b"\\ud800\xed\xa0\x80"},
        "names": {"SS": ["\\udc00"]},
    }
    try:
        client.put_item(TableName=TABLE, Item=item)
        got = client.get_item(TableName=TABLE, Key={"pk": {"S": "\U0001f600"}})["Item"]
        assert got == item
    finally:
        client.delete_item(TableName=TABLE, Key={"pk": {"S": "\U0001f600"}})


class _Mapping(Mapping[str, Any]):
    """A Mapping that is not a dict: neither msgpack nor marshal writes it."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


# (request, whether it holds a surrogate), one per way holds_surrogate decides: msgpack writes
# it; msgpack refuses it and marshal's bytes settle it; only the walk of its strings can.
SHAPES: dict[str, tuple[Any, bool]] = {
    "plain, clean": ({"a": {"S": "x\U0001f600"}, "b": [b"\xed\xa0\x80", 1, 2.5, None]}, False),
    "plain, surrogate value": ({"a": {"S": "x\ud800"}}, True),
    "plain, surrogate key": ({"a": {"\udc00": {"S": "x"}}}, True),
    "tuple": ({"a": ("ok", "\udbff")}, True),
    "set (msgpack refuses)": ({"a": {"ok", "\ud800"}}, True),
    "set, clean": ({"a": {"ok", "fine"}}, False),
    "huge int (msgpack refuses)": ({"a": 1 << 80, "b": "\ud800"}, True),
    "huge int, clean": ({"a": 1 << 80, "b": "x"}, False),
    "bytes like a surrogate": ({"a": 1 << 80, "b": b"\xed\xa0\x80"}, False),
    "Mapping (walked)": ({"a": _Mapping({"k": "\ud800"})}, True),
    "Mapping, clean": ({"a": _Mapping({"k": "v"})}, False),
    "datetime (walked)": ({"a": dt.datetime(2026, 1, 1), "b": ["\udfff"]}, True),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_holds_surrogate_finds_every_one_and_no_other(shape: str) -> None:
    request, expected = SHAPES[shape]
    assert holds_surrogate(request) is expected


def test_holds_surrogate_after_a_large_request_and_across_threads() -> None:
    big = {"a": {"S": "x" * (2 << 20)}}
    assert holds_surrogate(big) is False
    assert holds_surrogate({"a": "\ud800"}) is True  # the packer dropped for its size: a new one
    assert holds_surrogate({"a": "clean"}) is False
    results: list[list[bool]] = [[] for _ in range(4)]

    def check(mine: list[bool]) -> None:  # a packer per thread: none sees another's strings
        for _ in range(200):
            mine.append(holds_surrogate({"a": {"S": "ok"}, "b": ["x" * 100]}))
            mine.append(holds_surrogate({"a": {"S": "ok\ud800"}}))

    threads = [threading.Thread(target=check, args=(mine,)) for mine in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [[False, True] * 200] * 4
