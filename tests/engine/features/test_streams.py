"""DynamoDB Streams: enabling, the Streams API and the records, through boto3 on both transports.

Clock-dependent behaviour (retention, iterator expiry, TTL records) is tested in process: the
HTTP server's clock is not reachable from here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.engine.operations.streams import ITERATOR_LIFETIME_S, RETENTION_S

NOW = 1_750_000_000.0
VIEW_TYPES = ("KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")


@pytest.fixture
def streams(request: pytest.FixtureRequest, make_ddb: Any, ddb: Any) -> Any:
    """A boto3 ``dynamodbstreams`` client on the same transport (and engine) as ``ddb``."""
    return make_ddb(request.node.callspec.params["ddb"], service_name="dynamodbstreams")


@pytest.fixture
def frozen(tmp_path: Path) -> Iterator[Engine]:
    with Engine(tmp_path / "streams.db", ttl_config=TTLConfig(sweep_interval=None)) as engine:
        engine.clock.freeze(NOW)
        yield engine


def create(ddb: Any, name: str, view: str | None = "NEW_AND_OLD_IMAGES", **extra: Any) -> Any:
    spec = (
        {"StreamEnabled": False}
        if view is None
        else {"StreamEnabled": True, "StreamViewType": view}
    )
    return ddb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "p", "KeyType": "HASH"},
            {"AttributeName": "s", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "p", "AttributeType": "S"},
            {"AttributeName": "s", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification=spec,
        **extra,
    )["TableDescription"]


def shard_of(streams: Any, arn: str) -> dict[str, Any]:
    shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    assert len(shards) == 1
    return dict(shards[0])


def iterator(streams: Any, arn: str, kind: str = "TRIM_HORIZON", **extra: Any) -> str:
    shard = shard_of(streams, arn)
    return str(
        streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType=kind, **extra
        )["ShardIterator"]
    )


def read_all(
    streams: Any, arn: str, kind: str = "TRIM_HORIZON", **extra: Any
) -> list[dict[str, Any]]:
    """Every record from the iterator on, following NextShardIterator until a page is empty."""
    records: list[dict[str, Any]] = []
    it: str | None = iterator(streams, arn, kind, **extra)
    while it is not None:
        page = streams.get_records(ShardIterator=it)
        records.extend(page["Records"])
        it = page.get("NextShardIterator")
        if not page["Records"]:
            break
    return records


def key(p: str, s: int = 1) -> dict[str, Any]:
    return {"p": {"S": p}, "s": {"N": str(s)}}


def error_code(call: Any) -> str:
    with pytest.raises(ClientError) as excinfo:
        call()
    return str(excinfo.value.response["Error"]["Code"])


# --- enabling and describing ---------------------------------------------------------------------


def test_create_table_with_stream_is_described_and_listed(
    ddb: Any, streams: Any, table_name: str
) -> None:
    description = create(ddb, table_name, "NEW_IMAGE")
    arn = description["LatestStreamArn"]
    assert description["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_IMAGE",
    }
    assert arn == f"{description['TableArn']}/stream/{description['LatestStreamLabel']}"
    table = ddb.describe_table(TableName=table_name)["Table"]
    assert table["LatestStreamArn"] == arn
    assert table["LatestStreamLabel"] == description["LatestStreamLabel"]
    listed = streams.list_streams(TableName=table_name)["Streams"]
    assert listed == [
        {"StreamArn": arn, "TableName": table_name, "StreamLabel": description["LatestStreamLabel"]}
    ]
    stream = streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert stream["StreamStatus"] == "ENABLED"
    assert stream["StreamViewType"] == "NEW_IMAGE"
    assert stream["TableName"] == table_name
    assert stream["KeySchema"] == description["KeySchema"]
    (shard,) = stream["Shards"]
    assert shard["SequenceNumberRange"]["StartingSequenceNumber"].isdecimal()
    assert "EndingSequenceNumber" not in shard["SequenceNumberRange"]
    # AT_SEQUENCE_NUMBER of an empty shard's start is valid (DynamoDB accepts it).
    start = shard["SequenceNumberRange"]["StartingSequenceNumber"]
    assert read_all(streams, arn, "AT_SEQUENCE_NUMBER", SequenceNumber=start) == []


def test_enable_on_enabled_and_disable_on_disabled_are_refused(ddb: Any, table_name: str) -> None:
    create(ddb, table_name, None)
    assert "StreamSpecification" not in ddb.describe_table(TableName=table_name)["Table"]
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=table_name, StreamSpecification={"StreamEnabled": False})
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"
    assert "no stream to disable" in excinfo.value.response["Error"]["Message"]
    ddb.update_table(
        TableName=table_name,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
    )
    for view in ("KEYS_ONLY", "OLD_IMAGE"):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(
                TableName=table_name,
                StreamSpecification={"StreamEnabled": True, "StreamViewType": view},
            )
        assert excinfo.value.response["Error"]["Code"] == "ValidationException"
        assert excinfo.value.response["Error"]["Message"] == (
            f"Table already has an enabled stream: TableName: {table_name}"
        )
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(
            TableName=table_name,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "Fisk"},
        )
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"


def test_stream_enabled_without_view_type_creates_no_table(ddb: Any, table_name: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(
            TableName=table_name,
            KeySchema=[{"AttributeName": "p", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "p", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True},
        )
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"
    assert (
        error_code(lambda: ddb.describe_table(TableName=table_name)) == "ResourceNotFoundException"
    )


# --- records -------------------------------------------------------------------------------------


@pytest.mark.parametrize("view", VIEW_TYPES)
def test_insert_modify_remove_with_images_per_view_type(
    ddb: Any, streams: Any, table_name: str, view: str
) -> None:
    arn = create(ddb, table_name, view)["LatestStreamArn"]
    first = {**key("a"), "v": {"S": "one"}, "b": {"B": b"\x00\xff"}}
    ddb.put_item(TableName=table_name, Item=first)
    ddb.update_item(
        TableName=table_name,
        Key=key("a"),
        UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"S": "two"}},
    )
    second = {**first, "v": {"S": "two"}}
    ddb.delete_item(TableName=table_name, Key=key("a"))
    records = read_all(streams, arn)
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    wants_new = view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES")
    wants_old = view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES")
    expected = [
        (first if wants_new else None, None),
        (second if wants_new else None, first if wants_old else None),
        (None, second if wants_old else None),
    ]
    for record, (new, old) in zip(records, expected, strict=True):
        data = record["dynamodb"]
        assert record["eventSource"] == "aws:dynamodb"
        assert record["awsRegion"] == "us-east-1"
        assert "userIdentity" not in record
        assert data["Keys"] == key("a")
        assert data["StreamViewType"] == view
        assert data.get("NewImage") == new
        assert data.get("OldImage") == old
        assert data["SizeBytes"] > 0
    sequence = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequence == sorted(set(sequence))
    assert len({r["eventID"] for r in records}) == 3


def test_writes_that_change_nothing_make_no_record(ddb: Any, streams: Any, table_name: str) -> None:
    arn = create(ddb, table_name)["LatestStreamArn"]
    item = {**key("a"), "tags": {"SS": ["x", "y"]}, "n": {"N": "1.50"}}
    ddb.put_item(TableName=table_name, Item=item)
    ddb.put_item(TableName=table_name, Item=item)  # identical
    ddb.put_item(TableName=table_name, Item={**item, "tags": {"SS": ["y", "x"]}, "n": {"N": "1.5"}})
    ddb.update_item(TableName=table_name, Key=key("a"), UpdateExpression="REMOVE not_there")
    ddb.delete_item(TableName=table_name, Key=key("nobody"))
    with pytest.raises(ClientError):
        ddb.put_item(
            TableName=table_name,
            Item={**item, "v": {"S": "x"}},
            ConditionExpression="attribute_not_exists(p)",
        )
    assert [r["eventName"] for r in read_all(streams, arn)] == ["INSERT"]


def test_batch_and_transaction_writes_are_recorded(ddb: Any, streams: Any, table_name: str) -> None:
    arn = create(ddb, table_name, "KEYS_ONLY")["LatestStreamArn"]
    ddb.batch_write_item(
        RequestItems={table_name: [{"PutRequest": {"Item": key("b", i)}} for i in range(3)]}
    )
    ddb.transact_write_items(
        TransactItems=[
            {"Delete": {"TableName": table_name, "Key": key("b", 0)}},
            {"Put": {"TableName": table_name, "Item": key("t", 9)}},
        ]
    )
    records = read_all(streams, arn)
    assert sorted(
        (r["eventName"], r["dynamodb"]["Keys"]["p"]["S"], r["dynamodb"]["Keys"]["s"]["N"])
        for r in records
    ) == [
        ("INSERT", "b", "0"),
        ("INSERT", "b", "1"),
        ("INSERT", "b", "2"),
        ("INSERT", "t", "9"),
        ("REMOVE", "b", "0"),
    ]


def test_iterator_types_limit_and_paging(ddb: Any, streams: Any, table_name: str) -> None:
    arn = create(ddb, table_name, "KEYS_ONLY")["LatestStreamArn"]
    for i in range(5):
        ddb.put_item(TableName=table_name, Item=key("a", i))
    latest = iterator(streams, arn, "LATEST")
    everything = read_all(streams, arn)
    seqs = [r["dynamodb"]["SequenceNumber"] for r in everything]
    assert len(seqs) == 5
    at = read_all(streams, arn, "AT_SEQUENCE_NUMBER", SequenceNumber=seqs[2])
    assert [r["dynamodb"]["SequenceNumber"] for r in at] == seqs[2:]
    after = read_all(streams, arn, "AFTER_SEQUENCE_NUMBER", SequenceNumber=seqs[2])
    assert [r["dynamodb"]["SequenceNumber"] for r in after] == seqs[3:]
    # LATEST sees only what comes after it was issued; an open shard always gives a next iterator.
    page = streams.get_records(ShardIterator=latest)
    assert page["Records"] == []
    ddb.put_item(TableName=table_name, Item=key("a", 99))
    page = streams.get_records(ShardIterator=page["NextShardIterator"])
    assert [r["dynamodb"]["Keys"]["s"]["N"] for r in page["Records"]] == ["99"]
    # Limit pages through the shard without loss or repeats.
    got: list[str] = []
    it = iterator(streams, arn)
    while True:
        page = streams.get_records(ShardIterator=it, Limit=2)
        assert len(page["Records"]) <= 2
        if not page["Records"]:
            break
        got.extend(r["dynamodb"]["SequenceNumber"] for r in page["Records"])
        it = page["NextShardIterator"]
    assert got == [r["dynamodb"]["SequenceNumber"] for r in read_all(streams, arn)]
    assert len(got) == 6


def test_streams_api_errors(ddb: Any, streams: Any, table_name: str) -> None:
    arn = create(ddb, table_name, "KEYS_ONLY")["LatestStreamArn"]
    shard = shard_of(streams, arn)
    shard_id = shard["ShardId"]
    start = shard["SequenceNumberRange"]["StartingSequenceNumber"]

    def get(**kw: Any) -> Any:
        return streams.get_shard_iterator(**{"StreamArn": arn, "ShardId": shard_id, **kw})

    for kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
        assert error_code(lambda: get(ShardIteratorType=kind)) == "ValidationException"  # noqa: B023
    for kind in ("TRIM_HORIZON", "LATEST"):
        call = lambda: get(ShardIteratorType=kind, SequenceNumber=start)  # noqa: B023, E731
        assert error_code(call) == "ValidationException"
    assert error_code(lambda: get(ShardIteratorType="bulle")) == "ValidationException"
    assert (
        error_code(lambda: get(ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber="x" * 30))
        == "ValidationException"
    )
    assert (
        error_code(lambda: get(ShardIteratorType="LATEST", ShardId="shardId-" + "0" * 30))
        == "ResourceNotFoundException"
    )
    assert (
        error_code(
            lambda: get(
                ShardIteratorType="LATEST",
                StreamArn="sdfadfsddafgdafsgjnadflkgnalngalsdfnlkasnlkasdfasdfasf",
            )
        )
        == "ValidationException"
    )
    missing = arn.replace(f"table/{table_name}/", f"table/{table_name}x/")
    assert (
        error_code(lambda: streams.describe_stream(StreamArn=missing))
        == "ResourceNotFoundException"
    )
    assert (
        error_code(
            lambda: streams.get_records(
                ShardIterator="sdfsdfsgagaddafgagasgasgasdfasdfasdfasdfasdgasdasdgasdg"
            )
        )
        == "ValidationException"
    )
    assert (
        error_code(
            lambda: streams.list_streams(
                ExclusiveStartStreamArn="kossaapaaasdafsdaasdasdasdasasdasfadfadfasdasdas"
            )
        )
        == "ValidationException"
    )
    assert error_code(lambda: streams.list_streams(Limit=101)) == "ValidationException"
    assert (
        error_code(lambda: streams.get_records(ShardIterator=iterator(streams, arn), Limit=1001))
        == "ValidationException"
    )


def test_list_streams_pages(ddb: Any, streams: Any, table_name: str) -> None:
    arns = {create(ddb, f"{table_name}-{i}", "KEYS_ONLY")["LatestStreamArn"] for i in range(3)}
    seen: list[str] = []
    kwargs: dict[str, Any] = {}
    while True:
        page = streams.list_streams(Limit=1, **kwargs)
        assert len(page["Streams"]) <= 1
        seen.extend(s["StreamArn"] for s in page["Streams"])
        if "LastEvaluatedStreamArn" not in page:
            break
        kwargs = {"ExclusiveStartStreamArn": page["LastEvaluatedStreamArn"]}
    assert arns <= set(seen)
    assert len(seen) == len(set(seen))


def test_disable_closes_the_shard_and_reenable_makes_a_new_stream(
    ddb: Any, streams: Any, table_name: str
) -> None:
    old_arn = create(ddb, table_name, "KEYS_ONLY")["LatestStreamArn"]
    ddb.put_item(TableName=table_name, Item=key("a"))
    description = ddb.update_table(
        TableName=table_name, StreamSpecification={"StreamEnabled": False}
    )["TableDescription"]
    assert "StreamSpecification" not in description
    assert description["LatestStreamArn"] == old_arn
    ddb.put_item(TableName=table_name, Item=key("b"))  # not recorded anywhere: no stream
    old = streams.describe_stream(StreamArn=old_arn)["StreamDescription"]
    assert old["StreamStatus"] == "DISABLED"
    records = read_all(streams, old_arn)
    assert [r["dynamodb"]["Keys"]["p"]["S"] for r in records] == ["a"]
    assert (
        old["Shards"][0]["SequenceNumberRange"]["EndingSequenceNumber"]
        == records[-1]["dynamodb"]["SequenceNumber"]
    )
    # A drained closed shard ends: no NextShardIterator.
    page = streams.get_records(ShardIterator=iterator(streams, old_arn))
    assert len(page["Records"]) == 1
    assert "NextShardIterator" not in page
    ddb.update_table(
        TableName=table_name,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    new_arn = ddb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    assert new_arn != old_arn
    ddb.put_item(TableName=table_name, Item=key("c"))
    assert [r["dynamodb"]["Keys"]["p"]["S"] for r in read_all(streams, new_arn)] == ["c"]
    assert [r["dynamodb"]["Keys"]["p"]["S"] for r in read_all(streams, old_arn)] == ["a"]
    assert {s["StreamArn"] for s in streams.list_streams(TableName=table_name)["Streams"]} == {
        old_arn,
        new_arn,
    }


def test_stream_outlives_its_deleted_table(ddb: Any, streams: Any, table_name: str) -> None:
    arn = create(ddb, table_name, "NEW_IMAGE")["LatestStreamArn"]
    ddb.put_item(TableName=table_name, Item=key("a"))
    ddb.delete_table(TableName=table_name)
    assert streams.describe_stream(StreamArn=arn)["StreamDescription"]["StreamStatus"] == "DISABLED"
    assert [r["eventName"] for r in read_all(streams, arn)] == ["INSERT"]


# --- time: retention, iterator age, TTL (in process, engine clock) -------------------------------


def test_records_carry_the_engine_clock(frozen: Engine) -> None:
    ddb, streams = local_client(frozen), local_client(frozen, service_name="dynamodbstreams")
    arn = create(ddb, "clocked")["LatestStreamArn"]
    frozen.clock.advance(0.75)
    ddb.put_item(TableName="clocked", Item=key("a"))
    (record,) = read_all(streams, arn)
    assert record["dynamodb"]["ApproximateCreationDateTime"].timestamp() == NOW  # whole seconds


def test_iterators_expire_after_15_minutes(frozen: Engine) -> None:
    ddb, streams = local_client(frozen), local_client(frozen, service_name="dynamodbstreams")
    arn = create(ddb, "aging")["LatestStreamArn"]
    it = iterator(streams, arn)
    frozen.clock.advance(ITERATOR_LIFETIME_S)
    page = streams.get_records(ShardIterator=it)  # exactly 15 minutes: still valid
    frozen.clock.advance(1)
    with pytest.raises(ClientError) as excinfo:
        streams.get_records(ShardIterator=it)
    assert excinfo.value.response["Error"]["Code"] == "ExpiredIteratorException"
    streams.get_records(ShardIterator=page["NextShardIterator"])  # the next one is fresh


@pytest.mark.parametrize("purged", [False, True], ids=["before-purge", "after-purge"])
def test_records_are_trimmed_after_24_hours(frozen: Engine, purged: bool) -> None:
    ddb, streams = local_client(frozen), local_client(frozen, service_name="dynamodbstreams")
    arn = create(ddb, "retained", "KEYS_ONLY")["LatestStreamArn"]
    ddb.put_item(TableName="retained", Item=key("old"))
    (old,) = read_all(streams, arn)
    frozen.clock.advance(RETENTION_S - 10)
    ddb.put_item(TableName="retained", Item=key("young"))
    stale = iterator(streams, arn)  # positioned before "old"
    frozen.clock.advance(20)  # "old" is now past retention; "young" is not
    if purged:
        frozen.ttl.sweep_now()  # the sweeper also enforces stream retention
    assert [r["dynamodb"]["Keys"]["p"]["S"] for r in read_all(streams, arn)] == ["young"]
    with pytest.raises(ClientError) as excinfo:
        streams.get_records(ShardIterator=stale)
    assert excinfo.value.response["Error"]["Code"] == "TrimmedDataAccessException"
    seq = old["dynamodb"]["SequenceNumber"]
    with pytest.raises(ClientError) as excinfo:
        iterator(streams, arn, "AT_SEQUENCE_NUMBER", SequenceNumber=seq)
    assert excinfo.value.response["Error"]["Code"] == "TrimmedDataAccessException"


def test_disabled_stream_disappears_24_hours_after_closing(frozen: Engine) -> None:
    ddb, streams = local_client(frozen), local_client(frozen, service_name="dynamodbstreams")
    arn = create(ddb, "closing", "KEYS_ONLY")["LatestStreamArn"]
    ddb.update_table(TableName="closing", StreamSpecification={"StreamEnabled": False})
    frozen.clock.advance(RETENTION_S - 1)
    assert streams.describe_stream(StreamArn=arn)["StreamDescription"]["StreamStatus"] == "DISABLED"
    frozen.clock.advance(2)
    assert streams.list_streams(TableName="closing")["Streams"] == []
    assert error_code(lambda: streams.describe_stream(StreamArn=arn)) == "ResourceNotFoundException"
    frozen.ttl.sweep_now()
    assert error_code(lambda: streams.describe_stream(StreamArn=arn)) == "ResourceNotFoundException"


def test_reenabling_within_one_millisecond_still_makes_a_new_arn(frozen: Engine) -> None:
    ddb = local_client(frozen)
    first = create(ddb, "rapid", "KEYS_ONLY")["LatestStreamArn"]
    ddb.update_table(TableName="rapid", StreamSpecification={"StreamEnabled": False})
    ddb.update_table(
        TableName="rapid",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
    )
    assert ddb.describe_table(TableName="rapid")["Table"]["LatestStreamArn"] != first


def test_ttl_deletes_are_remove_records_with_the_service_identity(frozen: Engine) -> None:
    ddb, streams = local_client(frozen), local_client(frozen, service_name="dynamodbstreams")
    arn = create(ddb, "expiring", "NEW_AND_OLD_IMAGES")["LatestStreamArn"]
    ddb.update_time_to_live(
        TableName="expiring", TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
    )
    item = {**key("a"), "exp": {"N": str(int(NOW) - 1)}}
    ddb.put_item(TableName="expiring", Item=item)
    ddb.delete_item(TableName="expiring", Key=key("a"))
    ddb.put_item(TableName="expiring", Item=item)
    assert len(frozen.ttl.sweep_now()) == 1
    _insert, user_remove, _insert_again, ttl_remove = read_all(streams, arn)
    assert "userIdentity" not in user_remove
    assert user_remove["eventName"] == ttl_remove["eventName"] == "REMOVE"
    assert ttl_remove["userIdentity"] == {
        "Type": "Service",
        "PrincipalId": "dynamodb.amazonaws.com",
    }
    assert ttl_remove["dynamodb"]["OldImage"] == item
    assert "NewImage" not in ttl_remove["dynamodb"]


# --- concurrency ---------------------------------------------------------------------------------


def test_concurrent_writers_on_two_engines_get_unique_ordered_sequence_numbers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    config = TTLConfig(sweep_interval=None)
    with Engine(path, ttl_config=config) as first, Engine(path, ttl_config=config) as second:
        create(local_client(first), "shared", "NEW_IMAGE")
        clients = [local_client(first), local_client(second)]
        writers, per_writer = 4, 25

        def write(index: int) -> None:
            ddb = clients[index % 2]
            for n in range(per_writer):
                ddb.put_item(TableName="shared", Item={**key(f"w{index}"), "n": {"N": str(n)}})

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        streams = local_client(second, service_name="dynamodbstreams")
        arn = local_client(second).describe_table(TableName="shared")["Table"]["LatestStreamArn"]
        records = read_all(streams, arn)
        assert len(records) == writers * per_writer
        seqs = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
        assert seqs == sorted(set(seqs))
        for index in range(writers):
            # Per item, records appear in modification order.
            mine = [
                int(r["dynamodb"]["NewImage"]["n"]["N"])
                for r in records
                if r["dynamodb"]["Keys"]["p"]["S"] == f"w{index}"
            ]
            assert mine == list(range(per_writer))
