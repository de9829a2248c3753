"""The single-item fast paths: a per-process catalog cache that another engine's table change
can never fool, insert-if-absent as one autocommit statement, and failed conditions answered
without the write lock."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.direct.client import DirectClient

ABSENT = {"ConditionExpression": "attribute_not_exists(pk)"}


def _table(client: DirectClient, name: str = "tbl", key: str = "pk", kind: str = "S") -> None:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": kind}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    """Two engines on one file, as two processes would have: separate caches, one database."""
    a, b = Engine(tmp_path / "shared.db"), Engine(tmp_path / "shared.db")
    yield DirectClient(a), DirectClient(b), a
    a.close()
    b.close()


def test_a_table_recreated_elsewhere_with_another_schema_is_noticed(pair: Any) -> None:
    a, b, engine_a = pair
    _table(a)
    a.put_item(TableName="tbl", Item={"pk": {"S": "old"}}, **ABSENT)  # a caches the catalog row
    assert engine_a.storage.catalog.current  # the fast path really is using the cache
    b.delete_table(TableName="tbl")
    _table(b, key="id", kind="N")

    # a's cached row says "pk, S": a write shaped for it must now fail as the new schema says.
    with pytest.raises(a.exceptions.ClientError) as info:
        a.put_item(TableName="tbl", Item={"pk": {"S": "x"}}, **ABSENT)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    a.put_item(TableName="tbl", Item={"id": {"N": "1"}}, **ABSENT)
    assert a.get_item(TableName="tbl", Key={"id": {"N": "1"}})["Item"] == {"id": {"N": "1"}}
    assert b.scan(TableName="tbl")["Count"] == 1  # the old item went with the old table


def test_a_table_deleted_elsewhere_is_not_found(pair: Any) -> None:
    a, b, _ = pair
    _table(a)
    a.put_item(TableName="tbl", Item={"pk": {"S": "k"}})
    b.delete_table(TableName="tbl")
    for call in (
        lambda: a.put_item(TableName="tbl", Item={"pk": {"S": "k2"}}, **ABSENT),
        lambda: a.get_item(TableName="tbl", Key={"pk": {"S": "k"}}),
        lambda: a.update_item(
            TableName="tbl",
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        ),
        lambda: a.delete_item(TableName="tbl", Key={"pk": {"S": "k"}}),
    ):
        with pytest.raises(a.exceptions.ResourceNotFoundException):
            call()


def test_a_stream_enabled_elsewhere_records_the_fast_path_writes(pair: Any) -> None:
    a, b, _ = pair
    _table(a)
    a.put_item(TableName="tbl", Item={"pk": {"S": "before"}}, **ABSENT)  # quiet: one statement
    b.update_table(
        TableName="tbl", StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    )
    a.put_item(TableName="tbl", Item={"pk": {"S": "after"}}, **ABSENT)

    arn = b.describe_table(TableName="tbl")["Table"]["LatestStreamArn"]
    engine_b = b._engine
    streams = DirectClient(engine_b, service="dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == ["after"]


def test_ttl_enabled_elsewhere_indexes_the_fast_path_writes(pair: Any) -> None:
    a, b, engine_a = pair
    _table(a)
    a.put_item(TableName="tbl", Item={"pk": {"S": "warm"}}, **ABSENT)
    b.update_time_to_live(
        TableName="tbl", TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
    )
    expired = str(int(engine_a.clock.now()) - 60)  # within DynamoDB's five-year window
    a.put_item(TableName="tbl", Item={"pk": {"S": "dies"}, "exp": {"N": expired}}, **ABSENT)
    engine_a.ttl.sweep_now()
    assert "Item" not in a.get_item(TableName="tbl", Key={"pk": {"S": "dies"}}, ConsistentRead=True)
    assert "Item" in a.get_item(TableName="tbl", Key={"pk": {"S": "warm"}}, ConsistentRead=True)


def _lock_database(path: Path) -> sqlite3.Connection:
    """Another process's writer, holding SQLite's write lock until rolled back."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _update(client: DirectClient, expected: str) -> Any:
    return client.update_item(
        TableName="tbl",
        Key={"pk": {"S": "k"}},
        UpdateExpression="SET v = :two",
        ConditionExpression="v = :expected",
        ExpressionAttributeValues={":two": {"N": "2"}, ":expected": {"N": expected}},
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )


