"""UpdateTable's GSI backfill at the edges: old items an index cannot hold (a key attribute past
DynamoDB's key size limits, or of another type) are left out, not refused; a new index beside a
local one; a deleted GSI leaves the LSI's rules in force; a name already taken is refused.
In process and over HTTP.

Sources: the DynamoDB developer guide, "Service, account, and table quotas" (partition key
value up to 2048 bytes, sort key value up to 1024 bytes) and "Managing global secondary
indexes" (backfill: items whose index key attributes do not match skip the index; "Detecting
and correcting index key violations"); ScyllaDB's test_gsi_updatetable.py (run against
DynamoDB: test_gsi_backfill_key_limits, test_gsi_backfill_with_lsi, test_gsi_delete_with_lsi,
"already exists" for a taken name).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

INVALID = "One or more parameter values were invalid: "


def wait_active(ddb: Any, table_name: str, index: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        described = ddb.describe_table(TableName=table_name)["Table"]
        entry = next(
            (g for g in described.get("GlobalSecondaryIndexes", []) if g["IndexName"] == index),
            None,
        )
        if entry is not None and entry["IndexStatus"] == "ACTIVE":
            return
        assert time.monotonic() < deadline, described
        time.sleep(0.02)


def wait_gone(ddb: Any, table_name: str, index: str) -> None:
    deadline = time.monotonic() + 30
    while any(
        g["IndexName"] == index
        for g in ddb.describe_table(TableName=table_name)["Table"].get("GlobalSecondaryIndexes", [])
    ):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def add_gsi(ddb: Any, table_name: str, index: str, key: list[tuple[str, str]]) -> None:
    ddb.update_table(
        TableName=table_name,
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name, _ in key],
        GlobalSecondaryIndexUpdates=[
            {
                "Create": {
                    "IndexName": index,
                    "KeySchema": [{"AttributeName": n, "KeyType": kind} for n, kind in key],
                    "Projection": {"ProjectionType": "ALL"},
                }
            }
        ],
    )
    wait_active(ddb, table_name, index)


def scan_keys(ddb: Any, table_name: str, index: str) -> list[str]:
    items = ddb.scan(TableName=table_name, IndexName=index)["Items"]
    return sorted(i["pk"]["S"] for i in items)


def failure(call: Any, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def test_backfill_leaves_out_keys_past_the_size_limits(ddb: Any, table_name: str) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "c", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "c", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    lengths = [1024, 1025, 2048, 2049]
    for length in lengths:
        item = {"pk": {"S": f"x{length}"}, "c": {"S": "c"}, "x": {"S": "a" * length}}
        ddb.put_item(TableName=table_name, Item=item)
    ddb.put_item(
        TableName=table_name, Item={"pk": {"S": "number"}, "c": {"S": "c"}, "x": {"N": "1"}}
    )
    add_gsi(ddb, table_name, "by-x", [("x", "HASH")])
    # A partition key value up to 2048 bytes; the number is of another type: both left out.
    assert scan_keys(ddb, table_name, "by-x") == ["x1024", "x1025", "x2048"]
    add_gsi(ddb, table_name, "by-c-x", [("c", "HASH"), ("x", "RANGE")])
    # A sort key value up to 1024 bytes.
    assert scan_keys(ddb, table_name, "by-c-x") == ["x1024"]
    # New writes are checked instead: an index key of the wrong type is refused.
    code, message = failure(
        ddb.put_item,
        TableName=table_name,
        Item={"pk": {"S": "late"}, "c": {"S": "c"}, "x": {"N": "2"}},
    )
    assert code == "ValidationException"
    assert message.startswith(INVALID + "Type mismatch for Index Key x Expected: S Actual: N")


def test_multi_attribute_backfill_leaves_out_an_oversized_attribute(
    ddb: Any, table_name: str
) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    rows = {"fits": ("t", "a" * 1024), "long": ("t", "a" * 1025), "wide": ("t" * 2049, "a")}
    for pk, (tenant, rank) in rows.items():
        item = {"pk": {"S": pk}, "tenant": {"S": tenant}, "area": {"S": "eu"}, "rank": {"S": rank}}
        ddb.put_item(TableName=table_name, Item=item)
    add_gsi(ddb, table_name, "by-place", [("tenant", "HASH"), ("area", "HASH"), ("rank", "RANGE")])
    assert scan_keys(ddb, table_name, "by-place") == ["fits"]


def test_a_gsi_beside_an_lsi_and_a_taken_name(ddb: Any, table_name: str) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "c", "AttributeType": "S"},
            {"AttributeName": "x", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "c", "KeyType": "RANGE"},
        ],
        LocalSecondaryIndexes=[
            {
                "IndexName": "lsi",
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "x", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for n in range(5):
        item = {"pk": {"S": f"p{n}"}, "c": {"S": "c"}, "x": {"S": f"x{n % 2}"}}
        ddb.put_item(TableName=table_name, Item=item)
    add_gsi(ddb, table_name, "gsi", [("x", "HASH")])
    assert scan_keys(ddb, table_name, "gsi") == [f"p{n}" for n in range(5)]
    query = ddb.query(
        TableName=table_name,
        IndexName="gsi",
        KeyConditionExpression="x = :x",
        ExpressionAttributeValues={":x": {"S": "x1"}},
    )
    assert sorted(i["pk"]["S"] for i in query["Items"]) == ["p1", "p3"]
    for taken in ("gsi", "lsi"):
        assert failure(
            ddb.update_table,
            TableName=table_name,
            AttributeDefinitions=[{"AttributeName": "y", "AttributeType": "S"}],
            GlobalSecondaryIndexUpdates=[
                {
                    "Create": {
                        "IndexName": taken,
                        "KeySchema": [{"AttributeName": "y", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                }
            ],
        ) == ("ValidationException", INVALID + f"Global Secondary Index already exists: {taken}")
    ddb.update_table(
        TableName=table_name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "gsi"}}]
    )
    wait_gone(ddb, table_name, "gsi")
    code, message = failure(
        ddb.query,
        TableName=table_name,
        IndexName="gsi",
        KeyConditionExpression="x = :x",
        ExpressionAttributeValues={":x": {"S": "x1"}},
    )
    assert code == "ValidationException" and "gsi" in message
    # x is still the LSI's sort key: a number there is still refused.
    code, message = failure(
        ddb.put_item,
        TableName=table_name,
        Item={"pk": {"S": "p9"}, "c": {"S": "c"}, "x": {"N": "7"}},
    )
    assert (code, "mismatch" in message) == ("ValidationException", True)
    assert (
        failure(
            ddb.update_table,
            TableName=table_name,
            GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "gsi"}}],
        )[0]
        == "ResourceNotFoundException"
    )


def test_a_repeated_key_attribute_is_named_before_an_unused_definition(
    ddb: Any, table_name: str
) -> None:
    code, message = failure(
        ddb.create_table,
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "a", "AttributeType": "S"},
            {"AttributeName": "b", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "gsi",
                "KeySchema": [
                    {"AttributeName": "a", "KeyType": "HASH"},
                    {"AttributeName": "a", "KeyType": "HASH"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    assert (code, message) == (
        "ValidationException",
        "The KeySchema contains multiple key attributes with the same name",
    )
