"""Real boto3 clients bound to an in-process engine, and the shared ``ddb`` fixture both ways."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import zlib
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from firstwrite.engine.api import Context, Engine
from firstwrite.engine.binding.sync import bind, dummy_session, local_client, local_resource, unbind
from firstwrite.engine.errors import DynamoDBError

KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}]


def create_table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST",
    )


def test_requests_are_wire_encoded_and_region_is_the_clients(
    engine: Engine, temp_operation: Callable[..., None]
) -> None:
    seen: list[Context] = []

    def capture(ctx: Context) -> dict[str, Any]:
        seen.append(ctx)
        return {"Item": {"b": {"B": b"\x00\xff"}}}

    temp_operation("GetItem", capture)
    client = local_client(engine, region="ap-northeast-1")
    response = client.get_item(TableName="t", Key={"pk": {"B": b"\x01"}})
    assert response["Item"] == {"b": {"B": b"\x00\xff"}}
    assert seen[0].wire is True
    assert seen[0].params["Key"] == {"pk": {"B": "AQ=="}}  # base64, as on the wire
    assert seen[0].region == "ap-northeast-1"


def test_response_headers_carry_request_id_and_valid_crc32(engine: Engine) -> None:
    client = local_client(engine)
    captured: list[Any] = []
    client.meta.events.register(
        "after-call.dynamodb.ListTables", lambda http_response, **kw: captured.append(http_response)
    )
    response = client.list_tables()
    http = captured[0]
    assert int(http.headers["x-amz-crc32"]) == zlib.crc32(http.content)
    assert response["ResponseMetadata"]["RequestId"] == http.headers["x-amzn-RequestId"]
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-type"] == (
        "application/x-amz-json-1.0"
    )


def test_botocore_retries_server_errors(
    engine: Engine, temp_operation: Callable[..., None]
) -> None:
    calls: list[int] = []

    def flaky(ctx: Context) -> dict[str, Any]:
        calls.append(1)
        if len(calls) < 2:
            raise DynamoDBError("InternalServerError", "Internal server error")
        return {"Endpoints": []}

    temp_operation("DescribeEndpoints", flaky)
    # Two attempts in all: one backoff of at most a second.
    client = local_client(engine, config=Config(retries={"mode": "standard", "max_attempts": 2}))
    response = client.describe_endpoints()
    assert len(calls) == 2
    assert response["ResponseMetadata"]["RetryAttempts"] == 1


def test_no_retries_surface_the_error(engine: Engine, temp_operation: Callable[..., None]) -> None:
    def crash(ctx: Context) -> dict[str, Any]:
        raise RuntimeError("engine bug")

    temp_operation("DescribeEndpoints", crash)
    client = local_client(engine, config=Config(retries={"max_attempts": 0}))
    with pytest.raises(client.exceptions.InternalServerError) as info:
        client.describe_endpoints()
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def test_streams_client_dispatches_on_target_prefix(
    engine: Engine, temp_operation: Callable[..., None]
) -> None:
    temp_operation(
        "ListStreams", lambda ctx: {"Streams": [{"TableName": ctx.operation}]}, "streams"
    )
    streams = local_client(engine, service_name="dynamodbstreams")
    assert streams.list_streams()["Streams"] == [{"TableName": "ListStreams"}]


def test_bind_an_existing_client_and_unbind(
    engine: Engine, temp_operation: Callable[..., None]
) -> None:
    temp_operation("DescribeEndpoints", lambda ctx: {"Endpoints": []})
    session = boto3.session.Session(botocore_session=dummy_session())
    client = session.client(
        "dynamodb",
        region_name="us-west-2",
        endpoint_url="http://127.0.0.1:9",  # nothing listens there
        config=Config(retries={"max_attempts": 0}, connect_timeout=1),
    )
    assert bind(client, engine) is client
    assert bind(client, engine) is client  # idempotent: one handler, not two
    assert client.describe_endpoints()["Endpoints"] == []
    unbind(client)
    with pytest.raises(EndpointConnectionError):
        client.describe_endpoints()


def test_local_client_ignores_the_machines_aws_setup(tmp_path: Path) -> None:
    # A profile that does not exist and an unparsable config file break any normal boto3
    # client; local_client must not even look at them.
    bad_config = tmp_path / "config"
    bad_config.write_text("this is [not an ini file")
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "AWS_PROFILE": "does-not-exist",
        "AWS_CONFIG_FILE": str(bad_config),
        "AWS_SHARED_CREDENTIALS_FILE": str(bad_config),
        "AWS_DEFAULTS_MODE": "auto",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9",
    }
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"):
        env.pop(name, None)
    script = textwrap.dedent(
        """
        from firstwrite.engine.binding.sync import local_client, local_resource
        print(local_client().list_tables()["TableNames"])
        print(local_resource().meta.client.list_tables()["TableNames"])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "[]"]


