"""Adding and removing global secondary indexes with UpdateTable, and indexes under eventual
consistency: the backfill and deletion states DynamoDB goes through, its rules for index
changes (with its exact messages), resumption after a restart, stale-read faults and replica lag
on an index, a new replica's indexes.

Messages: the AWS-verified ack-api-quirks findings (DDB-TABLE-nnn, ``table-indexes.md``) and
dynalite's validations (whose tests run against DynamoDB).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.clock import Clock
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.features.indexes.maintenance import IndexConfig

INVALID = "One or more parameter values were invalid: "


def table(client: Any, name: str = "orders", **extra: Any) -> None:
    params: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    params.update(extra)
    client.create_table(**params)


def put(client: Any, pk: str, name: str = "orders", **attrs: str) -> None:
    item = {"pk": {"S": pk}, **{k: {"S": v} for k, v in attrs.items()}}
    client.put_item(TableName=name, Item=item)


def create_gsi(name: str = "by-tenant", attribute: str = "tenant", **extra: Any) -> dict[str, Any]:
    return {
        "Create": {
            "IndexName": name,
            "KeySchema": [{"AttributeName": attribute, "KeyType": "HASH"}],
            "Projection": {"ProjectionType": "ALL"},
            **extra,
        }
    }


def add_index(client: Any, name: str = "orders", **kw: Any) -> dict[str, Any]:
    response = client.update_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "tenant", "AttributeType": "S"}],
        GlobalSecondaryIndexUpdates=[create_gsi(**kw)],
    )
    return response["TableDescription"]  # type: ignore[no-any-return]


def by_tenant(client: Any, tenant: str, name: str = "orders", **kw: Any) -> list[str]:
    response = client.query(
        TableName=name,
        IndexName="by-tenant",
        KeyConditionExpression="tenant = :t",
        ExpressionAttributeValues={":t": {"S": tenant}},
        **kw,
    )
    return sorted(i["pk"]["S"] for i in response["Items"])


def gsi(client: Any, index: str = "by-tenant", name: str = "orders") -> dict[str, Any] | None:
    described = client.describe_table(TableName=name)["Table"]
    for entry in described.get("GlobalSecondaryIndexes", []):
        if entry["IndexName"] == index:
            return entry  # type: ignore[no-any-return]
    return None


def failure(call: Any, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


@pytest.fixture
def manual(tmp_path: Path) -> Any:
    """An engine whose index work runs only when the test says (engine.indexes.work_now)."""
    with Engine(
        tmp_path / "manual.db", index_config=IndexConfig(background=False, batch_size=3)
    ) as engine:
        yield engine


def test_a_new_index_goes_through_dynamodbs_states(manual: Engine) -> None:
    client = DirectClient(manual)
    table(client)
    for n in range(10):
        put(client, f"o{n}", tenant="acme" if n % 2 else "bolt")
    put(client, "untenanted")
    described = add_index(client)
    # DDB-TABLE-148/165: the response shows the table UPDATING and the index CREATING,
    # Backfilling false (resource allocation), with its ARN and zero counters.
    assert described["TableStatus"] == "UPDATING"
    assert described["AttributeDefinitions"] == [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "tenant", "AttributeType": "S"},
    ]
    entry = described["GlobalSecondaryIndexes"][0]
    assert (entry["IndexStatus"], entry["Backfilling"], entry["ItemCount"]) == (
        "CREATING",
        False,
        0,
    )
    assert entry["IndexArn"].endswith(":table/orders/index/by-tenant")
    assert failure(
        client.query,
        TableName="orders",
        IndexName="by-tenant",
        KeyConditionExpression="tenant = :t",
        ExpressionAttributeValues={":t": {"S": "acme"}},
    ) == ("ValidationException", "Cannot read from backfilling global secondary index: by-tenant")
    # Deleting it during resource allocation is refused (DDB-TABLE-149), and so is the table
    # (DDB-TABLE-150).
    assert failure(
        client.update_table,
        TableName="orders",
        GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "by-tenant"}}],
    ) == (
        "ResourceInUseException",
        "Attempt to change a resource which is still in use: Index creation is in resource "
        "allocation phase. Retry deletion during backfilling phase or when the index is active. "
        "Table: orders Index: by-tenant",
    )
    assert failure(client.delete_table, TableName="orders") == (
        "ResourceInUseException",
        "Attempt to change a resource which is still in use: Cannot delete table while indexes "
        "are being created, updated, or deleted.",
    )
    # Writes meanwhile are indexed too, before and after the backfill's cursor.
    put(client, "o0", tenant="acme")
    put(client, "zz", tenant="acme")
    assert manual.indexes.work_now() == 1
    entry = gsi(client)
    assert entry is not None and entry["IndexStatus"] == "ACTIVE" and "Backfilling" not in entry
    assert entry["ItemCount"] == 11
    assert client.describe_table(TableName="orders")["Table"]["TableStatus"] == "ACTIVE"
    assert by_tenant(client, "acme") == ["o0", "o1", "o3", "o5", "o7", "o9", "zz"]
    assert by_tenant(client, "bolt") == ["o2", "o4", "o6", "o8"]


def test_deleting_an_index_and_its_attribute_definitions(manual: Engine) -> None:
    client = DirectClient(manual)
    table(client)
    for n in range(7):
        put(client, f"o{n}", tenant="acme")
    add_index(client)
    manual.indexes.work_now()
    deleted = client.update_table(
        TableName="orders", GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "by-tenant"}}]
    )["TableDescription"]
    assert deleted["TableStatus"] == "UPDATING"
    assert deleted["GlobalSecondaryIndexes"][0]["IndexStatus"] == "DELETING"
    assert failure(
        client.query,
        TableName="orders",
        IndexName="by-tenant",
        KeyConditionExpression="tenant = :t",
        ExpressionAttributeValues={":t": {"S": "acme"}},
    ) == ("ValidationException", "The table does not have the specified index: by-tenant")
    # DDB-TABLE-375: the dying index can be neither updated nor deleted again.
    assert failure(
        client.update_table,
        TableName="orders",
        GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "by-tenant"}}],
    ) == (
        "ResourceInUseException",
        "Attempt to change a resource which is still in use: Index is being deleted. "
        "Table: orders Index: by-tenant",
    )
    put(client, "o9", tenant="acme")  # writes no longer touch it
    assert manual.indexes.work_now() == 1
    described = client.describe_table(TableName="orders")["Table"]
    assert "GlobalSecondaryIndexes" not in described and described["TableStatus"] == "ACTIVE"
    # The attribute only that index used leaves AttributeDefinitions (DDB-TABLE-151).
    assert described["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert manual.storage.read(lambda r: r.index_dump(1)) == []  # every entry is gone
    # The name can be used again, for a new index with none of the old one's entries.
    add_index(client)
    manual.indexes.work_now()
    assert by_tenant(client, "acme") == [f"o{n}" for n in range(7)] + ["o9"]


def test_index_change_rules(manual: Engine) -> None:
    client = DirectClient(manual)
    table(client)
    add_index(client)
    manual.indexes.work_now()

    def update(**kw: Any) -> tuple[str, str]:
        return failure(client.update_table, TableName="orders", **kw)

    defs = [{"AttributeName": "region", "AttributeType": "S"}]
    second = create_gsi("by-region", "region")
    # DDB-TABLE-159: one online index change per call and per table at a time.
    one_only = (
        "LimitExceededException",
        "Subscriber limit exceeded: Only 1 online index can be created or deleted "
        "simultaneously per table",
    )
    assert (
        update(
            AttributeDefinitions=defs,
            GlobalSecondaryIndexUpdates=[second, {"Delete": {"IndexName": "by-tenant"}}],
        )
        == one_only
    )
    client.update_table(
        TableName="orders", AttributeDefinitions=defs, GlobalSecondaryIndexUpdates=[second]
    )
    assert update(GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "by-tenant"}}]) == one_only
    manual.indexes.work_now()
    # DDB-TABLE-160: per-entry rules.
    assert update(
        GlobalSecondaryIndexUpdates=[
            {"Delete": {"IndexName": "by-tenant"}},
            {"Delete": {"IndexName": "by-tenant"}},
        ]
    ) == (
        "ValidationException",
        INVALID + "Only one global secondary index update per index is allowed simultaneously. "
        "Index: by-tenant",
    )
    assert update(GlobalSecondaryIndexUpdates=[{}]) == (
        "ValidationException",
        INVALID + "One of GlobalSecondaryIndexUpdate.Update, GlobalSecondaryIndexUpdate.Create, "
        "GlobalSecondaryIndexUpdate.Delete must not be null",
    )
    # DDB-TABLE-015/359: an empty list alone is no change; with a change it is refused.
    assert update(GlobalSecondaryIndexUpdates=[])[1].startswith("At least one of")
    assert update(GlobalSecondaryIndexUpdates=[], DeletionProtectionEnabled=True) == (
        "ValidationException",
        INVALID + "List of GlobalSecondaryIndexUpdates is empty",
    )
    assert gsi(client, "by-region") is not None
    assert client.describe_table(TableName="orders")["Table"]["DeletionProtectionEnabled"] is False
    # DDB-TABLE-174: a Create or Delete shares a call only with BillingMode and GSI Updates.
    third = create_gsi("by-city", "city")
    city = [{"AttributeName": "city", "AttributeType": "S"}]
    assert update(
        AttributeDefinitions=city,
        GlobalSecondaryIndexUpdates=[third],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
    ) == ("ValidationException", "You cannot create or delete index while changing stream status")
    assert update(
        AttributeDefinitions=city,
        GlobalSecondaryIndexUpdates=[third],
        DeletionProtectionEnabled=True,
    ) == (
        "ValidationException",
        "DeletionProtection modification must be the only operation in the request",
    )
    # DDB-TABLE-162: the new key attribute must be defined in the request.
    assert update(GlobalSecondaryIndexUpdates=[third]) == (
        "ValidationException",
        "AttributeDefinitions is not specified for index: by-city",
    )
    assert update(
        AttributeDefinitions=[{"AttributeName": "other", "AttributeType": "S"}],
        GlobalSecondaryIndexUpdates=[third],
    ) == (
        "ValidationException",
        INVALID + "Some index key attributes are not defined in AttributeDefinitions. "
        "Keys: [city], AttributeDefinitions: [pk, tenant, region]",
    )
    assert update(
        AttributeDefinitions=city,
        GlobalSecondaryIndexUpdates=[
            create_gsi(
                "by-city",
                "city",
                ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
            )
        ],
    ) == (
        "ValidationException",
        INVALID + "ProvisionedThroughput should not be specified for index: by-city when "
        "BillingMode is PAY_PER_REQUEST",
    )
    assert update(AttributeDefinitions=city, GlobalSecondaryIndexUpdates=[create_gsi()]) == (
        "ValidationException",
        INVALID + "Global Secondary Index already exists: by-tenant",
    )
    # DDB-TABLE-375: an unknown index is not found; DDB-TABLE-152: PAY_PER_REQUEST indexes
    # take no provisioned throughput.
    throughput = {"ReadCapacityUnits": 2, "WriteCapacityUnits": 2}
    assert update(
        GlobalSecondaryIndexUpdates=[
            {"Update": {"IndexName": "nope", "ProvisionedThroughput": throughput}}
        ]
    ) == ("ResourceNotFoundException", "Requested resource not found: Index nope for table orders")
    assert update(
        GlobalSecondaryIndexUpdates=[
            {"Update": {"IndexName": "by-tenant", "ProvisionedThroughput": throughput}}
        ]
    ) == (
        "ValidationException",
        "The only Updates for index: by-tenant when TableThroughputMode is PAY_PER_REQUEST can "
        "be to OnDemandThroughput, WarmThroughput",
    )
    # Nothing any refused call asked for happened.
    names = [
        g["IndexName"]
        for g in client.describe_table(TableName="orders")["Table"]["GlobalSecondaryIndexes"]
    ]
    assert names == ["by-tenant", "by-region"]


def test_provisioned_index_throughput_and_billing_switches(manual: Engine) -> None:
    client = DirectClient(manual)
    table(
        client,
        BillingMode="PROVISIONED",
        ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
    )
    assert failure(
        client.update_table,
        TableName="orders",
        AttributeDefinitions=[{"AttributeName": "tenant", "AttributeType": "S"}],
        GlobalSecondaryIndexUpdates=[create_gsi()],
    ) == (
        "ValidationException",
        "Both ReadCapacityUnits and WriteCapacityUnits must be specified for index: by-tenant",
    )
    add_index(client, ProvisionedThroughput={"ReadCapacityUnits": 2, "WriteCapacityUnits": 2})
    manual.indexes.work_now()
    same = {
        "Update": {
            "IndexName": "by-tenant",
            "ProvisionedThroughput": {"ReadCapacityUnits": 2, "WriteCapacityUnits": 2},
        }
    }
    assert failure(client.update_table, TableName="orders", GlobalSecondaryIndexUpdates=[same]) == (
        "ValidationException",
        "The provisioned throughput for the index by-tenant will not change. The requested value "
        "equals the current value. Current ReadCapacityUnits provisioned for index by-tenant: 2. "
        "Requested ReadCapacityUnits: 2. Current WriteCapacityUnits provisioned for index "
        "by-tenant: 2. Requested WriteCapacityUnits: 2. Refer to the Amazon DynamoDB Developer "
        "Guide for current limits and how to request higher limits.",
    )
    lower = {
        "Update": {
            "IndexName": "by-tenant",
            "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 3},
        }
    }
    client.update_table(TableName="orders", GlobalSecondaryIndexUpdates=[lower])
    entry = gsi(client)
    assert entry is not None
    throughput = entry["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (1, 3)
    assert throughput["NumberOfDecreasesToday"] == 1
    # A switch to PAY_PER_REQUEST zeroes the index's throughput; back to PROVISIONED needs
    # throughput for the table and for every index (DDB-TABLE-152).
    client.update_table(TableName="orders", BillingMode="PAY_PER_REQUEST")
    entry = gsi(client)
    assert entry is not None and entry["ProvisionedThroughput"]["ReadCapacityUnits"] == 0
    assert failure(
        client.update_table,
        TableName="orders",
        BillingMode="PROVISIONED",
        ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
    ) == (
        "ValidationException",
        INVALID + "ProvisionedThroughput must be specified for index: by-tenant",
    )
    client.update_table(
        TableName="orders",
        BillingMode="PROVISIONED",
        ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
        GlobalSecondaryIndexUpdates=[same],
    )
    entry = gsi(client)
    assert entry is not None and entry["ProvisionedThroughput"]["ReadCapacityUnits"] == 2


def test_an_interrupted_backfill_resumes_on_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "resume.db"
    with Engine(path, index_config=IndexConfig(background=False, batch_size=4)) as engine:
        client = DirectClient(engine)
        table(client)
        for n in range(30):
            put(client, f"o{n:02}", tenant="acme")
        add_index(client)
        # Two chunks done, then the engine goes away mid-backfill.
        storage = engine.storage
        ((index_id, table_id, _),) = storage.read(lambda r: r.index_backfills())
        chunk = engine.indexes._backfill_chunk
        assert storage.write(lambda w: chunk(w, index_id, table_id))
        assert storage.write(lambda w: chunk(w, index_id, table_id))
        assert len(storage.read(lambda r: r.index_dump(index_id))) == 8
    with Engine(path) as engine:  # background work on: start() resumes the stored cursor
        client = DirectClient(engine)
        deadline = time.monotonic() + 30
        while (entry := gsi(client)) is not None and entry["IndexStatus"] != "ACTIVE":
            assert time.monotonic() < deadline, entry
            time.sleep(0.02)
        assert by_tenant(client, "acme") == [f"o{n:02}" for n in range(30)]


def test_over_http_the_server_backfills_in_the_background(ddb: Any, table_name: str) -> None:
    table(ddb, table_name)
    for n in range(25):
        put(ddb, f"o{n}", table_name, tenant="acme")
    add_index(ddb, table_name)
    deadline = time.monotonic() + 30
    while (entry := gsi(ddb, name=table_name)) is not None and entry["IndexStatus"] != "ACTIVE":
        assert time.monotonic() < deadline, entry
        time.sleep(0.02)
    assert len(by_tenant(ddb, "acme", table_name)) == 25
    ddb.update_table(
        TableName=table_name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "by-tenant"}}]
    )
    while gsi(ddb, name=table_name) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    ddb.delete_table(TableName=table_name)


# --- eventual consistency: stale-read faults and replica lag -------------------------------------


def test_stale_read_faults_apply_to_global_indexes(tmp_path: Path) -> None:
    clock = Clock()
    clock.freeze(1000.0)
    with Engine(tmp_path / "stale.db", clock=clock) as engine:
        client = DirectClient(engine)
        table(
            client,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "tenant", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[create_gsi()["Create"]],
        )
        put(client, "a", tenant="acme")
        put(client, "b", tenant="acme")
        engine.faults.stale_reads(5.0, table="orders")
        clock.advance(1)
        put(client, "c", tenant="acme")  # new
        put(client, "a", tenant="bolt")  # moved away
        client.delete_item(TableName="orders", Key={"pk": {"S": "b"}})  # gone
        # The index, eventually consistent, still shows the world of 5 seconds ago.
        assert by_tenant(client, "acme") == ["a", "b"]
        assert by_tenant(client, "bolt") == []
        scanned = client.scan(TableName="orders", IndexName="by-tenant")["Items"]
        assert sorted(i["pk"]["S"] for i in scanned) == ["a", "b"]
        clock.advance(10)
        assert by_tenant(client, "acme") == ["c"]
        assert by_tenant(client, "bolt") == ["a"]


def test_replica_lag_applies_to_indexes_and_a_new_replica_gets_its_own(tmp_path: Path) -> None:
    clock = Clock()
    clock.freeze(1000.0)
    with Engine(tmp_path / "global.db", clock=clock) as engine:
        east = DirectClient(engine, region="us-east-1")
        west = DirectClient(engine, region="eu-west-1")
        table(
            east,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "tenant", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[create_gsi()["Create"]],
        )
        put(east, "a", tenant="acme")
        engine.replication.lag(5.0)
        east.update_table(
            TableName="orders", ReplicaUpdates=[{"Create": {"RegionName": "eu-west-1"}}]
        )
        replica = gsi(west)
        assert replica is not None and replica["IndexStatus"] == "ACTIVE"
        assert replica["IndexArn"] == (
            "arn:aws:dynamodb:eu-west-1:000000000000:table/orders/index/by-tenant"
        )
        assert by_tenant(west, "acme") == ["a"]  # the seed's entries were copied
        put(east, "b", tenant="acme")
        assert by_tenant(west, "acme") == ["a"]  # not replicated yet
        clock.advance(6)
        assert by_tenant(west, "acme") == ["a", "b"]
        put(west, "c", tenant="acme")
        clock.advance(6)
        assert by_tenant(east, "acme") == ["a", "b", "c"]
