"""Answers checked against DynamoDB's own, one request each: through boto3, in process and over
HTTP (the ``ddb`` fixture). Each test's docstring names where DynamoDB's answer was recorded."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.values import MAX_NESTING

UNCHECKED = Config(retries={"total_max_attempts": 1}, parameter_validation=False)


def _error(call: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        call()
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def _transport(request: pytest.FixtureRequest) -> str:
    return str(request.node.callspec.params["ddb"])


@pytest.fixture
def unchecked(request: pytest.FixtureRequest, make_ddb: Any, ddb: Any) -> Any:
    """A client of the same transport as ``ddb`` that sends what botocore would refuse."""
    return make_ddb(_transport(request), config=UNCHECKED)


@pytest.fixture
def streams(request: pytest.FixtureRequest, make_ddb: Any, ddb: Any) -> Any:
    return make_ddb(_transport(request), service_name="dynamodbstreams")


def _hash_table(ddb: Any, name: str, **extra: Any) -> dict[str, Any]:
    extra.setdefault("BillingMode", "PAY_PER_REQUEST")
    answer: dict[str, Any] = ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        **extra,
    )
    return answer["TableDescription"]


@pytest.mark.parametrize("billing", [{}, {"BillingMode": "PROVISIONED"}])
def test_update_table_to_the_same_throughput_is_refused(
    ddb: Any, table_name: str, billing: dict[str, str]
) -> None:
    """dynalite test/updateTable.js, "should return ValidationException if read and write are
    same" (recorded against DynamoDB): the whole message, units included. Its recording sends
    ProvisionedThroughput alone; with ``BillingMode: PROVISIONED`` on a provisioned table the
    request changes nothing either, and issue #28 reports DynamoDB's answer as the same
    ValidationException."""
    _hash_table(
        ddb,
        table_name,
        BillingMode="PROVISIONED",
        ProvisionedThroughput={"ReadCapacityUnits": 3, "WriteCapacityUnits": 4},
    )
    code, message = _error(
        lambda: ddb.update_table(
            TableName=table_name,
            ProvisionedThroughput={"ReadCapacityUnits": 3, "WriteCapacityUnits": 4},
            **billing,
        )
    )
    assert code == "ValidationException"
    assert message == (
        "The provisioned throughput for the table will not change. The requested value equals "
        "the current value. Current ReadCapacityUnits provisioned for the table: 3. Requested "
        "ReadCapacityUnits: 3. Current WriteCapacityUnits provisioned for the table: 4. "
        "Requested WriteCapacityUnits: 4. Refer to the Amazon DynamoDB Developer Guide for "
        "current limits and how to request higher limits."
    )


@pytest.mark.parametrize(
    ("definitions", "message"),
    [
        # One definition for two key elements: the count comes first (the conformance suite,
        # tests/tier3/error-messages/createTable.test.ts "duplicate attribute in KeySchema").
        (["pk"], "Invalid KeySchema: Some index key attribute have no definition"),
        # As many definitions as key elements: dynalite test/createTable.js, "should return
        # ValidationException for hash key and range key having same name".
        (
            ["pk", "other"],
            "Both the Hash Key and the Range Key element in the KeySchema have the same name",
        ),
    ],
)
def test_a_key_schema_naming_one_attribute_twice_is_refused(
    ddb: Any, table_name: str, definitions: list[str], message: str
) -> None:
    code, got = _error(
        lambda: ddb.create_table(
            TableName=table_name,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "pk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in definitions],
            BillingMode="PAY_PER_REQUEST",
        )
    )
    assert (code, got) == ("ValidationException", message)


def test_fewer_definitions_than_key_elements_come_before_the_key_types(
    ddb: Any, table_name: str
) -> None:
    """dynalite test/createTable.js, "should return ValidationException for missing key
    attribute definitions": no definitions and two HASH elements (which would otherwise be
    "The second KeySchemaElement is not a RANGE key type")."""
    code, message = _error(
        lambda: ddb.create_table(
            TableName=table_name,
            KeySchema=[
                {"AttributeName": "a", "KeyType": "HASH"},
                {"AttributeName": "a", "KeyType": "HASH"},
            ],
            AttributeDefinitions=[],
            BillingMode="PAY_PER_REQUEST",
        )
    )
    assert (code, message) == (
        "ValidationException",
        "Invalid KeySchema: Some index key attribute have no definition",
    )


def test_a_duplicated_attribute_definition_has_no_prefix(ddb: Any, table_name: str) -> None:
    """DynamoDB answers ``Attribute Name is duplicated: x`` with no "One or more parameter
    values were invalid" before it: the CLI's output quoted in scylladb/scylladb issue #13870,
    and ack-api-quirks' DDB-TABLE-042 (a live probe, 2026-10: the same text whether the two
    definitions agree on the type or not)."""
    for second_type in ("S", "N"):
        code, message = _error(
            lambda t=second_type: ddb.create_table(
                TableName=table_name,
                KeySchema=[{"AttributeName": "x", "KeyType": "HASH"}],
                AttributeDefinitions=[
                    {"AttributeName": "x", "AttributeType": "S"},
                    {"AttributeName": "x", "AttributeType": t},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        )
        assert (code, message) == ("ValidationException", "Attribute Name is duplicated: x")


_OLD_LIMIT = "Value '0' at 'limit'"
_NEW_LIMIT = "Value at 'Limit'"


@pytest.mark.parametrize(
    ("method", "extra", "worded"),
    [
        ("list_tables", {}, _OLD_LIMIT),
        ("scan", {"TableName": "limit-zero"}, _OLD_LIMIT),
        (
            "query",
            {
                "TableName": "limit-zero",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "a"}},
            },
            _NEW_LIMIT,
        ),
    ],
)
def test_a_limit_of_zero_is_refused(
    unchecked: Any, method: str, extra: dict[str, Any], worded: str
) -> None:
    """dynalite test/listTables.js, "should return ValidationException for low Limit": the
    model's constraint in DynamoDB's words (botocore refuses it before sending; this client
    does not check). Query words it the newer way, the model's name and no value: today's
    DynamoDB as the conformance suite records it (nubo-db/dynamodb-conformance,
    tests/tier3/error-messages/query.test.ts "Limit of 0"; scan.test.ts keeps the older form)."""
    code, message = _error(lambda: getattr(unchecked, method)(Limit=0, **extra))
    assert (code, message) == (
        "ValidationException",
        f"1 validation error detected: {worded} failed to satisfy constraint: "
        "Member must have value greater than or equal to 1",
    )


@pytest.mark.parametrize("method", ["tag_resource", "untag_resource", "list_tags_of_resource"])
def test_a_tag_operation_with_an_empty_body_is_an_invalid_table_arn(
    unchecked: Any, method: str
) -> None:
    """dynalite test/tagResource.js, untagResource.js and listTagsOfResource.js, "should
    return ValidationException for no ResourceArn": ``{}`` is ``Invalid TableArn``, before
    the missing Tags or TagKeys are reported."""
    assert _error(getattr(unchecked, method)) == ("ValidationException", "Invalid TableArn")


def test_delete_table_describes_the_table_without_its_schema(ddb: Any, table_name: str) -> None:
    """The answer is the table's description with ``TableStatus`` DELETING (dynalite
    test/deleteTable.js, "should eventually delete") without the key schema, the attribute
    definitions, the creation time and the indexes, GSIs and LSIs alike: today's DynamoDB, as
    ScyllaDB's test_delete_table_description and test_delete_table_description_with_si
    record it (they pass on DynamoDB; dynalite's older record kept all but the GSIs)."""
    ddb.create_table(
        TableName=table_name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        LocalSecondaryIndexes=[
            {
                "IndexName": "by-pk-g",
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "g", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
    )
    described = ddb.delete_table(TableName=table_name)["TableDescription"]
    assert described["TableStatus"] == "DELETING"
    assert described["TableName"] == table_name
    assert {"TableArn", "TableId", "ProvisionedThroughput", "BillingModeSummary"} <= set(described)
    assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert (described["ItemCount"], described["TableSizeBytes"]) == (0, 0)
    left_out = {
        "KeySchema",
        "AttributeDefinitions",
        "CreationDateTime",
        "GlobalSecondaryIndexes",
        "LocalSecondaryIndexes",
    }
    assert not left_out & set(described)


def test_list_streams_pages_and_its_last_page_has_no_last_evaluated_arn(
    ddb: Any, streams: Any, table_name: str
) -> None:
    """DynamoDB Streams API reference, ListStreams: "If LastEvaluatedStreamArn is empty, then
    the 'last page' of results has been processed and there is no more data to be
    retrieved". A table whose stream was switched off and on again has two streams."""
    spec = {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    _hash_table(ddb, table_name, StreamSpecification=spec)
    ddb.update_table(TableName=table_name, StreamSpecification={"StreamEnabled": False})
    ddb.update_table(TableName=table_name, StreamSpecification=spec)
    everything = streams.list_streams(TableName=table_name)
    assert len(everything["Streams"]) == 2
    assert "LastEvaluatedStreamArn" not in everything
    first = streams.list_streams(TableName=table_name, Limit=1)
    assert first["LastEvaluatedStreamArn"] == first["Streams"][0]["StreamArn"]
    last = streams.list_streams(
        TableName=table_name, Limit=1, ExclusiveStartStreamArn=first["LastEvaluatedStreamArn"]
    )
    assert first["Streams"] + last["Streams"] == everything["Streams"]
    assert "LastEvaluatedStreamArn" not in last


def test_describe_stream_checks_its_shard_filter(
    ddb: Any, request: pytest.FixtureRequest, make_ddb: Any, table_name: str
) -> None:
    """DynamoDB Streams API reference, ShardFilter: ``Type`` takes only ``CHILD_SHARDS`` and
    ``ShardId`` is 28 to 65 characters; DynamoDB reports both in its constraint form."""
    spec = {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    arn = _hash_table(ddb, table_name, StreamSpecification=spec)["LatestStreamArn"]
    unchecked = make_ddb(_transport(request), service_name="dynamodbstreams", config=UNCHECKED)
    code, message = _error(
        lambda: unchecked.describe_stream(
            StreamArn=arn, ShardFilter={"Type": "PARENT_SHARDS", "ShardId": "shardId-1"}
        )
    )
    assert (code, message) == (
        "ValidationException",
        "2 validation errors detected: Value 'PARENT_SHARDS' at 'shardFilter.type' failed to "
        "satisfy constraint: Member must satisfy enum value set: [CHILD_SHARDS]; Value "
        "'shardId-1' at 'shardFilter.shardId' failed to satisfy constraint: Member must have "
        "length greater than or equal to 28",
    )
    # A filter needs both members (ScyllaDB's test_stream_shard_filtering_missing_type and
    # _missing_shard_id, which pass on DynamoDB; the model marks neither required).
    shard = unchecked.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    for shard_filter, member in (
        ({"ShardId": shard}, "type"),
        ({"Type": "CHILD_SHARDS"}, "shardId"),
    ):
        code, message = _error(
            lambda f=shard_filter: unchecked.describe_stream(StreamArn=arn, ShardFilter=f)
        )
        assert (code, message) == (
            "ValidationException",
            f"1 validation error detected: Value null at 'shardFilter.{member}' failed to "
            "satisfy constraint: Member must not be null",
        )


def test_an_update_giving_one_gsi_key_attribute_leaves_the_item_out_of_the_index(
    ddb: Any, table_name: str
) -> None:
    """AWS Developer Guide, "Take advantage of sparse indexes": an item is written to a GSI
    only if it has every attribute of the index's key; an UpdateItem that gives one of them is
    not an error. A value of the wrong type for the one it gives is refused, as for a full key
    (dynalite test/updateItem.js, "should return ValidationException if trying to update wrong
    type on index")."""
    ddb.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
            {"AttributeName": "h", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g-h",
                "KeySchema": [
                    {"AttributeName": "g", "KeyType": "HASH"},
                    {"AttributeName": "h", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    ddb.update_item(
        TableName=table_name,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET g = :g",
        ExpressionAttributeValues={":g": {"S": "x"}},
    )
    assert ddb.scan(TableName=table_name, IndexName="by-g-h")["Items"] == []
    code, message = _error(
        lambda: ddb.update_item(
            TableName=table_name,
            Key={"pk": {"S": "a"}},
            UpdateExpression="SET h = :h",
            ExpressionAttributeValues={":h": {"S": "not a number"}},
        )
    )
    assert code == "ValidationException"
    assert message.startswith(
        "One or more parameter values were invalid: Type mismatch for Index Key h Expected: N "
        "Actual: S IndexName: by-g-h"
    )
    ddb.update_item(
        TableName=table_name,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET h = :h",
        ExpressionAttributeValues={":h": {"N": "1"}},
    )
    [indexed] = ddb.scan(TableName=table_name, IndexName="by-g-h")["Items"]
    assert indexed == {"pk": {"S": "a"}, "g": {"S": "x"}, "h": {"N": "1"}}


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"S": "leaf"}
    for _ in range(levels):
        value = {"M": {"n": value}}
    return value


def test_the_nesting_limit_is_32_levels(ddb: Any, table_name: str) -> None:
    """DynamoDB's answer captured in eu-west-2 (2026): a value wrapped in 31 maps (its leaf at
    level 32, the attribute being level 1) is stored, 32 maps are refused with ``Nesting Levels
    have exceeded supported limits: Attributes in the item have nested levels beyond supported
    limit``; the same value in ExpressionAttributeValues is refused too (the capture checks
    only that its message speaks of nesting levels)."""
    _hash_table(ddb, table_name)
    deepest = MAX_NESTING - 1
    ddb.put_item(TableName=table_name, Item={"pk": {"S": "ok"}, "d": _nested(deepest)})
    got = ddb.get_item(TableName=table_name, Key={"pk": {"S": "ok"}})["Item"]["d"]
    assert got == _nested(deepest)
    too_deep = (
        "ValidationException",
        "Nesting Levels have exceeded supported limits: Attributes in the item have nested "
        "levels beyond supported limit",
    )
    put = {"pk": {"S": "deep"}, "d": _nested(deepest + 1)}
    assert _error(lambda: ddb.put_item(TableName=table_name, Item=put)) == too_deep
    code, message = _error(
        lambda: ddb.update_item(
            TableName=table_name,
            Key={"pk": {"S": "ok"}},
            UpdateExpression="SET t = :t",
            ConditionExpression="d = :deep",
            ExpressionAttributeValues={":t": {"S": "y"}, ":deep": _nested(deepest + 1)},
        )
    )
    # In DynamoDB's wrapping of a bad value in ExpressionAttributeValues.
    assert (code, message) == (
        "ValidationException",
        f"ExpressionAttributeValues contains invalid value: {too_deep[1]} for key :deep",
    )


def _table_with_gsi_and_lsi(ddb: Any, name: str) -> None:
    """ScyllaDB's test_gsi_delete_with_lsi table: ``x`` is an LSI's range key and a GSI's
    partition key."""
    ddb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "p", "KeyType": "HASH"},
            {"AttributeName": "c", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "p", "AttributeType": "S"},
            {"AttributeName": "c", "AttributeType": "S"},
            {"AttributeName": "x", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        LocalSecondaryIndexes=[
            {
                "IndexName": "lsi",
                "KeySchema": [
                    {"AttributeName": "p", "KeyType": "HASH"},
                    {"AttributeName": "x", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "gsi",
                "KeySchema": [{"AttributeName": "x", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )


def test_a_gsi_create_may_not_give_a_key_attribute_another_type(ddb: Any, table_name: str) -> None:
    """ScyllaDB's test/alternator/test_gsi_updatetable.py, test_gsi_key_type_conflict_on_update,
    quotes DynamoDB: ``One or more parameter values were invalid: Attributes cannot be
    redefined. Please check that your attribute has the same type as previously defined.
    Existing schema: Schema:[SchemaElement: key{xyz:S:HASH}] New schema:
    Schema:[SchemaElement: key{xyz:N:HASH}]`` (the existing schema is the key that uses the
    attribute). The same entry for an attribute the new key does not use is ignored (the
    ack-api-quirks DynamoDB probe, DDB-TABLE-162)."""
    _table_with_gsi_and_lsi(ddb, table_name)
    code, message = _error(
        lambda: ddb.update_table(
            TableName=table_name,
            AttributeDefinitions=[{"AttributeName": "x", "AttributeType": "N"}],
            GlobalSecondaryIndexUpdates=[
                {
                    "Create": {
                        "IndexName": "gsi-2",
                        "KeySchema": [{"AttributeName": "x", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                }
            ],
        )
    )
    assert (code, message) == (
        "ValidationException",
        "One or more parameter values were invalid: Attributes cannot be redefined. Please "
        "check that your attribute has the same type as previously defined. Existing schema: "
        "Schema:[SchemaElement: key{x:S:HASH}] New schema: Schema:[SchemaElement: key{x:N:HASH}]",
    )
    described = ddb.describe_table(TableName=table_name)["Table"]
    assert [i["IndexName"] for i in described["GlobalSecondaryIndexes"]] == ["gsi"]


def test_deleting_a_gsi_keeps_the_definition_an_lsi_still_uses(ddb: Any, table_name: str) -> None:
    """ScyllaDB's test/alternator/test_gsi_updatetable.py, test_gsi_delete_with_lsi (run
    against DynamoDB too): once the GSI on ``x`` is deleted, ``x`` is still the LSI's key of
    type S, so an item with a number there is refused as a type mismatch, and the GSI cannot be
    deleted twice."""
    _table_with_gsi_and_lsi(ddb, table_name)
    ddb.update_table(
        TableName=table_name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "gsi"}}]
    )
    # The deletion runs in the background (the table is UPDATING meanwhile, when a second
    # UpdateTable is ResourceInUseException): wait until the index is gone.
    deadline = time.monotonic() + 30
    while True:
        described = ddb.describe_table(TableName=table_name)["Table"]
        if not described.get("GlobalSecondaryIndexes") and described["TableStatus"] == "ACTIVE":
            break
        assert time.monotonic() < deadline, described
        time.sleep(0.05)
    assert {"AttributeName": "x", "AttributeType": "S"} in described["AttributeDefinitions"]
    code, message = _error(
        lambda: ddb.put_item(
            TableName=table_name,
            Item={"p": {"S": "a"}, "c": {"S": "b"}, "x": {"N": "7"}},
        )
    )
    assert code == "ValidationException"
    assert "mismatch" in message
    code, _ = _error(
        lambda: ddb.update_table(
            TableName=table_name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "gsi"}}]
        )
    )
    assert code == "ResourceNotFoundException"


def test_an_update_with_no_action_creates_the_item_with_its_key(ddb: Any, table_name: str) -> None:
    """dynalite test/updateItem.js, "should just add item with key if no action" (run against
    DynamoDB); the API reference's UpdateItem "adds a new item to the table if it does not
    already exist". An empty AttributeUpdates is no action too; an update that only removes
    creates nothing (test_nested_attribute_remove_from_missing_item in ScyllaDB's suite)."""
    _hash_table(ddb, table_name)
    ddb.update_item(TableName=table_name, Key={"pk": {"S": "bare"}})
    answer = ddb.update_item(
        TableName=table_name,
        Key={"pk": {"S": "empty"}},
        AttributeUpdates={},
        ReturnValues="ALL_NEW",
    )
    assert answer["Attributes"] == {"pk": {"S": "empty"}}
    ddb.update_item(
        TableName=table_name, Key={"pk": {"S": "removed"}}, UpdateExpression="REMOVE a.b"
    )
    items = ddb.scan(TableName=table_name, ConsistentRead=True)["Items"]
    assert sorted(item["pk"]["S"] for item in items) == ["bare", "empty"]


@pytest.mark.parametrize("expression", ["REMOVE pk", "DELETE pk :set", "ADD pk :n", "SET pk = :n"])
def test_a_key_attribute_is_refused_whether_the_item_exists_or_not(
    ddb: Any, table_name: str, expression: str
) -> None:
    """DynamoDB refuses an update of a key attribute on a missing item too (ScyllaDB's
    test_update_expression_cannot_modify_key, which passes on DynamoDB); the words are
    DynamoDB's for an existing item (dynalite test/updateItem.js, "should return
    ValidationException if trying to update key")."""
    _hash_table(ddb, table_name)
    values = {k: v for k, v in {":set": {"SS": ["x"]}, ":n": {"N": "1"}}.items() if k in expression}
    code, message = _error(
        lambda: ddb.update_item(
            TableName=table_name,
            Key={"pk": {"S": "missing"}},
            UpdateExpression=expression,
            **({"ExpressionAttributeValues": values} if values else {}),
        )
    )
    assert (code, message) == (
        "ValidationException",
        "One or more parameter values were invalid: Cannot update attribute pk. "
        "This attribute is part of the key",
    )
    assert ddb.scan(TableName=table_name)["Items"] == []


def test_a_query_of_a_table_without_a_sort_key_takes_no_start_key(
    ddb: Any, table_name: str
) -> None:
    """Such a Query reads one item, so nothing can follow an ExclusiveStartKey: DynamoDB
    refuses it, "The provided exclusive start key is invalid: ExclusiveStartKey:
    {p=AttributeValue: {S:...}}" (quoted in ScyllaDB's
    test_query_no_sort_key_exclusive_start_key, which passes on DynamoDB). Scan takes it."""
    _hash_table(ddb, table_name)
    ddb.put_item(TableName=table_name, Item={"pk": {"S": "a"}})
    code, message = _error(
        lambda: ddb.query(
            TableName=table_name,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "a"}},
            ExclusiveStartKey={"pk": {"S": "a"}},
        )
    )
    assert (code, message) == (
        "ValidationException",
        "The provided exclusive start key is invalid: ExclusiveStartKey: "
        "{pk=AttributeValue: {S:a}}",
    )
    assert ddb.scan(TableName=table_name, ExclusiveStartKey={"pk": {"S": "a"}})["Count"] == 0


def test_an_empty_attribute_name_is_refused_wherever_it_is_named(ddb: Any, table_name: str) -> None:
    """An attribute name may not be empty (the Developer Guide's naming rules: names are at
    least one character long). Through ExpressionAttributeNames DynamoDB says which key
    ("ExpressionAttributeNames contains invalid value: Empty attribute name for key #n", the
    text applications match, e.g. a published front end checks it for its "#DE" key);
    elsewhere "Empty attribute name" as for an item's (ScyllaDB's
    test_limit_attribute_length_nonkey_empty, which passes on DynamoDB)."""
    _hash_table(ddb, table_name)
    key = {"pk": {"S": "k"}}
    named = {
        "ExpressionAttributeNames": {"#n": ""},
        "ExpressionAttributeValues": {":v": {"N": "1"}},
    }
    attempts = [
        (
            lambda: ddb.get_item(
                TableName=table_name,
                Key=key,
                ProjectionExpression="#n",
                ExpressionAttributeNames={"#n": ""},
            ),
            True,
        ),
        (
            lambda: ddb.update_item(
                TableName=table_name, Key=key, UpdateExpression="SET #n = :v", **named
            ),
            True,
        ),
        (
            lambda: ddb.update_item(
                TableName=table_name,
                Key=key,
                UpdateExpression="SET a = :v",
                ConditionExpression="#n = :v",
                **named,
            ),
            True,
        ),
        (lambda: ddb.get_item(TableName=table_name, Key=key, AttributesToGet=[""]), False),
        (
            lambda: ddb.update_item(
                TableName=table_name,
                Key=key,
                AttributeUpdates={"": {"Value": {"N": "2"}, "Action": "PUT"}},
            ),
            False,
        ),
        (lambda: ddb.put_item(TableName=table_name, Item={**key, "": {"N": "1"}}), False),
    ]
    for attempt, through_names in attempts:
        code, message = _error(attempt)
        assert code == "ValidationException"
        assert message == (
            "ExpressionAttributeNames contains invalid value: Empty attribute name for key #n"
            if through_names
            else "One or more parameter values were invalid: Empty attribute name"
        )
    assert ddb.scan(TableName=table_name)["Items"] == []


def test_update_table_checks_definition_name_lengths_before_their_use(
    unchecked: Any, table_name: str
) -> None:
    """An UpdateTable defining a 256-byte attribute name that its new GSI does not use is refused
    for the name's length, not for the mismatch (ScyllaDB's test_limits.py,
    test_limit_gsiu_key_len_bad_incoherent_names, run against DynamoDB: "DynamoDB returns
    attribute name length-related errors, ignoring the issues with the consistency")."""
    _hash_table(unchecked, table_name)
    long_name = "n" * 256
    code, message = _error(
        lambda: unchecked.update_table(
            TableName=table_name,
            AttributeDefinitions=[{"AttributeName": long_name, "AttributeType": "S"}],
            GlobalSecondaryIndexUpdates=[
                {
                    "Create": {
                        "IndexName": "hello",
                        "KeySchema": [{"AttributeName": "short", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                }
            ],
        )
    )
    assert code == "ValidationException"
    assert message == (
        f"1 validation error detected: Value '{long_name}' at "
        "'attributeDefinitions.1.member.attributeName' failed to satisfy constraint: Member must "
        "have length less than or equal to 255"
    )