def test_dummy_sessions_share_parsed_data_but_not_handlers_regions_or_engines() -> None:
    # One data loader for every dummy session, so a client does not re-parse botocore's JSON;
    # boto3 appends its data directory on each Session made over one, and it must stay once.
    loader = dummy_session().get_component("data_loader")
    sessions = [boto3.session.Session(botocore_session=dummy_session()) for _ in range(3)]
    assert all(s._session.get_component("data_loader") is loader for s in sessions)
    paths = list(loader.search_paths)
    assert len(paths) == len(set(paths))
    assert any(Path(p) == Path(boto3.__file__).parent / "data" for p in paths)

    # Clients made at once on threads, each bound to its own engine in its own region.
    regions = ["us-east-1", "us-west-2", "eu-west-1", "ap-south-1"] * 2
    engines = [Engine() for _ in regions]
    clients: list[Any] = [None] * len(regions)

    def make(i: int) -> None:
        clients[i] = local_client(engines[i], region=regions[i])

    threads = [threading.Thread(target=make, args=(i,)) for i in range(len(regions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, client in enumerate(clients):
        create_table(client, f"table-{i}")
    for i, client in enumerate(clients):
        assert client.meta.region_name == regions[i]
        assert client.list_tables()["TableNames"] == [f"table-{i}"]
        assert engines[i].execute("ListTables", {}, region=regions[i])["TableNames"] == [
            f"table-{i}"
        ]
    for engine in engines:
        engine.close()


def test_dummy_clients_share_a_session_per_region_but_not_their_handlers(engine: Engine) -> None:
    from firstwrite.engine.binding import sync

    nowhere = {"endpoint_url": "http://127.0.0.1:9", "config": Config(retries={"max_attempts": 0})}
    bound = bind(sync.dummy_client("dynamodb", "eu-north-1", **nowhere), engine)
    session = sync._SESSIONS["eu-north-1"]
    unbound = sync.dummy_client("dynamodb", "eu-north-1", **nowhere)
    assert sync._SESSIONS["eu-north-1"] is session  # made once
    assert sync.dummy_client("dynamodb", "eu-south-1").meta.region_name == "eu-south-1"
    assert sync._SESSIONS["eu-south-1"] is not session

    assert bound.list_tables()["TableNames"] == []  # answered by the engine
    with pytest.raises(EndpointConnectionError):  # the binding is the bound client's alone
        unbound.list_tables()
    unbind(bound)
    with pytest.raises(EndpointConnectionError):
        bound.list_tables()


# --- through the ddb fixture: in-process and over HTTP ------------------------------------------


def test_create_put_get(ddb: Any, table_name: str) -> None:
    create_table(ddb, table_name)
    assert table_name in ddb.list_tables(Limit=100)["TableNames"] or table_name in [
        n for page in ddb.get_paginator("list_tables").paginate() for n in page["TableNames"]
    ]
    item = {"pk": {"S": "a"}, "data": {"B": b"\x00bytes\xff"}, "n": {"N": "10"}}
    ddb.put_item(TableName=table_name, Item=item)
    got = ddb.get_item(TableName=table_name, Key={"pk": {"S": "a"}}, ConsistentRead=True)
    assert got["Item"] == item
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_conditional_check_failed_shape(ddb: Any, table_name: str) -> None:
    create_table(ddb, table_name)
    old = {"pk": {"S": "a"}, "v": {"N": "1"}, "b": {"B": b"\x01"}}
    ddb.put_item(TableName=table_name, Item=old)
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException) as info:
        ddb.put_item(
            TableName=table_name,
            Item={"pk": {"S": "a"}, "v": {"N": "2"}},
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    error = info.value
    assert isinstance(error, ClientError)
    assert str(error) == (
        "An error occurred (ConditionalCheckFailedException) when calling the PutItem "
        "operation: The conditional request failed"
    )
    assert error.response["Error"] == {
        "Message": "The conditional request failed",
        "Code": "ConditionalCheckFailedException",
    }
    assert error.response["message"] == "The conditional request failed"
    assert error.response["Item"] == old
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert len(error.response["ResponseMetadata"]["RequestId"]) == 52
    # Without ALL_OLD there is no Item.
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException) as info:
        ddb.put_item(
            TableName=table_name,
            Item={"pk": {"S": "a"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    assert "Item" not in info.value.response


def test_missing_table(ddb: Any, table_name: str) -> None:
    with pytest.raises(ddb.exceptions.ResourceNotFoundException) as info:
        ddb.get_item(TableName=table_name, Key={"pk": {"S": "a"}})
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_local_resource_table_api(engine: Engine, table_name: str) -> None:
    resource = local_resource(engine)
    table = resource.create_table(
        TableName=table_name,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST",
    )
    table.put_item(Item={"pk": "a", "n": Decimal("1.5"), "b": b"\x00"})
    item = table.get_item(Key={"pk": "a"}, ConsistentRead=True)["Item"]
    assert item["n"] == Decimal("1.5")
    assert item["b"].value == b"\x00"
