"""Item semantics found by comparison with DynamoDB, through boto3 in process and over HTTP:
updates of absent items that only remove, attribute name size limits everywhere a name can
appear, duplicate keys in TransactGetItems, DeleteTable's description.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

# Measured on DynamoDB (ExtendDB issue #365, 2026-09): the limit is 65535 bytes.
TOO_LARGE = (
    "1 validation error detected: Attribute name is too large, must be less than 65536 bytes"
)
LONG = "n" * 65536
LONGEST = "n" * 65535


@pytest.fixture
def table(ddb: Any, table_name: str) -> tuple[Any, str]:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return ddb, table_name


def key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}}


def get(ddb: Any, name: str, pk: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = ddb.get_item(
        TableName=name, Key=key(pk), ConsistentRead=True
    ).get("Item")
    return item


def failure(call: Any, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def test_removing_from_an_absent_item_creates_nothing(table: tuple[Any, str]) -> None:
    ddb, name = table
    removed = ddb.update_item(
        TableName=name, Key=key("a"), UpdateExpression="REMOVE x, y", ReturnValues="ALL_NEW"
    )
    assert "Attributes" not in removed
    assert get(ddb, name, "a") is None
    ddb.update_item(
        TableName=name,
        Key=key("b"),
        UpdateExpression="DELETE tags :t",
        ExpressionAttributeValues={":t": {"SS": ["x"]}},
    )
    assert get(ddb, name, "b") is None
    # The legacy twin: AttributeUpdates that only delete.
    ddb.update_item(TableName=name, Key=key("c"), AttributeUpdates={"x": {"Action": "DELETE"}})
    assert get(ddb, name, "c") is None
    ddb.transact_write_items(
        TransactItems=[
            {"Update": {"TableName": name, "Key": key("d"), "UpdateExpression": "REMOVE x"}}
        ]
    )
    assert get(ddb, name, "d") is None
    # An update with no action at all still creates the item (just its key), as DynamoDB does.
    created = ddb.update_item(TableName=name, Key=key("e"), ReturnValues="ALL_NEW")
    assert created["Attributes"] == key("e")
    assert get(ddb, name, "e") == key("e")
    # A removal together with a SET creates the item.
    ddb.update_item(
        TableName=name,
        Key=key("f"),
        UpdateExpression="SET v = :v REMOVE x",
        ExpressionAttributeValues={":v": {"N": "1"}},
    )
    assert get(ddb, name, "f") == {**key("f"), "v": {"N": "1"}}


def test_attribute_names_are_held_to_dynamodbs_limit(table: tuple[Any, str]) -> None:
    ddb, name = table
    ddb.put_item(TableName=name, Item={**key("ok"), LONGEST: {"S": "v"}})
    nested = {**key("nested"), "doc": {"M": {"inner": {"L": [{"M": {LONG: {"N": "1"}}}]}}}}
    for item in ({**key("top"), LONG: {"S": "v"}}, nested):
        assert failure(ddb.put_item, TableName=name, Item=item) == (
            "ValidationException",
            TOO_LARGE,
        )
        assert failure(
            ddb.batch_write_item, RequestItems={name: [{"PutRequest": {"Item": item}}]}
        ) == ("ValidationException", TOO_LARGE)
        assert failure(
            ddb.transact_write_items, TransactItems=[{"Put": {"TableName": name, "Item": item}}]
        ) == ("ValidationException", TOO_LARGE)
    assert failure(
        ddb.update_item,
        TableName=name,
        Key=key("ok"),
        UpdateExpression="SET #n = :v",
        ExpressionAttributeNames={"#n": LONG},
        ExpressionAttributeValues={":v": {"S": "v"}},
    ) == ("ValidationException", TOO_LARGE)
    assert failure(
        ddb.update_item,
        TableName=name,
        Key=key("ok"),
        UpdateExpression="SET doc = :v",
        ExpressionAttributeValues={":v": {"M": {LONG: {"S": "v"}}}},
    ) == ("ValidationException", TOO_LARGE)
    assert failure(
        ddb.get_item,
        TableName=name,
        Key=key("ok"),
        ProjectionExpression="#n",
        ExpressionAttributeNames={"#n": LONG},
    ) == ("ValidationException", TOO_LARGE)
    # Legacy parameters name attributes too.
    assert failure(
        ddb.update_item,
        TableName=name,
        Key=key("ok"),
        AttributeUpdates={LONG: {"Action": "PUT", "Value": {"S": "v"}}},
    ) == ("ValidationException", TOO_LARGE)
    assert failure(
        ddb.delete_item, TableName=name, Key=key("ok"), Expected={LONG: {"Exists": False}}
    ) == ("ValidationException", TOO_LARGE)
    assert failure(ddb.get_item, TableName=name, Key=key("ok"), AttributesToGet=[LONG]) == (
        "ValidationException",
        TOO_LARGE,
    )
    # Nothing was written by any of them; the longest name is fine everywhere.
    assert [i["pk"]["S"] for i in ddb.scan(TableName=name)["Items"]] == ["ok"]
    got = ddb.get_item(
        TableName=name,
        Key=key("ok"),
        ProjectionExpression="#n",
        ExpressionAttributeNames={"#n": LONGEST},
    )
    assert got["Item"] == {LONGEST: {"S": "v"}}


def test_transact_get_items_refuses_one_item_twice(table: tuple[Any, str]) -> None:
    ddb, name = table
    ddb.put_item(TableName=name, Item=key("a"))
    get_a = {"Get": {"TableName": name, "Key": key("a")}}
    assert failure(ddb.transact_get_items, TransactItems=[get_a, get_a]) == (
        "ValidationException",
        "Transaction request cannot include multiple operations on one item",
    )


def test_delete_table_describes_the_table_without_its_gsis(ddb: Any, table_name: str) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName=table_name, Item={**key("a"), "g": {"S": "x"}})
    deleted = ddb.delete_table(TableName=table_name)["TableDescription"]
    assert deleted["TableStatus"] == "DELETING"
    assert deleted["TableName"] == table_name and deleted["ItemCount"] == 1
    assert "GlobalSecondaryIndexes" not in deleted  # dynalite's tests, run against DynamoDB
    with pytest.raises(ClientError):
        ddb.describe_table(TableName=table_name)
