"""Regions and global tables: replicas, asynchronous last-writer-wins replication, lag.

Replication is driven by the engine clock, so these tests freeze it and advance it instead of
sleeping: an advanced clock makes the queued writes due, and the next call in the target
region applies them.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency.router import HomeRegionRouter

US, EU, AP = "us-east-1", "eu-west-1", "ap-southeast-2"
KEY = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRS = [{"AttributeName": "pk", "AttributeType": "S"}]


class Control:
    """The engine's clock and replication settings, in process or over the admin HTTP API."""

    def __init__(self, engine: Engine | None = None, url: str | None = None) -> None:
        self.engine = engine
        self.url = url

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(f"{self.url}/_firstwrite/{path}", json=body, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def freeze(self) -> None:
        if self.engine is not None:
            self.engine.clock.freeze()
        else:
            assert self._post("clock", {"freeze": True})["frozen"] is True

    def advance(self, seconds: float) -> None:
        if self.engine is not None:
            self.engine.clock.advance(seconds)
        else:
            self._post("clock", {"advance": seconds})

    def lag(self, seconds: float) -> None:
        if self.engine is not None:
            self.engine.replication.lag(seconds)
        else:
            self._post("replication", {"lag": seconds})

    def restore(self) -> None:
        if self.engine is not None:
            self.engine.clock.reset()
            self.engine.replication.lag(1.0)
        else:
            self._post("clock", {"reset": True})
            self._post("replication", {"lag": 1.0})


@pytest.fixture(params=["inprocess", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def control(transport: str, request: pytest.FixtureRequest) -> Iterator[Control]:
    if transport == "inprocess":
        ctl = Control(engine=request.getfixturevalue("engine"))
    else:
        ctl = Control(url=request.getfixturevalue("http_server").url)
    yield ctl
    ctl.restore()


@pytest.fixture
def clients(transport: str, make_ddb: Callable[..., Any]) -> dict[str, Any]:
    return {region: make_ddb(transport, region_name=region) for region in (US, EU, AP)}


def create(client: Any, name: str, **extra: Any) -> None:
    client.create_table(
        TableName=name,
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )


def add_replica(client: Any, name: str, region: str) -> dict[str, Any]:
    response = client.update_table(
        TableName=name, ReplicaUpdates=[{"Create": {"RegionName": region}}]
    )
    return response["TableDescription"]  # type: ignore[no-any-return]


def get(client: Any, name: str, pk: str, *, consistent: bool = True) -> dict[str, Any] | None:
    response = client.get_item(TableName=name, Key={"pk": {"S": pk}}, ConsistentRead=consistent)
    return response.get("Item")  # type: ignore[no-any-return]


def put(client: Any, name: str, pk: str, value: str) -> None:
    client.put_item(TableName=name, Item={"pk": {"S": pk}, "v": {"S": value}})


# --- replicas --------------------------------------------------------------------------------


def test_create_replica_describes_the_group_and_seeds_items(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    put(us, table_name, "before", "seeded")
    description = add_replica(us, table_name, EU)
    assert description["Replicas"] == [{"RegionName": EU, "ReplicaStatus": "ACTIVE"}]
    assert description["GlobalTableVersion"] == "2019.11.21"

    replica = eu.describe_table(TableName=table_name)["Table"]
    assert replica["Replicas"] == [{"RegionName": US, "ReplicaStatus": "ACTIVE"}]
    assert replica["KeySchema"] == KEY
    assert replica["AttributeDefinitions"] == ATTRS
    assert replica["TableArn"].startswith(f"arn:aws:dynamodb:{EU}:")
    assert replica["TableStatus"] == "ACTIVE"
    assert table_name in eu.list_tables()["TableNames"]
    # The replica starts with the table's items.
    assert get(eu, table_name, "before") == {"pk": {"S": "before"}, "v": {"S": "seeded"}}

    # A third replica: every member lists the two others.
    add_replica(eu, table_name, AP)
    for region, others in ((US, [AP, EU]), (EU, [AP, US]), (AP, [EU, US])):
        listed = clients[region].describe_table(TableName=table_name)["Table"]["Replicas"]
        assert sorted(r["RegionName"] for r in listed) == others


def test_delete_replica(clients: dict[str, Any], control: Control, table_name: str) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    add_replica(us, table_name, EU)
    response = us.update_table(
        TableName=table_name, ReplicaUpdates=[{"Delete": {"RegionName": EU}}]
    )
    assert "Replicas" not in response["TableDescription"]
    with pytest.raises(ClientError) as caught:
        eu.describe_table(TableName=table_name)
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "Replicas" not in us.describe_table(TableName=table_name)["Table"]
    put(us, table_name, "after", "x")  # no longer replicated anywhere: nothing queued
    assert table_name not in eu.list_tables()["TableNames"]


def test_replica_update_errors(clients: dict[str, Any], control: Control, table_name: str) -> None:
    us, eu, ap = clients[US], clients[EU], clients[AP]
    create(us, table_name)
    add_replica(us, table_name, EU)
    with pytest.raises(ClientError) as caught:
        add_replica(us, table_name, EU)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "already existed as tables" in caught.value.response["Error"]["Message"]
    # A table of that name already in the target region is not silently adopted.
    create(ap, table_name)
    with pytest.raises(ClientError) as caught:
        add_replica(us, table_name, AP)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError) as caught:
        eu.update_table(
            TableName=table_name, ReplicaUpdates=[{"Delete": {"RegionName": "sa-east-1"}}]
        )
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "not found" in caught.value.response["Error"]["Message"]
    # Nothing half-done: the failed calls left the group as it was.
    listed = us.describe_table(TableName=table_name)["Table"]["Replicas"]
    assert listed == [{"RegionName": EU, "ReplicaStatus": "ACTIVE"}]


def test_deleting_a_replica_table_leaves_the_group(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    add_replica(us, table_name, EU)
    eu.delete_table(TableName=table_name)
    assert "Replicas" not in us.describe_table(TableName=table_name)["Table"]


def test_local_region_is_not_a_replica_update(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    """DynamoDB's own words for a Create or Delete of the region the call is sent to."""
    us = clients[US]
    create(us, table_name)
    for action in ("Create", "Delete"):
        with pytest.raises(ClientError) as caught:
            us.update_table(TableName=table_name, ReplicaUpdates=[{action: {"RegionName": US}}])
        assert caught.value.response["Error"] == {
            "Code": "ValidationException",
            "Message": "Cannot add or delete the local region through ReplicaUpdates. Use "
            "CreateTable, DeleteTable, or UpdateTable as required.",
        }
    assert "Replicas" not in us.describe_table(TableName=table_name)["Table"]


# --- streams of a global table ----------------------------------------------------------------

STREAM_OFF_REFUSED = (
    "One or more parameter values were invalid: Disabling Stream is not allowed for a Global "
    "Table replica."
)


def _stream_records(streams: Any, arn: str) -> list[dict[str, Any]]:
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    return streams.get_records(ShardIterator=iterator)["Records"]  # type: ignore[no-any-return]


def test_adding_a_replica_gives_every_region_a_stream(
    clients: dict[str, Any],
    control: Control,
    table_name: str,
    transport: str,
    make_ddb: Callable[..., Any],
) -> None:
    """As on DynamoDB (multi-Region eventual consistency): the table had no stream; adding a
    replica switches a NEW_AND_OLD_IMAGES one on, and the replica has its own, which records
    the writes replicated into it (what a per-region stream reader, such as the cross-region
    reconciler, needs)."""
    us, eu = clients[US], clients[EU]
    control.freeze()
    control.lag(1)
    create(us, table_name)
    put(us, table_name, "before", "seeded")
    assert "LatestStreamArn" not in us.describe_table(TableName=table_name)["Table"]
    add_replica(us, table_name, EU)
    arns = {}
    for region in (US, EU):
        table = clients[region].describe_table(TableName=table_name)["Table"]
        assert table["StreamSpecification"] == {
            "StreamEnabled": True,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
        assert table["LatestStreamArn"].startswith(f"{table['TableArn']}/stream/")
        arns[region] = table["LatestStreamArn"]
    assert f":{US}:" in arns[US] and f":{EU}:" in arns[EU]

    put(us, table_name, "pay-1", "from-us")
    control.advance(2)
    assert get(eu, table_name, "pay-1") == {"pk": {"S": "pay-1"}, "v": {"S": "from-us"}}
    for region in (US, EU):
        streams = make_ddb(transport, service_name="dynamodbstreams", region_name=region)
        records = _stream_records(streams, arns[region])
        # The seed copy is not in the replica's stream; the later write is in both.
        assert [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in records] == [
            ("INSERT", "pay-1")
        ]
        assert records[0]["awsRegion"] == region
        assert records[0]["dynamodb"]["NewImage"]["v"] == {"S": "from-us"}


def test_a_global_tables_stream_stays_on_until_its_last_replica_goes(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    add_replica(us, table_name, EU)
    for client in (us, eu):
        with pytest.raises(ClientError) as caught:
            client.update_table(TableName=table_name, StreamSpecification={"StreamEnabled": False})
        assert caught.value.response["Error"] == {
            "Code": "ValidationException",
            "Message": STREAM_OFF_REFUSED,
        }
        with pytest.raises(ClientError) as caught:  # nor changed: it would need disabling
            client.update_table(
                TableName=table_name,
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
            )
        assert "already has an enabled stream" in caught.value.response["Error"]["Message"]
    us.update_table(TableName=table_name, ReplicaUpdates=[{"Delete": {"RegionName": EU}}])
    table = us.describe_table(TableName=table_name)["Table"]
    assert "Replicas" not in table and table["StreamSpecification"]["StreamEnabled"] is True
    us.update_table(TableName=table_name, StreamSpecification={"StreamEnabled": False})
    assert "StreamSpecification" not in us.describe_table(TableName=table_name)["Table"]


def test_a_stream_already_on_keeps_its_view_type_and_a_removed_replicas_stream_closes(
    clients: dict[str, Any],
    control: Control,
    table_name: str,
    transport: str,
    make_ddb: Callable[..., Any],
) -> None:
    us, eu = clients[US], clients[EU]
    keys_only = {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    create(us, table_name, StreamSpecification=keys_only)
    before = us.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    add_replica(us, table_name, EU)
    assert us.describe_table(TableName=table_name)["Table"]["LatestStreamArn"] == before
    replica = eu.describe_table(TableName=table_name)["Table"]
    assert replica["StreamSpecification"] == keys_only
    us.update_table(TableName=table_name, ReplicaUpdates=[{"Delete": {"RegionName": EU}}])
    streams = make_ddb(transport, service_name="dynamodbstreams", region_name=EU)
    gone = streams.describe_stream(StreamArn=replica["LatestStreamArn"])["StreamDescription"]
    assert gone["StreamStatus"] == "DISABLED"  # readable for its retention, as a dropped table's


# --- replication -----------------------------------------------------------------------------


def test_replication_waits_for_the_lag(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    add_replica(us, table_name, EU)
    control.freeze()
    control.lag(5)
    put(us, table_name, "k", "one")
    assert get(eu, table_name, "k") is None  # not yet, even strongly consistent
    control.advance(4.5)
    assert get(eu, table_name, "k") is None
    control.advance(1)
    # Due now: applied when the call touches the target region, no sleeping.
    assert get(eu, table_name, "k") == {"pk": {"S": "k"}, "v": {"S": "one"}}

    us.delete_item(TableName=table_name, Key={"pk": {"S": "k"}})
    assert get(eu, table_name, "k") is not None
    control.advance(5)
    assert get(eu, table_name, "k") is None
    # Both ways: a write in the replica reaches the first table.
    put(eu, table_name, "back", "from eu")
    control.advance(5)
    assert get(us, table_name, "back") == {"pk": {"S": "back"}, "v": {"S": "from eu"}}


def test_last_writer_wins_by_write_time(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    add_replica(us, table_name, EU)
    control.freeze()
    control.lag(10)
    put(eu, table_name, "k", "earlier, eu")
    control.advance(1)
    put(us, table_name, "k", "later, us")
    control.advance(1)
    put(us, table_name, "k2", "earlier, us")
    control.advance(1)
    put(eu, table_name, "k2", "later, eu")
    control.advance(20)
    for client in (us, eu):
        assert get(client, table_name, "k") == {"pk": {"S": "k"}, "v": {"S": "later, us"}}
        assert get(client, table_name, "k2") == {"pk": {"S": "k2"}, "v": {"S": "later, eu"}}


def test_same_time_conflict_is_won_by_the_greater_region(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    add_replica(us, table_name, EU)
    control.freeze()
    control.lag(10)
    put(eu, table_name, "k", "eu")  # the same frozen instant
    put(us, table_name, "k", "us")
    control.advance(11)
    assert (
        get(us, table_name, "k")
        == get(eu, table_name, "k")
        == {
            "pk": {"S": "k"},
            "v": {"S": "us"},  # "us-east-1" > "eu-west-1"
        }
    )


def test_a_write_supersedes_what_it_overwrote_even_on_a_frozen_clock(engine: Engine) -> None:
    us, eu = local_client(engine, region=US), local_client(engine, region=EU)
    create(us, "frozen-lww")
    add_replica(us, "frozen-lww", EU)
    engine.clock.freeze()
    engine.replication.lag(0)
    put(us, "frozen-lww", "k", "us")
    assert get(eu, "frozen-lww", "k") == {"pk": {"S": "k"}, "v": {"S": "us"}}
    # eu overwrites us's write at the same instant: despite the lower region name it is the
    # later write, and both replicas must converge on it.
    put(eu, "frozen-lww", "k", "eu, after seeing us")
    assert get(us, "frozen-lww", "k") == {"pk": {"S": "k"}, "v": {"S": "eu, after seeing us"}}
    assert get(eu, "frozen-lww", "k") == {"pk": {"S": "k"}, "v": {"S": "eu, after seeing us"}}


def test_replicated_writes_do_not_replicate_again(engine: Engine) -> None:
    us, eu = local_client(engine, region=US), local_client(engine, region=EU)
    create(us, "no-echo")
    add_replica(us, "no-echo", EU)
    add_replica(us, "no-echo", AP)
    engine.replication.lag(math.inf)
    put(us, "no-echo", "k", "v")
    backlog = engine.replication.backlog()
    assert [(b["source"], b["target"], b["pending"]) for b in backlog] == [(US, AP, 1), (US, EU, 1)]
    assert engine.replication.flush() == 2
    assert engine.replication.backlog() == []  # applying queued nothing new
    assert get(eu, "no-echo", "k") is not None


def test_a_new_replica_also_gets_writes_still_on_their_way_to_its_seed(engine: Engine) -> None:
    us, eu, ap = (local_client(engine, region=r) for r in (US, EU, AP))
    create(us, "fork")
    add_replica(us, "fork", EU)
    engine.replication.lag(math.inf)
    put(eu, "fork", "k", "from eu")  # queued for us only
    add_replica(us, "fork", AP)  # seeded from us, which has not seen it yet
    assert get(ap, "fork", "k") is None
    engine.replication.flush()
    assert get(ap, "fork", "k") == {"pk": {"S": "k"}, "v": {"S": "from eu"}}
    assert get(us, "fork", "k") == {"pk": {"S": "k"}, "v": {"S": "from eu"}}


def test_background_applier_converges_without_any_call(engine: Engine) -> None:
    us = local_client(engine, region=US)
    create(us, "background")
    add_replica(us, "background", EU)
    engine.replication.lag(0)
    put(us, "background", "k", "v")
    deadline = time.monotonic() + 10
    while engine.replication.backlog() and time.monotonic() < deadline:
        time.sleep(0.02)  # waiting on a real thread: the backlog is read without touching EU
    assert engine.replication.backlog() == []
    row = engine.storage.read(lambda r: r.table(EU, "background"))
    assert row is not None and engine.storage.read(lambda r: r.table_stats(row.id))[0] == 1


_WRITER = textwrap.dedent(
    """
    import math, os, sys
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client
    engine = Engine(sys.argv[1])
    engine.replication.lag(math.inf)  # this process never applies: the write only queues
    client = local_client(engine, region="us-east-1")
    client.put_item(TableName="xproc", Item={"pk": {"S": "k"}, "v": {"S": "from the child"}})
    os._exit(0)  # die without closing anything
    """
)


def test_replication_work_survives_a_crash_and_crosses_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with Engine(path) as engine:
        us = local_client(engine, region=US)
        create(us, "xproc")
        add_replica(us, "xproc", EU)
    subprocess.run([sys.executable, "-c", _WRITER, str(path)], check=True, timeout=60)
    with Engine(path) as engine:
        # The child's queued work is in the file; this engine's background applier finds it.
        eu = local_client(engine, region=EU)
        engine.replication.lag(0)
        deadline = time.monotonic() + 10
        while get(eu, "xproc", "k") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert get(eu, "xproc", "k") == {"pk": {"S": "k"}, "v": {"S": "from the child"}}
        assert engine.replication.backlog() == []
        assert engine.replication.flush() == 0  # applied exactly once


# --- the stale-replica duplicate, and home-region pinning, with raw boto3 calls --------------


def claim(client: Any, table: str, key: str, owner: str) -> bool:
    """An idempotency claim: a conditional create of the key's record."""
    try:
        client.put_item(
            TableName=table,
            Item={"pk": {"S": key}, "owner": {"S": owner}, "status": {"S": "IN_PROGRESS"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True


def test_stale_replica_lets_a_retry_claim_twice_unless_keys_are_pinned(
    clients: dict[str, Any], control: Control, table_name: str
) -> None:
    us, eu = clients[US], clients[EU]
    create(us, table_name)
    add_replica(us, table_name, EU)
    control.freeze()
    control.lag(60)

    # The first attempt claims in us-east-1; the client's retry lands in eu-west-1 before the
    # claim has replicated, and the conditional create succeeds again: a duplicate. Conditions
    # are linearizable only within the region a write is sent to.
    assert claim(us, table_name, "order-1", "attempt 1") is True
    assert claim(eu, table_name, "order-1", "attempt 2") is True
    control.advance(61)
    # Replication then settles on one record (last writer wins), too late: both ran.
    assert get(us, table_name, "order-1") == get(eu, table_name, "order-1")

    # Pinned: every attempt for a key goes to its home region, so the retry meets the claim.
    router = HomeRegionRouter([US, EU])
    for key in ("order-2", "order-3", "order-4"):
        home = clients[router.region_for(key)]
        assert claim(home, table_name, key, "attempt 1") is True
        assert claim(clients[router.region_for(key)], table_name, key, "attempt 2") is False
    assert {router.region_for(k) for k in ("order-2", "order-3", "order-4")} <= {US, EU}


def test_concurrent_writers_in_two_regions_converge(engine: Engine) -> None:
    us, eu = local_client(engine, region=US), local_client(engine, region=EU)
    create(us, "converge")
    add_replica(us, "converge", EU)
    engine.replication.lag(0)  # the background applier and lazy applies race the writers
    errors: list[BaseException] = []

    def writer(client: Any, name: str) -> None:
        try:
            for i in range(40):
                put(client, "converge", f"k{i % 8}", f"{name}-{i}")
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(client, f"{region}-{n}"))
        for n in range(2)
        for client, region in ((us, US), (eu, EU))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    engine.replication.flush()
    assert engine.replication.backlog() == []

    def contents(client: Any) -> dict[str, str]:
        items = client.scan(TableName="converge", ConsistentRead=True)["Items"]
        return {i["pk"]["S"]: i["v"]["S"] for i in items}

    assert contents(us) == contents(eu)
    assert len(contents(us)) == 8
