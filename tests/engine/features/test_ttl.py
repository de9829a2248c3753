"""Time to Live: the API (both transports) and the sweeper, driven by the engine clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.features import ttl as ttl_module
from firstwrite.engine.features.ttl import AWS_CHANGE_INTERVAL_S, FIVE_YEARS_S, TTLConfig

NOW = 1_750_000_000.0


def create(ddb: Any, name: str, *, sort: bool = False) -> None:
    schema = [{"AttributeName": "p", "KeyType": "HASH"}]
    definitions = [{"AttributeName": "p", "AttributeType": "S"}]
    if sort:
        schema.append({"AttributeName": "s", "KeyType": "RANGE"})
        definitions.append({"AttributeName": "s", "AttributeType": "N"})
    ddb.create_table(
        TableName=name,
        KeySchema=schema,
        AttributeDefinitions=definitions,
        BillingMode="PAY_PER_REQUEST",
    )


def enable(ddb: Any, name: str, attribute: str = "expires") -> dict[str, Any]:
    return dict(
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
        )
    )


def code_and_message(call: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        call()
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


@pytest.fixture
def frozen(tmp_path: Path) -> Iterator[Engine]:
    """An engine with no background sweeper and its clock frozen at NOW: tests sweep by hand."""
    with Engine(tmp_path / "ttl.db", ttl_config=TTLConfig(sweep_interval=None)) as engine:
        engine.clock.freeze(NOW)
        yield engine


@pytest.fixture
def client(frozen: Engine) -> Any:
    return local_client(frozen)


def keys(ddb: Any, name: str) -> set[str]:
    return {item["p"]["S"] for item in ddb.scan(TableName=name)["Items"]}


# --- the API -----------------------------------------------------------------------------------


def test_describe_without_ttl_is_disabled_without_attribute(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    assert ddb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "DISABLED"
    }


def test_enable_echoes_and_describe_reports_enabled(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    response = enable(ddb, table_name)
    assert response["TimeToLiveSpecification"] == {"Enabled": True, "AttributeName": "expires"}
    assert ddb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "expires",
    }


def test_enable_twice_and_wrong_disable_are_refused(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    assert code_and_message(
        lambda: ddb.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": False, "AttributeName": "expires"},
        )
    ) == ("ValidationException", "TimeToLive is already disabled")
    enable(ddb, table_name)
    assert code_and_message(lambda: enable(ddb, table_name)) == (
        "ValidationException",
        "TimeToLive is already enabled",
    )
    code, message = code_and_message(lambda: enable(ddb, table_name, "other"))
    assert code == "ValidationException"
    assert "active on a different AttributeName" in message
    code, message = code_and_message(
        lambda: ddb.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": False, "AttributeName": "other"},
        )
    )
    assert code == "ValidationException"
    assert "different" in message
    # The failed calls changed nothing; the right disable works (no change window by default).
    ddb.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": False, "AttributeName": "expires"}
    )
    assert ddb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "DISABLED"
    }


def test_request_shape_errors(ddb: Any, table_name: str) -> None:
    code, message = code_and_message(lambda: enable(ddb, table_name + "-missing"))
    assert code == "ResourceNotFoundException"
    create(ddb, table_name)
    code, message = code_and_message(lambda: enable(ddb, table_name, "x" * 256))
    assert code == "ValidationException"
    assert "length less than or equal to 255" in message
    assert ddb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "DISABLED"
    }
    with pytest.raises(ClientError) as excinfo:
        ddb.describe_time_to_live(TableName=table_name + "-missing")
    assert excinfo.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_empty_attribute_name_and_missing_members(frozen: Engine) -> None:
    # boto3 refuses these client-side; other SDKs and raw HTTP callers reach the engine.
    frozen.execute(
        "CreateTable",
        {
            "TableName": "tbl",
            "KeySchema": [{"AttributeName": "p", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "p", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    cases = [
        ({"Enabled": True, "AttributeName": ""}, "length greater than or equal to 1"),
        ({"Enabled": True}, "attributeName"),
        ({"AttributeName": "expires"}, "enabled"),
    ]
    for spec, fragment in cases:
        with pytest.raises(DynamoDBError) as excinfo:
            frozen.execute(
                "UpdateTimeToLive", {"TableName": "tbl", "TimeToLiveSpecification": spec}
            )
        assert excinfo.value.code == "ValidationException"
        assert fragment in excinfo.value.message
    with pytest.raises(DynamoDBError) as excinfo:
        frozen.execute(
            "UpdateTimeToLive",
            {
                "TableName": "tbl",
                "TimeToLiveSpecification": {"Enabled": "dog", "AttributeName": "e"},
            },
        )
    assert excinfo.value.code == "SerializationException"


def test_change_window_when_enforced(tmp_path: Path) -> None:
    config = TTLConfig(sweep_interval=None, change_interval=AWS_CHANGE_INTERVAL_S)
    with Engine(tmp_path / "window.db", ttl_config=config) as engine:
        engine.clock.freeze(NOW)
        ddb = local_client(engine)
        create(ddb, "window")
        enable(ddb, "window")
        disable = {"Enabled": False, "AttributeName": "expires"}
        engine.clock.advance(AWS_CHANGE_INTERVAL_S - 1)
        assert code_and_message(
            lambda: ddb.update_time_to_live(TableName="window", TimeToLiveSpecification=disable)
        ) == (
            "ValidationException",
            "Time to live has been modified multiple times within a fixed interval",
        )
        engine.clock.advance(1)
        ddb.update_time_to_live(TableName="window", TimeToLiveSpecification=disable)
        assert ddb.describe_time_to_live(TableName="window")["TimeToLiveDescription"] == {
            "TimeToLiveStatus": "DISABLED"
        }


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="lag"):
        TTLConfig(lag=-1)
    with pytest.raises(ValueError, match="sweep_interval"):
        TTLConfig(sweep_interval=0)
    with pytest.raises(ValueError, match="batch_size"):
        TTLConfig(batch_size=0)


# --- expiry --------------------------------------------------------------------------------------


def _sweep_transactions(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The items each of ``engine``'s committed sweep transactions deleted, in commit order."""
    transactions: list[int] = []
    real_committed = ttl_module._SweepChore.committed

    def committed(chore: Any, piece: Any, seq: int) -> None:
        if piece[0]:
            transactions.append(len(piece[0]))
        real_committed(chore, piece, seq)

    monkeypatch.setattr(ttl_module._SweepChore, "committed", committed)
    return transactions


