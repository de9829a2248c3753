"""The plugin's fixtures, used as a project's tests would use them (the plugin is loaded by
its entry point). Every test checks through the engine itself that the fixture is wired to it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import boto3
import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.clock import Clock
from firstwrite.engine.server.app import ServerThread
from firstwrite.idempotency import Idempotency, IdempotencyConfig

from . import library

KEY = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRS = [{"AttributeName": "pk", "AttributeType": "S"}]


def _create(client: Any, name: str = "things", **extra: Any) -> None:
    client.create_table(
        TableName=name,
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )


def test_this_projects_ini_chooses_a_file_under_tmp_path(
    firstwrite_engine: Engine, tmp_path: Path
) -> None:
    # pyproject.toml: firstwrite_storage = "file" (the plugin's default is memory).
    assert firstwrite_engine.path == str(tmp_path / "firstwrite.db")
    _create(_direct(firstwrite_engine))
    # Another engine on the same file sees the table: it is on disk, not in this object.
    with Engine(tmp_path / "firstwrite.db") as other:
        assert other.execute("ListTables", {})["TableNames"] == ["things"]


@pytest.mark.firstwrite(storage="memory", region="eu-west-1")
def test_the_marker_chooses_memory_and_region(
    firstwrite_engine: Engine, firstwrite_client: Any
) -> None:
    assert firstwrite_engine.path is None
    assert firstwrite_client.meta.region_name == "eu-west-1"
    _create(firstwrite_client)
    assert firstwrite_engine.execute("ListTables", {}, region="eu-west-1")["TableNames"] == [
        "things"
    ]


def _direct(engine: Engine) -> Any:
    from firstwrite.engine.direct.client import DirectClient

    return DirectClient(engine, region=engine.default_region)


def test_the_clock_is_the_engines_frozen(
    firstwrite_engine: Engine, firstwrite_clock: Clock, firstwrite_client: Any
) -> None:
    assert firstwrite_clock is firstwrite_engine.clock
    assert firstwrite_clock.frozen
    firstwrite_clock.set(1_700_000_000)
    _create(firstwrite_client)
    firstwrite_client.update_time_to_live(
        TableName="things", TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
    )
    firstwrite_client.put_item(
        TableName="things", Item={"pk": {"S": "a"}, "exp": {"N": "1700000100"}}
    )
    firstwrite_engine.ttl.sweep_now()
    assert "Item" in firstwrite_client.get_item(TableName="things", Key={"pk": {"S": "a"}})
    firstwrite_clock.advance(101)
    firstwrite_engine.ttl.sweep_now()  # TTL deletes on the engine's time, not the wall's
    assert "Item" not in firstwrite_client.get_item(TableName="things", Key={"pk": {"S": "a"}})


def test_client_resource_and_streams_share_the_engine(
    firstwrite_engine: Engine,
    firstwrite_client: Any,
    firstwrite_resource: Any,
    firstwrite_streams_client: Any,
) -> None:
    _create(
        firstwrite_client,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    firstwrite_resource.Table("things").put_item(Item={"pk": "a", "n": 3})
    assert firstwrite_client.get_item(TableName="things", Key={"pk": {"S": "a"}})["Item"] == {
        "pk": {"S": "a"},
        "n": {"N": "3"},
    }
    arn = firstwrite_engine.execute("DescribeTable", {"TableName": "things"})["Table"][
        "LatestStreamArn"
    ]
    [shard] = firstwrite_streams_client.describe_stream(StreamArn=arn)["StreamDescription"][
        "Shards"
    ]
    iterator = firstwrite_streams_client.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = firstwrite_streams_client.get_records(ShardIterator=iterator)["Records"]
    assert [r["dynamodb"]["NewImage"]["n"] for r in records] == [{"N": "3"}]


@pytest.mark.asyncio
async def test_the_aio_client_is_bound_in_process(
    firstwrite_engine: Engine, firstwrite_aio_client: Any
) -> None:
    await firstwrite_aio_client.create_table(
        TableName="things", KeySchema=KEY, AttributeDefinitions=ATTRS, BillingMode="PAY_PER_REQUEST"
    )
    await firstwrite_aio_client.put_item(TableName="things", Item={"pk": {"S": "a"}})
    with pytest.raises(firstwrite_aio_client.exceptions.ConditionalCheckFailedException):
        await firstwrite_aio_client.put_item(
            TableName="things",
            Item={"pk": {"S": "a"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    items = firstwrite_engine.execute("Scan", {"TableName": "things"})["Items"]
    assert items == [{"pk": {"S": "a"}}]


def test_the_guard_runs_once_on_the_engines_clock(
    firstwrite_guard: Idempotency, firstwrite_engine: Engine, firstwrite_clock: Clock
) -> None:
    firstwrite_clock.set(1_700_000_000)
    runs: list[int] = []

    def charge() -> dict[str, int]:
        runs.append(1)
        return {"receipt": len(runs)}

    assert firstwrite_guard.run("order-1", charge, payload={"amount": 5}) == {"receipt": 1}
    assert firstwrite_guard.run("order-1", charge, payload={"amount": 5}) == {"receipt": 1}
    assert runs == [1]
    config = firstwrite_guard.config
    [record] = firstwrite_engine.execute("Scan", {"TableName": config.table_name})["Items"]
    # Stamped with the engine's (frozen) time, not the wall clock's.
    assert record["expires_at"] == {"N": str(1_700_000_000 + int(config.retention))}


class TestAnOverriddenConfig:
    @pytest.fixture
    def firstwrite_idempotency_config(self) -> IdempotencyConfig:
        return IdempotencyConfig(table_name="payments-idempotency", retention=7200)

    def test_the_guard_uses_it(
        self, firstwrite_guard: Idempotency, firstwrite_engine: Engine
    ) -> None:
        assert firstwrite_guard.config.retention == 7200
        tables = firstwrite_engine.execute("ListTables", {})["TableNames"]
        assert tables == ["payments-idempotency"]


def test_the_server_serves_the_engine_over_http(
    firstwrite_server: ServerThread, firstwrite_engine: Engine
) -> None:
    assert firstwrite_server.url.startswith("http://127.0.0.1:")
    client = boto3.client(
        "dynamodb",
        endpoint_url=firstwrite_server.url,
        region_name="us-east-1",
        aws_access_key_id="AKIDHTTP",
        aws_secret_access_key="http-secret",
    )
    _create(client)
    assert firstwrite_engine.execute("ListTables", {})["TableNames"] == ["things"]


def test_the_mock_answers_the_library_with_the_tests_engine(
    firstwrite_mock: Engine,
    firstwrite_engine: Engine,
    firstwrite_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the library's, as firstwrite_client's
    assert firstwrite_mock is firstwrite_engine
    library.create_orders_table()  # the code under test's own client
    assert library.place_order("o-1", 7)
    item = firstwrite_client.get_item(TableName="orders", Key={"pk": {"S": "o-1"}})["Item"]
    assert item["amount"] == {"N": "7"}
    assert asyncio.run(library.order_count_async()) == 1