def test_a_failing_condition_is_answered_while_another_writer_holds_the_lock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    with Engine(path) as engine:
        client = DirectClient(engine)
        _table(client)
        client.put_item(TableName="tbl", Item={"pk": {"S": "k"}, "v": {"N": "1"}})
        # A first failure, under the lock: it tells the engine this condition tends to fail.
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            _update(client, "0")
        holder = _lock_database(path)
        try:
            # Fails on the committed item: answered from one read, no lock needed.
            thread, out = _in_thread(lambda: _update(client, "0"))
            thread.join(10)
            assert not thread.is_alive()
            error = out["error"]
            assert isinstance(error, client.exceptions.ConditionalCheckFailedException)
            assert error.response["Item"] == {"pk": {"S": "k"}, "v": {"N": "1"}}

            # Holds: it must wait for the lock, and write once it is released.
            thread, out = _in_thread(lambda: _update(client, "1"))
            thread.join(0.5)
            assert thread.is_alive()  # blocked behind the other writer
        finally:
            holder.rollback()
            holder.close()
        thread.join(30)
        assert "error" not in out
        item = client.get_item(TableName="tbl", Key={"pk": {"S": "k"}}, ConsistentRead=True)
        assert item["Item"]["v"] == {"N": "2"}

        # That success clears the hint: the next attempt goes straight to the lock (and waits).
        holder = _lock_database(path)
        try:
            thread, out = _in_thread(lambda: _update(client, "0"))
            thread.join(0.5)
            assert thread.is_alive()
        finally:
            holder.rollback()
            holder.close()
        thread.join(30)
        assert isinstance(out["error"], client.exceptions.ConditionalCheckFailedException)


def test_a_duplicate_insert_if_absent_is_answered_while_another_writer_holds_the_lock(
    tmp_path: Path,
) -> None:
    """attribute_not_exists(pk) on a quiet table: after one failure, the next duplicate is
    answered from one read (no lock); a new key still inserts, and clears the hint."""
    path = tmp_path / "dup.db"
    with Engine(path) as engine:
        client = DirectClient(engine)
        _table(client)
        stored = {"pk": {"S": "k"}, "v": {"N": "1"}}
        client.put_item(TableName="tbl", Item=stored, **ABSENT)

        def put(key: str, **extra: Any) -> Any:
            item = {"pk": {"S": key}, "v": {"N": "2"}}
            return client.put_item(TableName="tbl", Item=item, **ABSENT, **extra)

        ccf = client.exceptions.ConditionalCheckFailedException
        with pytest.raises(ccf):  # the first duplicate: one insert, under the lock
            put("k")
        holder = _lock_database(path)
        started: list[threading.Thread] = []
        try:
            for _ in range(3):  # duplicates again: answered without waiting for the lock
                thread, out = _in_thread(
                    lambda: put("k", ReturnValuesOnConditionCheckFailure="ALL_OLD")
                )
                started.append(thread)
                thread.join(5)
                assert not thread.is_alive()
                assert isinstance(out["error"], ccf)
                assert out["error"].response["Item"] == stored
            # A new key must write: it waits for the lock like any write.
            thread, out = _in_thread(lambda: put("new"))
            started.append(thread)
            thread.join(0.5)
            assert thread.is_alive()
        finally:
            holder.rollback()
            holder.close()
            for waiting in started:  # none may outlive the engine, even when an assert failed
                waiting.join(30)
        assert "error" not in out
        assert client.get_item(TableName="tbl", Key={"pk": {"S": "new"}})["Item"]["v"] == {"N": "2"}
        assert client.get_item(TableName="tbl", Key={"pk": {"S": "k"}})["Item"] == stored

        # The hint only moves cost: once the item is gone, the same put inserts again.
        with pytest.raises(ccf):
            put("k")
        client.delete_item(TableName="tbl", Key={"pk": {"S": "k"}})
        assert "Attributes" not in put("k", ReturnValues="ALL_OLD")
        assert client.get_item(TableName="tbl", Key={"pk": {"S": "k"}})["Item"]["v"] == {"N": "2"}


