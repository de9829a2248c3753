"""Reading a stream for the long-running consumers (firstwrite.idempotency.stream_reading).

On the engine's streams: a closed shard read to its end is not read again by the next poll
(DynamoDB lists closed shards for 24 hours; reading one again from TRIM_HORIZON would count its
records twice), a position is kept page by page when processing fails, an expired iterator's
shard is read again from TRIM_HORIZON, and the long-running poller (``run``) finds what is
written while it runs, survives failed rounds and stops when told. Shard splits (a child shard
and its parent, DescribeStream pages) cannot be made on the engine (one shard per stream), so a
stand-in for the Streams API lists them there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.events.global_tables import CrossRegionReconciler, Overwrite
from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig
from firstwrite.idempotency.stream_reading import DRAINED, follow_stream, read_stream

TABLE = "stream-reading"
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
NO_RETRIES = Config(retries={"max_attempts": 1, "mode": "standard"})


def _table(engine: Engine) -> tuple[Any, Any, str]:
    client = local_client(engine)
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification=STREAM,
    )
    arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    streams = local_client(engine, service_name="dynamodbstreams", config=NO_RETRIES)
    return client, streams, arn


def _put(client: Any, *keys: str) -> None:
    for key in keys:
        client.put_item(TableName=TABLE, Item={"pk": {"S": key}})


class Seen:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.keys += [r["dynamodb"]["Keys"]["pk"]["S"] for r in records]


def test_a_closed_shard_read_to_its_end_is_not_read_again(engine: Engine) -> None:
    client, streams, arn = _table(engine)
    _put(client, "a", "b", "c")
    client.update_table(TableName=TABLE, StreamSpecification={"StreamEnabled": False})
    seen = Seen()
    position = read_stream(streams, arn, seen)
    assert seen.keys == ["a", "b", "c"]
    assert set(position.values()) == {DRAINED}  # the disabled stream's shard is closed
    assert read_stream(streams, arn, seen, position) == position
    assert seen.keys == ["a", "b", "c"]  # still listed by DescribeStream, not read again


def test_an_open_shard_goes_on_where_it_stopped(engine: Engine) -> None:
    client, streams, arn = _table(engine)
    _put(client, "a", "b")
    seen = Seen()
    position = read_stream(streams, arn, seen)
    assert DRAINED not in position.values()
    _put(client, "c")
    read_stream(streams, arn, seen, position)
    assert seen.keys == ["a", "b", "c"]


def test_a_failed_page_is_read_again_and_the_pages_before_it_are_not(engine: Engine) -> None:
    client, streams, arn = _table(engine)
    _put(client, "a")
    position: dict[str, str] = {}
    read_stream(streams, arn, Seen(), position)  # the position is updated in place
    _put(client, "b")

    def failing(records: Sequence[Mapping[str, Any]]) -> None:
        if records:
            raise RuntimeError("the consumer failed")

    with pytest.raises(RuntimeError):
        read_stream(streams, arn, failing, position)
    seen = Seen()
    read_stream(streams, arn, seen, position)
    assert seen.keys == ["b"]  # "a" was done before; "b" failed and comes again


def test_an_expired_iterator_is_read_again_from_trim_horizon(engine: Engine) -> None:
    engine.clock.freeze()
    client, streams, arn = _table(engine)
    _put(client, "a")
    position = read_stream(streams, arn, Seen())
    engine.clock.advance(16 * 60)  # iterators last 15 minutes
    _put(client, "b")
    with pytest.raises(ClientError) as raised:
        read_stream(streams, arn, Seen(), position)
    assert raised.value.response["Error"]["Code"] == "ExpiredIteratorException"
    assert position == {}  # forgotten: read again from the start
    seen = Seen()
    read_stream(streams, arn, seen, position)
    assert seen.keys == ["a", "b"]


class SplitStreams:
    """The Streams API of a stream whose shard split: DescribeStream lists the child first, one
    shard a page, as DynamoDB may; each shard holds its records and then closes."""

    def __init__(self) -> None:
        self.shards = [
            {"ShardId": "child-1", "ParentShardId": "parent"},
            {"ShardId": "parent"},
            {"ShardId": "child-2", "ParentShardId": "parent"},
        ]
        self.records = {"parent": ["p1", "p2"], "child-1": ["c1"], "child-2": ["c2"]}
        self.pages = 0

    def describe_stream(self, StreamArn: str, ExclusiveStartShardId: str | None = None) -> Any:
        ids = [s["ShardId"] for s in self.shards]
        start = ids.index(ExclusiveStartShardId) + 1 if ExclusiveStartShardId else 0
        self.pages += 1
        page = self.shards[start : start + 1]
        more = start + 1 < len(self.shards)
        desc: dict[str, Any] = {"Shards": page}
        if more:
            desc["LastEvaluatedShardId"] = page[-1]["ShardId"]
        return {"StreamDescription": desc}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str) -> Any:
        return {"ShardIterator": f"{ShardId}:0"}

    def get_records(self, ShardIterator: str, Limit: int) -> Any:
        shard, at = ShardIterator.split(":")
        records = self.records[shard][int(at) :]
        page = [{"dynamodb": {"Keys": {"pk": {"S": r}}}} for r in records]
        return {"Records": page}  # read to the end: no NextShardIterator, the shard is closed


def test_a_parent_shard_is_read_before_its_children_across_pages() -> None:
    streams, seen = SplitStreams(), Seen()
    position = read_stream(streams, "arn", seen)
    assert streams.pages == 3  # every DescribeStream page was read
    assert seen.keys[:2] == ["p1", "p2"]  # the parent first, though listed after a child
    assert sorted(seen.keys) == ["c1", "c2", "p1", "p2"]
    assert position == {"parent": DRAINED, "child-1": DRAINED, "child-2": DRAINED}
    read_stream(streams, "arn", seen, position)
    assert len(seen.keys) == 4


def test_a_child_waits_for_a_parent_that_is_not_drained() -> None:
    streams, seen = SplitStreams(), Seen()
    # The parent is still open: a page with records and a next iterator.
    streams.get_records = lambda ShardIterator, Limit: (  # type: ignore[method-assign]
        {"Records": [], "NextShardIterator": ShardIterator}
        if ShardIterator.startswith("parent")
        else {"Records": [{"dynamodb": {"Keys": {"pk": {"S": "child"}}}}]}
    )
    position = read_stream(streams, "arn", seen)
    assert seen.keys == []
    assert set(position) == {"parent"}  # no child iterator yet


# -- the long-running poller -------------------------------------------------------------------

US, EU = "us-east-1", "eu-west-1"
PAYMENTS = "payments-idempotency"


def _global_table(engine: Engine) -> dict[str, Any]:
    clients = {r: local_client(engine, region=r) for r in (US, EU)}
    Idempotency(IdempotencyConfig(table_name=PAYMENTS), client=clients[US]).ensure_table()
    # A replica switches the table's stream on (NEW_AND_OLD_IMAGES) and has one of its own.
    clients[US].update_table(TableName=PAYMENTS, ReplicaUpdates=[{"Create": {"RegionName": EU}}])
    return clients


def test_the_reconciler_runs_until_stopped_and_survives_failed_rounds(engine: Engine) -> None:
    engine.replication.lag(0.5)
    clients = _global_table(engine)
    guards = {
        r: Idempotency(IdempotencyConfig(table_name=PAYMENTS, region=r), client=clients[r])
        for r in (US, EU)
    }
    arn = clients[US].describe_table(TableName=PAYMENTS)["Table"]["LatestStreamArn"]
    streams = local_client(engine, region=US, service_name="dynamodbstreams", config=NO_RETRIES)
    found: list[Overwrite] = []
    reconciler = CrossRegionReconciler(US, on_overwrite=found.append)
    stop = threading.Event()
    thread = threading.Thread(
        target=reconciler.run, args=(streams, arn, stop), kwargs={"interval": 0.05}
    )
    thread.start()
    try:
        # Both regions claim each key inside the lag, while the poller runs; a fault fails
        # some of its rounds meanwhile.
        fault = engine.faults.error("InternalServerError", operation="GetRecords", count=5)
        keys = [f"pay-{i}" for i in range(20)]
        for key in keys:
            for region in (US, EU):
                claim = guards[region].claim(key, {"key": key}, wait=0)
                assert isinstance(claim, Claim)
        deadline = time.monotonic() + 30
        while len(found) < len(keys) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fault.exhausted
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert sorted(o.key for o in found) == sorted(keys)  # each once, none missed


def test_follow_stream_returns_its_position_when_stopped(engine: Engine) -> None:
    client, streams, arn = _table(engine)
    _put(client, "a")
    stop, seen = threading.Event(), Seen()
    stop.set()  # stopped before it starts: no round at all
    assert follow_stream(streams, arn, seen, stop) == {}
    assert seen.keys == []
    stop.clear()

    def stop_after_first(records: Sequence[Mapping[str, Any]]) -> None:
        seen(records)
        stop.set()

    position = follow_stream(streams, arn, stop_after_first, stop, interval=0.01)
    assert seen.keys == ["a"]
    assert DRAINED not in position.values() and position
