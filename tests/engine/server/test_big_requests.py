"""Big requests over HTTP (issue 15, hole 3): a hostile one is answered without this process
decoding it, a legitimate one succeeds as it always did. A real server on loopback, its real
screening worker process, boto3 for the legitimate requests.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine import wire
from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import dummy_session
from firstwrite.engine.server.app import ServerThread
from firstwrite.engine.server.screening import Screener

TARGET = "DynamoDB_20120810."
HEADERS = {"Content-Type": "application/x-amz-json-1.0"}
MAX_ITEM = 409_600


def _create(engine: Engine, name: str, sort: bool = False) -> None:
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}]
    if sort:
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
        definitions.append({"AttributeName": "sk", "AttributeType": "N"})
    engine.execute(
        "CreateTable",
        {
            "TableName": name,
            "KeySchema": schema,
            "AttributeDefinitions": definitions,
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


@pytest.fixture
def served(engine: Engine) -> Iterator[tuple[ServerThread, str]]:
    _create(engine, "big")
    _create(engine, "sorted", sort=True)
    server = ServerThread(engine)
    with server as url:
        yield server, url


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every body this process decodes."""
    sizes: list[int] = []
    real = wire.loads

    def loads(body: bytes | str) -> Any:
        sizes.append(len(body))
        return real(body)

    monkeypatch.setattr(wire, "loads", loads)
    return sizes


def _client(url: str) -> Any:
    session = boto3.session.Session(botocore_session=dummy_session("us-east-1"))
    config = Config(retries={"max_attempts": 0}, read_timeout=300)
    return session.client("dynamodb", region_name="us-east-1", endpoint_url=url, config=config)


def _post(url: str, operation: str, body: bytes) -> httpx.Response:
    headers = {**HEADERS, "X-Amz-Target": TARGET + operation}
    return httpx.post(url + "/", content=body, headers=headers, timeout=300)


def tiny_values_body(table: str, size: int = 16 * 1024 * 1024 - 4096) -> bytes:
    """Issue 15's body: a PutItem of one list of about 1.6 million tiny numbers."""
    head = b'{"TableName":"%s","Item":{"pk":{"S":"h"},"l":{"L":[' % table.encode()
    count = (size - len(head) - 20) // len(b'{"N":"1"},')
    return head + b'{"N":"1"},' * count + b'{"N":"1"}]}}}'


def test_a_16_mib_body_of_tiny_values_is_answered_without_decoding_it(
    served: tuple[ServerThread, str], decoded: list[int]
) -> None:
    server, url = served
    for table, message in (
        ("big", "Item size has exceeded the maximum allowed size"),
        ("sorted", "One or more parameter values were invalid: Missing the key sk in the item"),
    ):
        response = _post(url, "PutItem", tiny_values_body(table))
        assert response.status_code == 400
        assert response.json() == {
            "__type": "com.amazon.coral.validate#ValidationException",
            "message": message,
        }
    # Before: this process decoded each 16 MiB body (and a gigabyte of values with it).
    assert max(decoded, default=0) < 1024 * 1024, decoded
    assert server.app.screener.counts["request"] == 2
    # The same body with a broken tail: the worker finds it, the server never decodes it.
    response = _post(url, "PutItem", tiny_values_body("big")[:-3])
    assert response.status_code == 400
    assert response.json() == {"__type": "com.amazon.coral.service#SerializationException"}
    assert max(decoded, default=0) < 1024 * 1024, decoded


def _many_small_values(size: int) -> dict[str, Any]:
    """An item of ``size`` bytes, mostly a list of small numbers (3 bytes each)."""
    count = (size - len("pk") - 1 - len("l") - 3) // 3
    return {"l": {"L": [{"N": "7"}] * count}}


def test_legitimate_big_requests_succeed(
    served: tuple[ServerThread, str], decoded: list[int]
) -> None:
    server, url = served
    ddb = _client(url)
    # A 399 KB item of 130,000 small values.
    item = {"pk": {"S": "many"}, **_many_small_values(399 * 1024)}
    ddb.put_item(TableName="big", Item=item)
    got = ddb.get_item(TableName="big", Key={"pk": {"S": "many"}}, ConsistentRead=True)["Item"]
    assert got == item
    # A BatchWriteItem of 25 items just under 400 KB, each with hundreds of values.
    batch = [
        {"pk": {"S": f"b{i}"}, "l": {"L": [{"N": "1"}] * 500}, "s": {"S": "x" * 397_000}}
        for i in range(25)
    ]
    answer = ddb.batch_write_item(
        RequestItems={"big": [{"PutRequest": {"Item": i}} for i in batch]}
    )
    assert answer["UnprocessedItems"] == {}
    for item in batch:
        key = {"pk": item["pk"]}
        assert ddb.get_item(TableName="big", Key=key, ConsistentRead=True)["Item"] == item
    # A TransactWriteItems just under 4 MB.
    puts = [
        {"pk": {"S": f"t{i}"}, "l": {"L": [{"N": "2"}] * 500}, "s": {"S": "y" * 400_000}}
        for i in range(10)
    ]
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": "big", "Item": p}} for p in puts])
    for item in puts:
        key = {"pk": item["pk"]}
        assert ddb.get_item(TableName="big", Key=key, ConsistentRead=True)["Item"] == item
    # Valid, so the server decoded each of them itself, once.
    assert server.app.screener.counts["decode"] == 3
    assert sum(size > 1024 * 1024 for size in decoded) == 3