def test_a_condition_that_stops_holding_under_the_lock_is_refused(engine: Engine) -> None:
    """The precheck passes, a concurrent write changes the item before the write lock is
    taken: the condition is evaluated again under the lock and fails, writing nothing."""
    client = DirectClient(engine)
    _table(client)
    client.put_item(TableName="tbl", Item={"pk": {"S": "k"}, "v": {"N": "1"}})
    storage = engine.storage
    original = storage.write
    raced = []

    def write(fn: Any, **kwargs: Any) -> Any:
        if not raced:  # between the precheck and this write, another writer gets in first
            raced.append(True)
            original(lambda w: w.put(*_stored(engine, "k", {"pk": {"S": "k"}, "v": {"N": "5"}})))
        return original(fn, **kwargs)

    storage.write = write  # type: ignore[method-assign]
    with pytest.raises(client.exceptions.ConditionalCheckFailedException) as info:
        client.put_item(
            TableName="tbl",
            Item={"pk": {"S": "k"}, "v": {"N": "2"}},
            ConditionExpression="v = :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert info.value.response["Item"]["v"] == {"N": "5"}
    del storage.write
    stored = client.get_item(TableName="tbl", Key={"pk": {"S": "k"}}, ConsistentRead=True)
    assert stored["Item"]["v"] == {"N": "5"}


def _stored(engine: Engine, pk: str, item: dict[str, Any]) -> tuple[Any, ...]:
    from firstwrite.engine.item_keys import item_key
    from firstwrite.engine.values import item_size

    row = engine.storage.cached_table(engine.default_region, "tbl")
    assert row is not None
    key = item_key(row.key_schema, item)
    return (row.id, *key, item_size(item), item)


def test_insert_if_absent_races_a_delete_on_another_engine(pair: Any) -> None:
    """Autocommit insert-if-absent with ALL_OLD reads the old item in a second statement: a
    delete landing between them must end in a stored item, never a lost put or a bogus
    failure without the item."""
    a, b, _ = pair
    _table(a)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            b.put_item(TableName="tbl", Item={"pk": {"S": "hot"}})
            b.delete_item(TableName="tbl", Key={"pk": {"S": "hot"}})

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    wins = failures = 0
    try:
        for _ in range(300):
            try:
                a.put_item(
                    TableName="tbl",
                    Item={"pk": {"S": "hot"}, "mine": {"BOOL": True}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **ABSENT,
                )
                wins += 1
            except a.exceptions.ConditionalCheckFailedException as exc:
                # What it lost to (the churner's item, or its own earlier win), never nothing.
                assert exc.response["Item"]["pk"] == {"S": "hot"}
                failures += 1
    finally:
        stop.set()
        churner.join(10)
    assert wins + failures == 300


def _garbage_after(calls: Any, n: int = 200) -> int:
    """Objects only the cycle collector could free, left by ``n`` runs of ``calls``."""
    import gc

    calls()  # warm caches first: they are kept, not garbage
    gc.collect()
    gc.disable()
    try:
        for _ in range(n):
            calls()
        return gc.collect()
    finally:
        gc.enable()


def test_failed_and_successful_writes_leave_no_reference_cycles(engine: Engine) -> None:
    """A failed condition used to leave error -> traceback -> frame -> slot -> error behind
    (freed only by the cycle collector, ~6 us a call). Hot paths must free everything at once."""
    client = DirectClient(engine)
    _table(client)
    client.put_item(TableName="tbl", Item={"pk": {"S": "k"}})
    counter = iter(range(10**6))

    def failing() -> None:
        try:
            client.put_item(TableName="tbl", Item={"pk": {"S": "k"}}, **ABSENT)
        except client.exceptions.ConditionalCheckFailedException:
            pass

    def failing_update() -> None:
        try:
            client.update_item(
                TableName="tbl",
                Key={"pk": {"S": "k"}},
                UpdateExpression="SET v = :v",
                ConditionExpression="attribute_not_exists(v) AND v = :v",
                ExpressionAttributeValues={":v": {"N": "1"}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except client.exceptions.ConditionalCheckFailedException:
            pass

    def succeeding() -> None:
        client.put_item(TableName="tbl", Item={"pk": {"S": f"n{next(counter)}"}}, **ABSENT)

    for calls in (failing, failing_update, succeeding):
        assert _garbage_after(calls) == 0, calls.__name__
