"""BatchGetItem and BatchWriteItem: limits, duplicates, 16 MB, capacity, atomicity, hooks."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.values import item_size


def create(engine: Engine, name: str, *, sort: bool = False) -> None:
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if sort:
        definitions.append({"AttributeName": "sk", "AttributeType": "N"})
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
    engine.execute(
        "CreateTable",
        {
            "TableName": name,
            "AttributeDefinitions": definitions,
            "KeySchema": schema,
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


@pytest.fixture
def tables(engine: Engine) -> Engine:
    create(engine, "users")
    create(engine, "events", sort=True)
    for i in range(5):
        engine.execute(
            "PutItem",
            {"TableName": "users", "Item": {"pk": {"S": f"u{i}"}, "name": {"S": f"n{i}"}}},
        )
    return engine


def get(engine: Engine, request_items: dict[str, Any], **params: Any) -> dict[str, Any]:
    return engine.execute("BatchGetItem", {"RequestItems": request_items, **params})


def write(engine: Engine, request_items: dict[str, Any], **params: Any) -> dict[str, Any]:
    return engine.execute("BatchWriteItem", {"RequestItems": request_items, **params})


def error(fn: Any, *args: Any, **kwargs: Any) -> DynamoDBError:
    with pytest.raises(DynamoDBError) as info:
        fn(*args, **kwargs)
    return info.value


def keys(*names: str) -> list[dict[str, Any]]:
    return [{"pk": {"S": n}} for n in names]


def scan_all(engine: Engine, name: str) -> list[dict[str, Any]]:
    return engine.execute("Scan", {"TableName": name, "ConsistentRead": True})["Items"]


# --- BatchGetItem ----------------------------------------------------------------------------


def test_batch_get_returns_found_items_per_table(tables: Engine) -> None:
    response = get(
        tables,
        {
            "users": {"Keys": keys("u0", "missing", "u3"), "ConsistentRead": True},
            "events": {"Keys": [{"pk": {"S": "e"}, "sk": {"N": "1"}}]},
        },
    )
    assert response["UnprocessedKeys"] == {}
    assert sorted(i["pk"]["S"] for i in response["Responses"]["users"]) == ["u0", "u3"]
    # A table with no item found is still listed.
    assert response["Responses"]["events"] == []
    assert "ConsumedCapacity" not in response


def test_batch_get_projection(tables: Engine) -> None:
    response = get(
        tables,
        {
            "users": {
                "Keys": keys("u1", "u2"),
                "ProjectionExpression": "#n",
                "ExpressionAttributeNames": {"#n": "name"},
            }
        },
    )
    assert sorted(i["name"]["S"] for i in response["Responses"]["users"]) == ["n1", "n2"]
    assert all(set(i) == {"name"} for i in response["Responses"]["users"])


def test_batch_get_limits_and_duplicates(tables: Engine) -> None:
    err = error(
        get,
        tables,
        {
            "users": {"Keys": keys(*[f"k{i}" for i in range(60)])},
            "events": {"Keys": [{"pk": {"S": "e"}, "sk": {"N": str(i)}} for i in range(41)]},
        },
    )
    assert err.message == "Too many items requested for the BatchGetItem call"
    # Over 100 keys in one table: the model's names and no value, as today's DynamoDB words it
    # (conformance suite, tests/tier3/error-messages/batchGetItem.test.ts).
    err = error(get, tables, {"users": {"Keys": keys(*[f"k{i}" for i in range(101)])}})
    assert err.message == (
        "1 validation error detected: Value at 'RequestItems.users.member.Keys' failed to "
        "satisfy constraint: Member must have length less than or equal to 100"
    )
    err = error(get, tables, {"users": {"Keys": keys("u1", "u2", "u1")}})
    assert err.message == "Provided list of item keys contains duplicates"
    # Numbers are compared by value: 1 and 1.0 are the same key.
    err = error(
        get,
        tables,
        {
            "events": {
                "Keys": [
                    {"pk": {"S": "e"}, "sk": {"N": "1"}},
                    {"pk": {"S": "e"}, "sk": {"N": "1.0"}},
                ]
            }
        },
    )
    assert err.message == "Provided list of item keys contains duplicates"
    err = error(get, tables, {"users": {"Keys": []}})
    assert err.message == (
        "1 validation error detected: Value '[]' at 'requestItems.users.member.keys' failed to "
        "satisfy constraint: Member must have length greater than or equal to 1"
    )
    # An empty RequestItems is a missing one (conformance suite, batchGetItem.test.ts).
    err = error(get, tables, {})
    assert err.message == "The requestItems parameter is required for BatchGetItem"


def test_batch_get_errors(tables: Engine) -> None:
    err = error(get, tables, {"users": {"Keys": keys("u1")}, "nope": {"Keys": keys("x")}})
    assert (err.code, err.message) == ("ResourceNotFoundException", "Requested resource not found")
    err = error(get, tables, {"users": {"Keys": [{"id": {"S": "x"}}]}})
    assert err.message == "The provided key element does not match the schema"
    err = error(get, tables, {"users": {"Keys": keys("u1")}}, ReturnConsumedCapacity="ALL")
    assert err.message == (
        "1 validation error detected: Value 'ALL' at 'returnConsumedCapacity' failed to satisfy "
        "constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]"
    )
    err = error(get, tables, {"ab": {"Keys": keys("u1")}})
    assert err.message.endswith(
        "at 'requestItems' failed to satisfy constraint: Map keys must satisfy constraint: "
        "[Member must have length less than or equal to 255, Member must have length greater "
        "than or equal to 3, Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+]"
    )


def test_batch_get_16mb_limit_returns_unprocessed_keys(engine: Engine) -> None:
    create(engine, "big")
    blob = "x" * 300_000
    for i in range(60):
        engine.execute(
            "PutItem", {"TableName": "big", "Item": {"pk": {"S": f"k{i:02d}"}, "d": {"S": blob}}}
        )
    requested = keys(*[f"k{i:02d}" for i in range(60)])
    response = get(engine, {"big": {"Keys": requested, "ConsistentRead": True}})
    size = item_size({"pk": {"S": "k00"}, "d": {"S": blob}})
    fits = (16 * 1024 * 1024) // size
    assert fits == 55
    assert len(response["Responses"]["big"]) == fits
    unprocessed = response["UnprocessedKeys"]["big"]
    assert unprocessed == {"Keys": requested[fits:], "ConsistentRead": True}
    # Retrying the unprocessed keys (as SDKs do) gets the rest.
    again = get(engine, response["UnprocessedKeys"])
    assert again["UnprocessedKeys"] == {}
    got = {i["pk"]["S"] for i in response["Responses"]["big"] + again["Responses"]["big"]}
    assert got == {f"k{i:02d}" for i in range(60)}


def test_batch_get_capacity_rounded_per_item_summed_per_table(engine: Engine) -> None:
    create(engine, "cap")
    create(engine, "cap2")
    engine.execute(
        "PutItem", {"TableName": "cap", "Item": {"pk": {"S": "a"}, "d": {"S": "x" * 64 * 1024}}}
    )
    engine.execute(
        "PutItem", {"TableName": "cap", "Item": {"pk": {"S": "b"}, "d": {"S": "x" * 16 * 1024}}}
    )
    response = get(
        engine,
        {
            "cap": {"Keys": keys("a", "b"), "ConsistentRead": True},
            "cap2": {"Keys": keys("a", "b", "c")},
        },
        ReturnConsumedCapacity="TOTAL",
    )
    # 64 KB + 5 bytes -> 17 units, 16 KB + 5 bytes -> 5 units; missing items 0.5 each.
    assert sorted(response["ConsumedCapacity"], key=lambda c: c["TableName"]) == [
        {"TableName": "cap", "CapacityUnits": 22.0},
        {"TableName": "cap2", "CapacityUnits": 1.5},
    ]


# --- BatchWriteItem --------------------------------------------------------------------------


def test_batch_write_puts_and_deletes_across_tables(tables: Engine) -> None:
    response = write(
        tables,
        {
            "users": [
                {"PutRequest": {"Item": {"pk": {"S": "new"}, "v": {"N": "1"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "u0"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "never-existed"}}}},
            ],
            "events": [
                {"PutRequest": {"Item": {"pk": {"S": "e"}, "sk": {"N": str(i)}}}} for i in range(3)
            ],
        },
        ReturnConsumedCapacity="TOTAL",
    )
    assert response["UnprocessedItems"] == {}
    assert sorted(response["ConsumedCapacity"], key=lambda c: c["TableName"]) == [
        {"TableName": "events", "CapacityUnits": 3.0},
        {"TableName": "users", "CapacityUnits": 3.0},
    ]
    names = sorted(i["pk"]["S"] for i in scan_all(tables, "users"))
    assert names == ["new", "u1", "u2", "u3", "u4"]
    assert len(scan_all(tables, "events")) == 3


def test_batch_write_capacity_uses_larger_of_old_and_new(tables: Engine) -> None:
    write(
        tables, {"users": [{"PutRequest": {"Item": {"pk": {"S": "u1"}, "d": {"S": "x" * 3000}}}}]}
    )
    response = write(
        tables,
        {
            "users": [
                {"PutRequest": {"Item": {"pk": {"S": "u1"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "u2"}}}},
            ]
        },
        ReturnConsumedCapacity="INDEXES",
    )
    assert response["ConsumedCapacity"] == [
        {"TableName": "users", "CapacityUnits": 4.0, "Table": {"CapacityUnits": 4.0}}
    ]


def test_batch_write_limits(tables: Engine) -> None:
    def puts(n: int, prefix: str = "k") -> list[dict[str, Any]]:
        return [{"PutRequest": {"Item": {"pk": {"S": f"{prefix}{i}"}}}} for i in range(n)]

    err = error(
        write,
        tables,
        {
            "users": puts(13),
            "events": [
                {"PutRequest": {"Item": {"pk": {"S": "e"}, "sk": {"N": str(i)}}}} for i in range(13)
            ],
        },
    )
    assert err.message == "Too many items requested for the BatchWriteItem call"
    err = error(write, tables, {"users": puts(26)})
    assert err.message.startswith("1 validation error detected: Value '")
    assert err.message.endswith(
        "' at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: "
        "[Member must have length less than or equal to 25, Member must have length greater "
        "than or equal to 1]"
    )
    write(tables, {"users": puts(25)})
    assert len(scan_all(tables, "users")) == 30
    # An empty RequestItems is a missing one (conformance suite, batchWriteItem.test.ts).
    err = error(write, tables, {})
    assert err.message == "The requestItems parameter is required for BatchWriteItem"


def test_batch_write_rejects_duplicates_and_bad_requests(tables: Engine) -> None:
    same_key = [
        {"PutRequest": {"Item": {"pk": {"S": "x"}}}},
        {"DeleteRequest": {"Key": {"pk": {"S": "x"}}}},
    ]
    assert error(write, tables, {"users": same_key}).message == (
        "Provided list of item keys contains duplicates"
    )
    err = error(write, tables, {"users": [{}]})
    assert err.message == (
        "Supplied AttributeValue has more than one datatypes set, must contain exactly one of "
        "the supported datatypes"
    )
    err = error(write, tables, {"users": [{"PutRequest": {}}]})
    assert err.message.startswith("1 validation error detected: Value ")
    assert err.message.endswith(
        " at 'requestItems.users.member.1.member.putRequest.item' failed to satisfy constraint: "
        "Member must not be null"
    )
    err = error(write, tables, {"users": [{"PutRequest": {"Item": {"name": {"S": "x"}}}}]})
    assert (
        err.message == "One or more parameter values were invalid: Missing the key pk in the item"
    )
    big = {"pk": {"S": "big"}, "d": {"S": "x" * 409_600}}
    err = error(write, tables, {"users": [{"PutRequest": {"Item": big}}]})
    assert err.message == "Item size has exceeded the maximum allowed size"
    err = error(write, tables, {"missing": same_key[:1]})
    assert (err.code, err.message) == ("ResourceNotFoundException", "Requested resource not found")


def test_missing_member_message_is_awss(tables: Engine) -> None:
    err = error(write, tables, {"users": [{"PutRequest": {}}]})
    assert err.message == (
        "1 validation error detected: Value null at 'requestItems.users.member.1.member."
        "putRequest.item' failed to satisfy constraint: Member must not be null"
    )


def test_batch_write_is_all_or_nothing(tables: Engine) -> None:
    before = scan_all(tables, "users")
    err = error(
        write,
        tables,
        {
            "users": [
                {"PutRequest": {"Item": {"pk": {"S": "ok1"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "u1"}}}},
                {"PutRequest": {"Item": {"pk": {"N": "1"}}}},  # wrong key type: the batch fails
            ]
        },
    )
    assert err.message == (
        "One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N"
    )
    assert scan_all(tables, "users") == before


def test_batch_write_emits_a_change_per_write(tables: Engine) -> None:
    seen: list[tuple[str, Any, Any]] = []
    tables.hooks.change_hooks.append(
        lambda ctx, w, row, old, new: seen.append((row.name, old and old["pk"], new and new["pk"]))
    )
    write(
        tables,
        {
            "users": [
                {"PutRequest": {"Item": {"pk": {"S": "u1"}, "x": {"S": "y"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "u2"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "absent"}}}},
            ]
        },
    )
    assert seen == [("users", {"S": "u1"}, {"S": "u1"}), ("users", {"S": "u2"}, None)]


def test_concurrent_batch_writes_all_land(tables: Engine) -> None:
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for batch in range(4):
                write(
                    tables,
                    {
                        "events": [
                            {
                                "PutRequest": {
                                    "Item": {"pk": {"S": f"w{n}"}, "sk": {"N": str(batch * 25 + i)}}
                                }
                            }
                            for i in range(25)
                        ]
                    },
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(scan_all(tables, "events")) == 8 * 100


# --- through boto3 ---------------------------------------------------------------------------


def test_boto3_batch_round_trip(ddb: Any, table_name: str) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "B"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    items = [{"pk": {"B": bytes([i, 0xFF])}, "v": {"N": str(i)}} for i in range(25)]
    response = ddb.batch_write_item(
        RequestItems={table_name: [{"PutRequest": {"Item": i}} for i in items]},
        ReturnConsumedCapacity="TOTAL",
    )
    assert response["UnprocessedItems"] == {}
    assert response["ConsumedCapacity"] == [{"TableName": table_name, "CapacityUnits": 25.0}]
    response = ddb.batch_get_item(
        RequestItems={table_name: {"Keys": [{"pk": i["pk"]} for i in items[:10]]}}
    )
    assert sorted(response["Responses"][table_name], key=lambda i: i["pk"]["B"]) == items[:10]
    assert response["UnprocessedKeys"] == {}
    with pytest.raises(ClientError) as info:
        ddb.batch_get_item(RequestItems={table_name: {"Keys": [{"pk": items[0]["pk"]}] * 2}})
    assert info.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "Provided list of item keys contains duplicates",
    }
    assert math.isclose(sum(1 for _ in ddb.scan(TableName=table_name)["Items"]), len(items))