@pytest.mark.slow
def test_a_15_mib_batch_write_of_tiny_values_is_written(
    served: tuple[ServerThread, str], decoded: list[int]
) -> None:
    """DynamoDB's biggest kind of valid request (25 items of 63,500 values, 15 MiB of JSON)
    goes through the paced read, the budget and the worker, and the server writes it all."""
    server, url = served
    items = [{"pk": {"S": f"n{i}"}, "l": {"L": [{"N": "7"}] * 63_500}} for i in range(25)]
    puts = [{"PutRequest": {"Item": i}} for i in items]
    body = json.dumps({"RequestItems": {"big": puts}}, separators=(",", ":"))
    assert 15 * 1024 * 1024 < len(body) < 16 * 1024 * 1024
    response = _post(url, "BatchWriteItem", body.encode())
    assert response.status_code == 200, response.text[:300]
    assert response.json() == {"UnprocessedItems": {}}
    for item in (items[0], items[-1]):
        got = server.app.engine.execute(
            "GetItem", {"TableName": "big", "Key": {"pk": item["pk"]}, "ConsistentRead": True}
        )
        assert got == {"Item": item}
    assert server.app.screener.counts["decode"] == 1  # the worker said: decode it...
    assert sum(size > 1024 * 1024 for size in decoded) == 1  # ...and the server did, once
    assert server.app.bodies.pace.spent == len(body)  # read at the pace


def test_big_requests_over_the_limits_are_refused_as_before(
    served: tuple[ServerThread, str], decoded: list[int]
) -> None:
    server, url = served
    ddb = _client(url)
    over = {"pk": {"S": "over"}, "l": {"L": [{"N": "1"}] * 1_000}, "s": {"S": "x" * MAX_ITEM}}
    fine = {"pk": {"S": "fine"}, "l": {"L": [{"N": "1"}] * 1_000}}
    with pytest.raises(ClientError) as caught:
        ddb.batch_write_item(
            RequestItems={"big": [{"PutRequest": {"Item": fine}}, {"PutRequest": {"Item": over}}]}
        )
    error = caught.value.response["Error"]
    assert error == {
        "Code": "ValidationException",
        "Message": "Item size has exceeded the maximum allowed size",
    }
    assert "Item" not in ddb.get_item(TableName="big", Key={"pk": {"S": "fine"}})  # none written
    # Eleven puts of ~400 KB: the transaction's 4 MB, refused before any table is looked at.
    puts = [
        {
            "Put": {
                "TableName": "big",
                "Item": {"pk": {"S": f"t{i}"}, **over, "s": {"S": "z" * 400_000}},
            }
        }
        for i in range(11)
    ]
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=puts)
    assert caught.value.response["Error"]["Message"] == "Transaction size cannot exceed 4 MB"
    assert server.app.screener.counts["request"] == 1
    assert server.app.screener.counts["answer"] == 1
    assert max(decoded, default=0) < 1024 * 1024, decoded


def test_a_big_body_is_answered_only_once_its_signature_holds(engine: Engine) -> None:
    _create(engine, "big")
    server = ServerThread(engine, credentials={"AKIDEXAMPLE": "secret"})
    with server as url:
        response = _post(url, "PutItem", tiny_values_body("big", 2 << 20))
        assert response.status_code == 400
        assert response.json()["__type"].endswith("#MissingAuthenticationTokenException")
        session = boto3.session.Session(botocore_session=dummy_session("us-east-1"))
        ddb = session.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=url,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="secret",
            config=Config(retries={"max_attempts": 0}),
        )
        over = {"pk": {"S": "k"}, "l": {"L": [{"N": "1"}] * 1_000}, "s": {"S": "x" * MAX_ITEM}}
        with pytest.raises(ClientError) as caught:
            ddb.put_item(TableName="big", Item=over)
        assert caught.value.response["Error"]["Message"] == (
            "Item size has exceeded the maximum allowed size"
        )
        with pytest.raises(ClientError) as caught:  # checked before the table is looked for
            ddb.put_item(TableName="nope", Item=over)
        assert caught.value.response["Error"]["Message"] == (
            "Item size has exceeded the maximum allowed size"
        )
    # The two signed puts were screened; the unsigned one was refused on its head, before its
    # body was read (issue 39: credentials are judged first on every route).
    assert server.app.screener.counts["request"] == 2


def test_the_worker_is_started_once_and_stopped_with_the_server(engine: Engine) -> None:
    server = ServerThread(engine)
    with server as url:
        _create(engine, "big")
        for _ in range(3):
            assert _post(url, "PutItem", tiny_values_body("big", 2 << 20)).status_code == 400
        pid = server.app.screener.pid
        assert pid is not None and _alive(pid)
        assert server.app.screener.counts["request"] == 3  # one worker, three bodies
    assert server.app.screener.pid is None
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_worker_that_dies_is_replaced(served: tuple[ServerThread, str]) -> None:
    server, url = served
    body = tiny_values_body("big", 2 << 20)
    assert _post(url, "PutItem", body).status_code == 400
    first = server.app.screener.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    response = _post(url, "PutItem", body)
    assert response.json()["message"] == "Item size has exceeded the maximum allowed size"
    assert server.app.screener.pid not in (None, first)
    assert server.app.screener.counts["request"] == 2


def test_a_body_the_worker_cannot_hold_is_decoded_by_the_server() -> None:
    screener = Screener(address_space=64 * 1024 * 1024)  # less than a 16 MiB body needs
    try:
        verdict = screener.screen(tiny_values_body("big"), TARGET + "PutItem", frozenset({"pk"}))
        assert verdict.kind == "decode"  # MemoryError in the worker: the server's decoder
        assert screener.pid is not None and screener.failures == 0  # and the worker lives on
        small = screener.screen(b"{", TARGET + "PutItem", frozenset())
        assert small.kind == "invalid"
    finally:
        screener.close()