def test_expired_items_stay_readable_until_the_sweep(frozen: Engine, client: Any) -> None:
    create(client, "tbl")
    enable(client, "tbl")
    client.put_item(TableName="tbl", Item={"p": {"S": "old"}, "expires": {"N": str(NOW - 60)}})
    # Still a normal item: read, scanned and updatable (no read-side filtering, as on AWS).
    assert client.get_item(TableName="tbl", Key={"p": {"S": "old"}}, ConsistentRead=True)["Item"]
    assert keys(client, "tbl") == {"old"}
    client.update_item(
        TableName="tbl",
        Key={"p": {"S": "old"}},
        UpdateExpression="SET touched = :t",
        ExpressionAttributeValues={":t": {"BOOL": True}},
    )
    deleted = frozen.ttl.sweep_now()
    assert [(d.table, d.key) for d in deleted] == [("tbl", {"p": {"S": "old"}})]
    assert "Item" not in client.get_item(TableName="tbl", Key={"p": {"S": "old"}})
    assert frozen.ttl.sweep_now() == []


def test_a_sweep_transaction_ends_once_its_time_slice_is_used(
    frozen: Engine, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(client, "tbl")
    enable(client, "tbl")
    for n in range(6):
        client.put_item(TableName="tbl", Item={"p": {"S": f"k{n}"}, "expires": {"N": str(NOW - 1)}})
    # No time left after the first item: every sweep transaction deletes exactly one item (a
    # writer waiting for the lock gets it between two of them).
    monkeypatch.setattr(ttl_module, "SWEEP_SLICE_S", 0.0)
    monkeypatch.setattr(ttl_module, "SWEEP_IDLE_SLICE_S", 0.0)
    transactions = _sweep_transactions(frozen, monkeypatch)
    assert len(frozen.ttl.sweep_now()) == 6
    assert transactions == [1] * 6
    assert keys(client, "tbl") == set()


def test_on_an_idle_engine_sweep_transactions_grow_to_the_batch_size(
    frozen: Engine, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(client, "tbl")
    enable(client, "tbl")
    frozen.ttl.configure(batch_size=50)
    requests = [
        {"PutRequest": {"Item": {"p": {"S": f"k{n}"}, "expires": {"N": str(NOW - 1)}}}}
        for n in range(400)
    ]
    for low in range(0, 400, 25):
        client.batch_write_item(RequestItems={"tbl": requests[low : low + 25]})
    # Whatever this machine's speed, the idle slice's time is reached only past the batch size.
    monkeypatch.setattr(ttl_module, "SWEEP_IDLE_SLICE_S", 60.0)
    transactions = _sweep_transactions(frozen, monkeypatch)
    assert len(frozen.ttl.sweep_now()) == 400
    # With no writer between two slices, they double (from a busy engine's, SWEEP_SLICE_S,
    # ~16 items) until the batch size caps them.
    assert max(transactions) == 50
    assert transactions == sorted(transactions[:-1]) + transactions[-1:]
    assert keys(client, "tbl") == set()


def test_only_numbers_in_the_past_within_five_years_expire(frozen: Engine, client: Any) -> None:
    create(client, "tbl")
    enable(client, "tbl")
    items = {
        "past": {"N": str(NOW - 1)},
        "exponent": {"N": "1749999e3"},  # 1,749,999,000: in the past
        "fraction": {"N": str(NOW - 0.5)},
        "future": {"N": str(NOW + 60)},
        "now": {"N": str(NOW)},  # expired only when strictly before now
        "string": {"S": str(NOW - 60)},
        "ancient": {"N": str(NOW - FIVE_YEARS_S - 10)},
        "millis": {"N": str((NOW + 60) * 1000)},
        "nested": {"M": {"expires": {"N": str(NOW - 60)}}},
    }
    for name, value in items.items():
        client.put_item(TableName="tbl", Item={"p": {"S": name}, "expires": value})
    client.put_item(TableName="tbl", Item={"p": {"S": "none"}})
    deleted = {d.key["p"]["S"] for d in frozen.ttl.sweep_now()}
    assert deleted == {"past", "exponent", "fraction"}
    assert keys(client, "tbl") == set(items) - deleted | {"none"}
    frozen.clock.advance(61)
    assert {d.key["p"]["S"] for d in frozen.ttl.sweep_now()} == {"future", "now"}


def test_updates_that_move_or_remove_the_expiry_are_honoured(frozen: Engine, client: Any) -> None:
    create(client, "tbl", sort=True)
    enable(client, "tbl")
    for sort in range(3):
        client.put_item(
            TableName="tbl",
            Item={"p": {"S": "a"}, "s": {"N": str(sort)}, "expires": {"N": str(NOW + 10)}},
        )
    key = {"p": {"S": "a"}}
    client.update_item(
        TableName="tbl",
        Key={**key, "s": {"N": "0"}},
        UpdateExpression="SET expires = :e",
        ExpressionAttributeValues={":e": {"N": str(NOW + 1000)}},
    )
    client.update_item(
        TableName="tbl", Key={**key, "s": {"N": "1"}}, UpdateExpression="REMOVE expires"
    )
    frozen.clock.advance(20)
    deleted = frozen.ttl.sweep_now()
    assert [d.key for d in deleted] == [{"p": {"S": "a"}, "s": {"N": "2"}}]
    assert len(client.scan(TableName="tbl")["Items"]) == 2


def test_lag_delays_deletion_to_stage_the_race(frozen: Engine, client: Any) -> None:
    frozen.ttl.configure(lag=3 * 24 * 3600)  # "within a few days"
    create(client, "tbl")
    enable(client, "tbl")
    client.put_item(TableName="tbl", Item={"p": {"S": "x"}, "expires": {"N": str(NOW - 1)}})
    frozen.clock.advance(2 * 24 * 3600)
    assert frozen.ttl.sweep_now() == []
    # The late writer wins the race: a conditional update on the expired item still succeeds.
    client.update_item(
        TableName="tbl",
        Key={"p": {"S": "x"}},
        UpdateExpression="SET v = :v",
        ConditionExpression="attribute_exists(p)",
        ExpressionAttributeValues={":v": {"N": "1"}},
    )
    frozen.clock.advance(24 * 3600)
    assert [d.key for d in frozen.ttl.sweep_now()] == [{"p": {"S": "x"}}]


def test_items_present_before_enabling_are_swept_in_chunks(tmp_path: Path) -> None:
    config = TTLConfig(sweep_interval=None, batch_size=3)
    with Engine(tmp_path / "backfill.db", ttl_config=config) as engine:
        engine.clock.freeze(NOW)
        ddb = local_client(engine)
        create(ddb, "tbl")
        for i in range(10):
            expires = NOW - 5 if i % 2 == 0 else NOW + 5
            ddb.put_item(
                TableName="tbl", Item={"p": {"S": f"k{i}"}, "expires": {"N": str(expires)}}
            )
        enable(ddb, "tbl")
        assert {d.key["p"]["S"] for d in engine.ttl.sweep_now()} == {
            f"k{i}" for i in (0, 2, 4, 6, 8)
        }
        engine.clock.advance(10)
        assert {d.key["p"]["S"] for d in engine.ttl.sweep_now()} == {
            f"k{i}" for i in (1, 3, 5, 7, 9)
        }


def test_disabling_ttl_stops_expiry(frozen: Engine, client: Any) -> None:
    create(client, "tbl")
    enable(client, "tbl")
    client.put_item(TableName="tbl", Item={"p": {"S": "x"}, "expires": {"N": str(NOW - 1)}})
    client.update_time_to_live(
        TableName="tbl", TimeToLiveSpecification={"Enabled": False, "AttributeName": "expires"}
    )
    assert frozen.ttl.sweep_now() == []
    assert keys(client, "tbl") == {"x"}
    # Re-enabling on another attribute indexes the existing items afresh.
    enable(client, "tbl", "purge_at")
    assert frozen.ttl.sweep_now() == []
    client.update_item(
        TableName="tbl",
        Key={"p": {"S": "x"}},
        UpdateExpression="SET purge_at = :o",
        ExpressionAttributeValues={":o": {"N": str(NOW - 1)}},
    )
    assert [d.key for d in frozen.ttl.sweep_now()] == [{"p": {"S": "x"}}]


def test_ttl_deletes_consume_no_capacity_and_tables_can_be_dropped(
    frozen: Engine, client: Any
) -> None:
    create(client, "tbl")
    enable(client, "tbl")
    client.put_item(TableName="tbl", Item={"p": {"S": "x"}, "expires": {"N": str(NOW - 1)}})
    client.delete_table(TableName="tbl")
    create(client, "tbl")  # same name, new table: the old index entries must not touch it
    client.put_item(TableName="tbl", Item={"p": {"S": "x"}, "expires": {"N": str(NOW - 1)}})
    assert frozen.ttl.sweep_now() == []
    assert keys(client, "tbl") == {"x"}


def test_background_sweeper_deletes_without_being_asked(tmp_path: Path) -> None:
    config = TTLConfig(sweep_interval=0.05)
    with Engine(tmp_path / "bg.db", ttl_config=config) as engine:
        ddb = local_client(engine)
        create(ddb, "tbl")
        enable(ddb, "tbl")
        past = engine.clock.now() - 1
        ddb.put_item(TableName="tbl", Item={"p": {"S": "x"}, "expires": {"N": str(past)}})
        ddb.put_item(TableName="tbl", Item={"p": {"S": "y"}})
        deadline = time.monotonic() + 10
        while keys(ddb, "tbl") != {"y"} and time.monotonic() < deadline:
            time.sleep(0.02)
        assert keys(ddb, "tbl") == {"y"}


def test_http_server_sweeps_by_default_within_seconds(ddb: Any, table_name: str) -> None:
    # The server runs the default sweeper (1 s period, no lag). Real time is the server's clock.
    create(ddb, table_name)
    enable(ddb, table_name)
    ddb.put_item(
        TableName=table_name, Item={"p": {"S": "gone"}, "expires": {"N": str(int(time.time()) - 5)}}
    )
    ddb.put_item(
        TableName=table_name,
        Item={"p": {"S": "kept"}, "expires": {"N": str(int(time.time()) + 3600)}},
    )
    deadline = time.monotonic() + 15
    while keys(ddb, table_name) != {"kept"} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert keys(ddb, table_name) == {"kept"}


def test_concurrent_sweepers_on_one_file_delete_each_item_once(tmp_path: Path) -> None:
    # Two engines on one file are two SQLite connections, exactly as two processes would be.
    path = tmp_path / "shared.db"
    config = TTLConfig(sweep_interval=None, batch_size=7)
    with Engine(path, ttl_config=config) as first, Engine(path, ttl_config=config) as second:
        for engine in (first, second):
            engine.clock.freeze(NOW)
        ddb = local_client(first)
        create(ddb, "tbl")
        enable(ddb, "tbl")
        for i in range(200):
            ddb.put_item(
                TableName="tbl", Item={"p": {"S": f"k{i}"}, "expires": {"N": str(NOW - 1)}}
            )
        results: list[list[Any]] = [[], []]
        barrier = threading.Barrier(2)

        def sweep(index: int, engine: Engine) -> None:
            barrier.wait()
            results[index] = engine.ttl.sweep_now()

        threads = [
            threading.Thread(target=sweep, args=(i, e)) for i, e in enumerate((first, second))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        swept = [d.key["p"]["S"] for result in results for d in result]
        assert sorted(swept) == sorted(f"k{i}" for i in range(200))
        assert keys(ddb, "tbl") == set()
