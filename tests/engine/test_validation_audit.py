"""The validation audit of issue 13: how DynamoDB words a missing or mis-sized TableName on the
table operations apart from constraint violations, how it prints a list of structures in a
constraint message, and how many constraint errors it reports at once. Through boto3 (its
own parameter validation off, so the engine sees what a raw client could send), in process and
over HTTP.

Sources: dynalite's validations (``required``/``tableName``, ``checkValidations``) and its tests
test/describeTable.js, test/createTable.js, which run against DynamoDB; moto's
test_too_many_key_schema_attributes for the ``KeySchemaElement(...)`` form; for CreateTable's
TableName and an empty TableName, today's DynamoDB as the conformance suite
(nubo-db/dynamodb-conformance) records it: tests/tier3/error-messages/createTable.test.ts and
putItem.test.ts, tests/tier3/validation-ordering/createTable.test.ts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.wire import wire_call

RAW = Config(retries={"total_max_attempts": 1}, parameter_validation=False)
REQUIRED = "The parameter 'TableName' is required but was not present in the request"
LENGTH = "TableName must be at least 3 characters long and at most 255 characters long"
PATTERN = (
    "1 validation error detected: Value 'abc;' at 'tableName' failed to satisfy constraint: "
    "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"
)


@pytest.fixture(params=["inprocess", "http"])
def raw(request: pytest.FixtureRequest, make_ddb: Callable[..., Any]) -> Any:
    return make_ddb(request.param, config=RAW)


def failure(call: Any, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    error = info.value.response["Error"]
    return error["Code"], error["Message"]


KEY = [{"AttributeName": "pk", "KeyType": "HASH"}]
DEFINITIONS = [{"AttributeName": "pk", "AttributeType": "S"}]
CREATE = {"AttributeDefinitions": DEFINITIONS, "KeySchema": KEY, "BillingMode": "PAY_PER_REQUEST"}


@pytest.mark.parametrize(
    ("operation", "extra"),
    [
        ("describe_table", {}),
        ("delete_table", {}),
        ("describe_time_to_live", {}),
        ("update_table", {"BillingMode": "PAY_PER_REQUEST"}),
    ],
)
@pytest.mark.parametrize(
    ("name", "message"),
    [(None, REQUIRED), ("ab", LENGTH), ("", LENGTH), ("a" * 256, LENGTH), ("abc;", PATTERN)],
)
def test_table_operations_word_the_table_name_apart(
    raw: Any, operation: str, extra: dict[str, Any], name: str | None, message: str
) -> None:
    params = dict(extra)
    if name is not None:
        params["TableName"] = name
    assert failure(getattr(raw, operation), **params) == ("ValidationException", message)


def _name_constraint(name: str, *rules: str) -> str:
    count = f"{len(rules)} validation error{'s' if len(rules) > 1 else ''} detected: "
    return count + "; ".join(
        f"Value '{name}' at 'tableName' failed to satisfy constraint: Member must {rule}"
        for rule in rules
    )


SHORTER = "have length greater than or equal to 3"
PATTERN_RULE = "satisfy regular expression pattern: [a-zA-Z0-9_.-]+"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (None, REQUIRED),
        ("ab", _name_constraint("ab", SHORTER)),
        ("", _name_constraint("", "have length greater than or equal to 1")),
        ("a" * 256, _name_constraint("a" * 256, "have length less than or equal to 255")),
        ("abc;", PATTERN),
        ("x!", _name_constraint("x!", SHORTER, PATTERN_RULE)),
    ],
)
def test_create_table_words_the_table_name_as_a_constraint(
    raw: Any, name: str | None, message: str
) -> None:
    """Today's DynamoDB: a missing TableName in its sentence, a bad one as constraints on
    ``tableName`` (conformance suite, createTable.test.ts: 'ab' is ``1 validation error
    detected: Value 'ab' at 'tableName' ... length greater than or equal to 3``)."""
    params = dict(CREATE)
    if name is not None:
        params["TableName"] = name
    assert failure(raw.create_table, **params) == ("ValidationException", message)


def test_the_table_name_rule_comes_before_other_constraints(raw: Any) -> None:
    # KeySchema over its length and a bad enum: still the TableName's own errors, alone
    # (conformance suite, validation-ordering/createTable.test.ts: "reports only tableName").
    bad = {**CREATE, "KeySchema": [*KEY, *KEY, *KEY], "BillingMode": "FREE"}
    assert failure(raw.create_table, **bad) == ("ValidationException", REQUIRED)
    assert failure(raw.create_table, TableName="x", **bad) == (
        "ValidationException",
        _name_constraint("x", SHORTER),
    )
    assert failure(raw.create_table, TableName="", KeySchema=[], AttributeDefinitions=[]) == (
        "ValidationException",
        _name_constraint("", "have length greater than or equal to 1"),
    )


def test_an_empty_table_name_breaks_only_the_arn_minimum(raw: Any) -> None:
    # TableName also takes a table's ARN (1 to 1024 characters in the model): an empty one is
    # that one constraint, not the name's length and pattern too (putItem.test.ts).
    assert failure(raw.put_item, TableName="", Item={"pk": {"S": "x"}}) == (
        "ValidationException",
        _name_constraint("", "have length greater than or equal to 1"),
    )


def test_a_member_of_the_wrong_json_type_comes_first(engine: Engine) -> None:
    # (boto3 cannot send these: its endpoint rules want a string TableName.)
    for request in ({"TableName": 5}, {"TableName": 5, "KeySchema": "x"}, {"KeySchema": "x"}):
        status, payload = wire_call(engine, "DynamoDB_20120810.CreateTable", json.dumps(request))
        assert status == 400
        assert json.loads(payload)["__type"].endswith("#SerializationException"), request


def test_item_operations_keep_the_constraint_form(raw: Any) -> None:
    assert failure(raw.get_item, TableName="ab", Key={"pk": {"S": "x"}}) == (
        "ValidationException",
        "1 validation error detected: Value 'ab' at 'tableName' failed to satisfy constraint: "
        "Member must have length greater than or equal to 3",
    )
    assert failure(raw.get_item, Key={"pk": {"S": "x"}}) == (
        "ValidationException",
        "1 validation error detected: Value null at 'tableName' failed to satisfy constraint: "
        "Member must not be null",
    )


def test_a_list_of_structures_is_printed_by_its_shape(raw: Any, table_name: str) -> None:
    three = [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
        {"AttributeName": "other", "KeyType": "RANGE"},
    ]
    code, message = failure(
        raw.create_table,
        TableName=table_name,
        AttributeDefinitions=DEFINITIONS,
        KeySchema=three,
        BillingMode="PAY_PER_REQUEST",
    )
    assert (code, message) == (
        "ValidationException",
        "1 validation error detected: Value '[KeySchemaElement(attributeName=pk, keyType=HASH), "
        "KeySchemaElement(attributeName=sk, keyType=RANGE), "
        "KeySchemaElement(attributeName=other, keyType=RANGE)]' at 'keySchema' failed to "
        "satisfy constraint: Member must have length less than or equal to 2",
    )


def test_at_most_ten_constraint_errors_in_member_order(raw: Any, table_name: str) -> None:
    definitions = [{"AttributeName": f"a{n}", "AttributeType": "X"} for n in range(12)]
    code, message = failure(
        raw.create_table,
        TableName=table_name,
        AttributeDefinitions=definitions,
        KeySchema=KEY,
        BillingMode="PAY_PER_REQUEST",
    )
    assert code == "ValidationException"
    assert message.startswith("10 validation errors detected: ")
    entries = message.removeprefix("10 validation errors detected: ").split("; ")
    assert entries == [
        f"Value 'X' at 'attributeDefinitions.{n}.member.attributeType' failed to satisfy "
        "constraint: Member must satisfy enum value set: [B, N, S]"
        for n in range(1, 11)
    ]


def test_tags_on_the_arn_of_no_table(raw: Any) -> None:
    # DynamoDB's words, its "ResourcArn" typo included (dynalite actions/tagResource.js).
    arn = "arn:aws:dynamodb:us-east-1:000000000000:table/never-created"
    expected = (
        "ResourceNotFoundException",
        f"Requested resource not found: ResourcArn: {arn} not found",
    )
    assert failure(raw.tag_resource, ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}]) == (
        expected
    )
    assert failure(raw.untag_resource, ResourceArn=arn, TagKeys=["k"]) == expected
    assert failure(raw.list_tags_of_resource, ResourceArn=arn) == expected


def test_an_update_table_that_changes_nothing(raw: Any, table_name: str) -> None:
    raw.create_table(TableName=table_name, **CREATE)
    nothing = (
        "ValidationException",
        "At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, "
        "GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required",
    )
    assert failure(raw.update_table, TableName=table_name) == nothing
    # An empty GlobalSecondaryIndexUpdates alone counts as absent (DDB-TABLE-160).
    assert failure(raw.update_table, TableName=table_name, GlobalSecondaryIndexUpdates=[]) == (
        nothing
    )
    # AttributeDefinitions alone changes nothing either (DDB-TABLE-162).
    assert failure(raw.update_table, TableName=table_name, AttributeDefinitions=DEFINITIONS) == (
        nothing
    )


def test_key_values_are_checked_before_the_table_is_looked_for(raw: Any) -> None:
    # dynalite's getItem/deleteItem/updateItem/batchGetItem tests of DynamoDB: a value with
    # two types set is reported even when the table does not exist.
    two_types = (
        "ValidationException",
        "Supplied AttributeValue has more than one datatypes set, must contain exactly one of "
        "the supported datatypes",
    )
    key = {"a": {"S": "a", "N": "1"}}
    assert failure(raw.get_item, TableName="no-such-table", Key=key) == two_types
    assert failure(raw.delete_item, TableName="no-such-table", Key=key) == two_types
    assert failure(raw.update_item, TableName="no-such-table", Key=key) == two_types
    assert failure(raw.batch_get_item, RequestItems={"no-such-table": {"Keys": [key]}}) == (
        two_types
    )
    # A valid key for a table that does not exist is the usual not-found.
    code, _ = failure(raw.get_item, TableName="no-such-table", Key={"a": {"S": "a"}})
    assert code == "ResourceNotFoundException"


def test_an_item_too_large_is_reported_before_the_table_is_looked_for(raw: Any) -> None:
    item = {"a": {"S": "a"}, "b": {"S": "x" * 409_600}}
    assert failure(raw.put_item, TableName="no-such-table", Item=item) == (
        "ValidationException",
        "Item size has exceeded the maximum allowed size",
    )


def test_an_empty_binary_key_is_called_binary(raw: Any, table_name: str) -> None:
    raw.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "a", "AttributeType": "S"},
            {"AttributeName": "b", "AttributeType": "B"},
        ],
        KeySchema=[
            {"AttributeName": "a", "KeyType": "HASH"},
            {"AttributeName": "b", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    binary = (
        "ValidationException",
        "One or more parameter values are not valid. The AttributeValue for a key attribute "
        "cannot contain an empty binary value. Key: b",
    )
    key = {"a": {"S": "a"}, "b": {"B": b""}}
    assert failure(raw.put_item, TableName=table_name, Item=key) == binary
    assert failure(raw.get_item, TableName=table_name, Key=key) == binary


def test_enum_sets_print_in_dynamodbs_order(raw: Any, table_name: str) -> None:
    # DynamoDB lists some enum sets in its own (Java set) order (dynalite's tests).
    _, message = failure(raw.scan, TableName=table_name, ScanFilter={}, ConditionalOperator="AN")
    assert message == (
        "1 validation error detected: Value 'AN' at 'conditionalOperator' failed to satisfy "
        "constraint: Member must satisfy enum value set: [OR, AND]"
    )
    gsi = {
        "IndexName": "gsi",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "SOME"},
    }
    _, message = failure(
        raw.create_table, TableName=table_name, GlobalSecondaryIndexes=[gsi], **CREATE
    )
    assert message == (
        "1 validation error detected: Value 'SOME' at "
        "'globalSecondaryIndexes.1.member.projection.projectionType' failed to satisfy "
        "constraint: Member must satisfy enum value set: [ALL, INCLUDE, KEYS_ONLY]"
    )


def test_member_combinations_come_before_later_checks(raw: Any) -> None:
    # dynalite's validations/query.js and scan.js order, recorded against DynamoDB.
    assert failure(raw.query, TableName="abc", ExpressionAttributeNames={"#a": "a"}) == (
        "ValidationException",
        "ExpressionAttributeNames can only be specified when using expressions",
    )
    assert failure(raw.query, TableName="abc", ExpressionAttributeValues={":a": {"S": "a"}}) == (
        "ValidationException",
        "ExpressionAttributeValues can only be specified when using expressions: "
        "FilterExpression and KeyConditionExpression are null",
    )
    both = failure(raw.scan, TableName="abc", Segment=1, FilterExpression="a = b", ScanFilter={})
    assert both == (
        "ValidationException",
        "Can not use both expression and non-expression parameters in the same request: "
        "Non-expression parameters: {ScanFilter} Expression parameters: {FilterExpression}",
    )
    item = {"a": {"S": "a", "N": "1"}}  # refused too, but reported after the combination
    assert failure(
        raw.put_item, TableName="abc", Item=item, Expected={}, ConditionExpression="a = b"
    ) == (
        "ValidationException",
        "Can not use both expression and non-expression parameters in the same request: "
        "Non-expression parameters: {Expected} Expression parameters: {ConditionExpression}",
    )


def test_repeated_batch_keys_before_the_table_is_looked_for(raw: Any) -> None:
    key = {"a": {"S": "x"}, "b": {"N": "1"}}
    assert failure(
        raw.batch_get_item,
        RequestItems={"no-such-table": {"Keys": [key, dict(reversed(key.items()))]}},
    ) == ("ValidationException", "Provided list of item keys contains duplicates")


def test_tag_requests_in_dynamodbs_words_and_order(raw: Any, table_name: str) -> None:
    # dynalite's tagResource/untagResource/listTagsOfResource tests, recorded against DynamoDB.
    arn = raw.create_table(TableName=table_name, **CREATE)["TableDescription"]["TableArn"]
    invalid = ("ValidationException", "Invalid TableArn")
    assert failure(raw.tag_resource, Tags=[{"Key": "k", "Value": "v"}]) == invalid
    assert failure(raw.untag_resource, TagKeys=["k"]) == invalid
    assert failure(raw.list_tags_of_resource) == invalid
    assert failure(raw.tag_resource, ResourceArn=arn) == (
        "ValidationException",
        "1 validation error detected: Value null at 'tags' failed to satisfy constraint: "
        "Member must not be null",
    )
    assert failure(raw.tag_resource, ResourceArn=arn, Tags=[]) == (
        "ValidationException",
        "Atleast one Tag needs to be provided as Input.",
    )
    assert failure(raw.untag_resource, ResourceArn=arn, TagKeys=[]) == (
        "ValidationException",
        "Atleast one Tag Key needs to be provided as Input.",
    )
    # The ARN's form is checked before the empty list.
    bad = "arn:aws:dynamodb:us-east-1:000000000000:stream/x"
    assert failure(raw.tag_resource, ResourceArn=bad, Tags=[]) == (
        "ValidationException",
        f"Invalid TableArn: Invalid ResourceArn provided as input {bad}",
    )


def test_legacy_condition_operators_join_the_constraint_envelope(raw: Any) -> None:
    # dynalite's query.js "incorrect attributes" test of DynamoDB: the operators of
    # KeyConditions and QueryFilter entries are constraints like any other member's.
    code, message = failure(
        raw.query,
        TableName="abc",
        Limit=0,
        KeyConditions={"a": {}},
        QueryFilter={"b": {"ComparisonOperator": "SOME"}},
    )
    assert code == "ValidationException"
    assert message.startswith("3 validation errors detected: ")
    # (Query's Limit in today's words: tests/engine/operations/test_query_scan.py.)
    assert set(message.removeprefix("3 validation errors detected: ").split("; ")) == {
        "Value at 'Limit' failed to satisfy constraint: Member must have value greater "
        "than or equal to 1",
        "Value null at 'keyConditions.a.member.comparisonOperator' failed to satisfy "
        "constraint: Member must not be null",
        "Value 'SOME' at 'queryFilter.b.member.comparisonOperator' failed to satisfy "
        "constraint: Member must satisfy enum value set: [IN, NULL, BETWEEN, LT, NOT_CONTAINS, "
        "EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, CONTAINS]",
    }


def test_gsi_update_shapes_before_the_table_is_looked_for(raw: Any) -> None:
    # dynalite's updateTable tests of DynamoDB (messages: DDB-TABLE-160), on a missing table.
    invalid = "One or more parameter values were invalid: "
    assert failure(
        raw.update_table, TableName="no-such-table", GlobalSecondaryIndexUpdates=[{}]
    ) == (
        "ValidationException",
        invalid + "One of GlobalSecondaryIndexUpdate.Update, GlobalSecondaryIndexUpdate.Create, "
        "GlobalSecondaryIndexUpdate.Delete must not be null",
    )
    twice = [{"Delete": {"IndexName": "abc"}}, {"Delete": {"IndexName": "abc"}}]
    assert failure(
        raw.update_table, TableName="no-such-table", GlobalSecondaryIndexUpdates=twice
    ) == (
        "ValidationException",
        invalid + "Only one global secondary index update per index is allowed simultaneously. "
        "Index: abc",
    )
    code, _ = failure(
        raw.update_table,
        TableName="no-such-table",
        GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "abc"}}],
    )
    assert code == "ResourceNotFoundException"


def test_an_unindexable_key_operator_after_the_index_rules(raw: Any, table_name: str) -> None:
    # dynalite's query tests of DynamoDB: ConsistentRead on a GSI is refused first; the
    # operator no key takes, once the key attribute is found.
    raw.create_table(
        TableName=table_name,
        AttributeDefinitions=[*DEFINITIONS, {"AttributeName": "c", "AttributeType": "S"}],
        KeySchema=KEY,
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-c",
                "KeySchema": [{"AttributeName": "c", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    null = {"ComparisonOperator": "NULL"}
    assert failure(
        raw.query,
        TableName=table_name,
        IndexName="by-c",
        ConsistentRead=True,
        KeyConditions={"c": null},
    ) == ("ValidationException", "Consistent reads are not supported on global secondary indexes")
    assert failure(
        raw.query, TableName=table_name, IndexName="by-c", KeyConditions={"z": null}
    ) == (
        "ValidationException",
        "Query condition missed key schema element: c",
    )
    assert failure(
        raw.query, TableName=table_name, IndexName="by-c", KeyConditions={"c": null}
    ) == (
        "ValidationException",
        "Attempted conditional constraint is not an indexable operation",
    )


def test_other_expressions_before_the_key_conditions_shape(raw: Any, table_name: str) -> None:
    # dynalite's query tests of DynamoDB: an empty FilterExpression or ProjectionExpression is
    # reported before the KeyConditionExpression's operator is judged.
    raw.create_table(TableName=table_name, **CREATE)
    common = {
        "TableName": table_name,
        "KeyConditionExpression": "attribute_type(pk, :a)",
        "ExpressionAttributeValues": {":a": {"S": "N"}},
    }
    assert failure(raw.query, FilterExpression="", ProjectionExpression="", **common) == (
        "ValidationException",
        "Invalid FilterExpression: The expression can not be empty;",
    )
    assert failure(raw.query, FilterExpression="v > w", ProjectionExpression="", **common) == (
        "ValidationException",
        "Invalid ProjectionExpression: The expression can not be empty;",
    )
    assert failure(raw.query, **common) == (
        "ValidationException",
        "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: "
        "attribute_type",
    )
