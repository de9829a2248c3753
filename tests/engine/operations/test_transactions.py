"""TransactWriteItems and TransactGetItems, through real boto3 clients (in-process and HTTP).

Token-window, change-hook and JSON-key-order tests drive the engine directly, because they need
the engine's clock or a raw request dict.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Context, Engine
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.operations.transactions import TOKEN_WINDOW_SECONDS, transact_write

CANCELLED = "Transaction cancelled, please refer cancellation reasons for specific reasons"
CCF = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}


def create_table(client: Any, name: str) -> str:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@pytest.fixture
def table(ddb: Any, table_name: str) -> str:
    return create_table(ddb, table_name)


@pytest.fixture
def direct_table(direct: DirectClient, table_name: str) -> str:
    return create_table(direct, table_name)


def key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}}


def get(client: Any, table: str, pk: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = client.get_item(
        TableName=table, Key=key(pk), ConsistentRead=True
    ).get("Item")
    return item


def put(client: Any, table: str, pk: str, **attrs: dict[str, Any]) -> None:
    client.put_item(TableName=table, Item={**key(pk), **attrs})


def cancellation(exc: pytest.ExceptionInfo[ClientError]) -> list[dict[str, Any]]:
    error = exc.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    reasons: list[dict[str, Any]] = error["CancellationReasons"]
    codes = ", ".join(r["Code"] for r in reasons)
    assert error["Error"]["Message"] == f"{CANCELLED} [{codes}]"
    return reasons


def validation_message(exc: pytest.ExceptionInfo[ClientError]) -> str:
    assert exc.value.response["Error"]["Code"] == "ValidationException"
    message: str = exc.value.response["Error"]["Message"]
    return message


def increment(table: str, pk: str, by: int = 1) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": key(pk),
            "UpdateExpression": "SET n = n + :by",
            "ExpressionAttributeValues": {":by": {"N": str(by)}},
        }
    }


# -- TransactWriteItems: success -------------------------------------------------------------


def test_all_four_actions_apply_together(ddb: Any, table: str) -> None:
    put(ddb, table, "updated", n={"N": "1"})
    put(ddb, table, "deleted", n={"N": "2"})
    put(ddb, table, "checked", n={"N": "3"})
    response = ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": {**key("new"), "b": {"B": b"\x00\xff"}}}},
            increment(table, "updated", 10),
            {"Delete": {"TableName": table, "Key": key("deleted")}},
            {
                "ConditionCheck": {
                    "TableName": table,
                    "Key": key("checked"),
                    "ConditionExpression": "n = :three",
                    "ExpressionAttributeValues": {":three": {"N": "3"}},
                }
            },
        ]
    )
    assert "ConsumedCapacity" not in response
    assert get(ddb, table, "new") == {**key("new"), "b": {"B": b"\x00\xff"}}
    assert get(ddb, table, "updated") == {**key("updated"), "n": {"N": "11"}}
    assert get(ddb, table, "deleted") is None
    assert get(ddb, table, "checked") == {**key("checked"), "n": {"N": "3"}}


def test_update_of_missing_item_creates_it_and_delete_of_missing_item_is_fine(
    ddb: Any, table: str
) -> None:
    ddb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": key("fresh"),
                    "UpdateExpression": "SET v = :v",
                    "ExpressionAttributeValues": {":v": {"S": "x"}},
                }
            },
            {"Delete": {"TableName": table, "Key": key("never-existed")}},
        ]
    )
    assert get(ddb, table, "fresh") == {**key("fresh"), "v": {"S": "x"}}


def test_table_arn_is_accepted_as_table_name(ddb: Any, table: str) -> None:
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": arn, "Item": key("a")}}])
    response = ddb.transact_get_items(TransactItems=[{"Get": {"TableName": arn, "Key": key("a")}}])
    assert response["Responses"] == [{"Item": key("a")}]


# -- TransactWriteItems: cancellation --------------------------------------------------------


def test_failed_condition_cancels_everything(ddb: Any, table: str) -> None:
    put(ddb, table, "taken", n={"N": "1"})
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": key("would-be-written")}},
                {
                    "Put": {
                        "TableName": table,
                        "Item": {**key("taken"), "n": {"N": "2"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    assert cancellation(exc) == [{"Code": "None"}, CCF]
    assert exc.value.response["Error"]["Message"] == f"{CANCELLED} [None, ConditionalCheckFailed]"
    assert get(ddb, table, "would-be-written") is None
    assert get(ddb, table, "taken") == {**key("taken"), "n": {"N": "1"}}


def test_every_condition_is_evaluated(ddb: Any, table: str) -> None:
    put(ddb, table, "a")
    put(ddb, table, "b")
    not_exists = "attribute_not_exists(pk)"
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": key("a"), "ConditionExpression": not_exists}},
                {"Put": {"TableName": table, "Item": key("c")}},
                {
                    "Delete": {
                        "TableName": table,
                        "Key": key("b"),
                        "ConditionExpression": not_exists,
                    }
                },
            ]
        )
    assert cancellation(exc) == [CCF, {"Code": "None"}, CCF]


@pytest.mark.parametrize("kind", ["Put", "Update", "Delete", "ConditionCheck"])
def test_all_old_returns_the_item_in_the_reason(ddb: Any, table: str, kind: str) -> None:
    put(ddb, table, "x", n={"N": "5"}, b={"B": b"\x01"})
    action: dict[str, Any] = {
        "TableName": table,
        "ConditionExpression": "attribute_not_exists(pk)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if kind == "Put":
        action["Item"] = key("x")
    else:
        action["Key"] = key("x")
    if kind == "Update":
        action["UpdateExpression"] = "SET n = :v"
        action["ExpressionAttributeValues"] = {":v": {"N": "6"}}
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(TransactItems=[{kind: action}])
    # botocore parses the reason's Item with its model: low-level shape, B decoded to bytes.
    assert cancellation(exc) == [
        {**CCF, "Item": {**key("x"), "n": {"N": "5"}, "b": {"B": b"\x01"}}}
    ]


def test_all_old_on_a_missing_item_returns_no_item(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key("absent"),
                        "ConditionExpression": "attribute_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            ]
        )
    assert cancellation(exc) == [CCF]


def test_only_the_first_validation_error_is_reported(ddb: Any, table: str) -> None:
    put(ddb, table, "taken")
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": table,
                        "Item": key("taken"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {"Put": {"TableName": table, "Item": {"pk": {"N": "1"}}}},
                {"Delete": {"TableName": table, "Key": {"pk": {"N": "2"}}}},
                {"Put": {"TableName": table, "Item": key("not-written")}},
            ]
        )
    reasons = cancellation(exc)
    assert [r["Code"] for r in reasons] == ["None", "ValidationError", "None", "None"]
    assert reasons[1]["Message"] == (
        "One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N"
    )
    assert get(ddb, table, "not-written") is None


def test_update_that_grows_the_item_too_large_is_a_validation_error(ddb: Any, table: str) -> None:
    put(ddb, table, "big", blob={"B": b"x" * 300_000})
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": key("big"),
                        "UpdateExpression": "SET more = :more",
                        "ExpressionAttributeValues": {":more": {"B": b"y" * 200_000}},
                    }
                }
            ]
        )
    assert cancellation(exc) == [
        {
            "Code": "ValidationError",
            "Message": "Item size to update has exceeded the maximum allowed size",
        }
    ]


# -- TransactWriteItems: top-level errors ----------------------------------------------------


def test_two_actions_on_one_item_are_rejected(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {**key("same"), "x": {"S": "1"}}}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key("same"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    assert validation_message(exc) == (
        "Transaction request cannot include multiple operations on one item"
    )
    assert get(ddb, table, "same") is None


def test_action_with_two_kinds_is_rejected(engine: Engine, direct_table: str) -> None:
    # botocore rejects a union with two members client-side, so this needs a raw request.
    with pytest.raises(DynamoDBError) as exc:
        engine.execute(
            "TransactWriteItems",
            {
                "TransactItems": [
                    {
                        "Put": {"TableName": direct_table, "Item": key("a")},
                        "Delete": {"TableName": direct_table, "Key": key("b")},
                    }
                ]
            },
        )
    assert exc.value.code == "ValidationException"
    assert exc.value.message == "TransactItems can only contain one of Check, Put, Update or Delete"


def test_empty_key_string_is_a_top_level_error(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"N": "1"}}}},
                {"Put": {"TableName": table, "Item": {"pk": {"S": ""}}}},
            ]
        )
    assert validation_message(exc) == (
        "One or more parameter values are not valid. The AttributeValue for a key attribute "
        "cannot contain an empty string value. Key: pk"
    )


def test_empty_expression_attribute_values_is_rejected(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": table,
                        "Item": key("a"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ExpressionAttributeValues": {},
                    }
                }
            ]
        )
    assert validation_message(exc) == "ExpressionAttributeValues must not be empty"


def test_expression_problem_in_any_action_is_top_level(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": key("ok")}},
                {
                    "Put": {
                        "TableName": table,
                        "Item": key("b"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ExpressionAttributeNames": {"#count": "count"},
                    }
                },
            ]
        )
    assert validation_message(exc) == (
        "Value provided in ExpressionAttributeNames unused in expressions: keys: {#count}"
    )
    assert get(ddb, table, "ok") is None


def test_bad_return_values_on_condition_check_failure_is_top_level(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": table,
                        "Item": key("a"),
                        "ReturnValuesOnConditionCheckFailure": "dog",
                    }
                }
            ]
        )
    message = validation_message(exc)
    assert "returnValuesOnConditionCheckFailure" in message
    assert "Member must satisfy enum value set: [ALL_OLD, NONE]" in message


def test_unknown_table_is_resource_not_found(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": key("a")}},
                {"Put": {"TableName": table + "-missing", "Item": key("a")}},
            ]
        )
    assert exc.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert exc.value.response["Error"]["Message"] == "Requested resource not found"
    assert get(ddb, table, "a") is None


def test_more_than_100_actions_are_rejected(ddb: Any, table: str) -> None:
    actions = [{"Put": {"TableName": table, "Item": key(f"k{i}")}} for i in range(101)]
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(TransactItems=actions)
    message = validation_message(exc)
    assert message.startswith("1 validation error detected: Value '[")
    assert message.endswith(
        "' at 'transactItems' failed to satisfy constraint: "
        "Member must have length less than or equal to 100"
    )
    ddb.transact_write_items(TransactItems=actions[:100])
    assert get(ddb, table, "k99") == key("k99")


def test_client_request_token_longer_than_36_is_rejected(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": key("a")}}],
            ClientRequestToken="t" * 37,
        )
    assert "clientRequestToken" in validation_message(exc)


def test_payload_over_4_mb_is_rejected_but_deleting_big_items_is_fine(ddb: Any, table: str) -> None:
    blob = b"z" * 350_000
    puts = [
        {"Put": {"TableName": table, "Item": {**key(f"big{i}"), "b": {"B": blob}}}}
        for i in range(13)
    ]
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(TransactItems=puts)
    assert "size cannot exceed 4 MB" in validation_message(exc)
    assert get(ddb, table, "big0") is None
    for i in range(13):
        put(ddb, table, f"big{i}", b={"B": blob})
    ddb.transact_write_items(
        TransactItems=[{"Delete": {"TableName": table, "Key": key(f"big{i}")}} for i in range(13)]
    )
    assert get(ddb, table, "big12") is None


# -- capacity --------------------------------------------------------------------------------


def test_consumed_capacity_is_a_list_per_table_with_doubled_units(
    ddb: Any, table: str, table_name: str
) -> None:
    other = create_table(ddb, table_name + "-2")
    put(ddb, table, "old", b={"B": b"o" * 3000})  # ~3 KB: 3 WCU, 6 in a transaction
    response = ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": key("a")}},  # 2
            {"Delete": {"TableName": table, "Key": key("old")}},  # 6
            {"Put": {"TableName": other, "Item": {**key("b"), "b": {"B": b"x" * 1500}}}},  # 4
        ],
        ReturnConsumedCapacity="TOTAL",
    )
    assert response["ConsumedCapacity"] == [
        {"TableName": table, "CapacityUnits": 8.0, "WriteCapacityUnits": 8.0},
        {"TableName": other, "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0},
    ]


# -- ClientRequestToken ----------------------------------------------------------------------


def test_same_token_same_request_is_applied_once(ddb: Any, table: str) -> None:
    # ~1.5 KB: 2 WCU (1 KB units) but 1 RCU (4 KB units), so writes and reads differ.
    put(ddb, table, "counter", n={"N": "0"}, pad={"S": "p" * 1500})
    request = {
        "TransactItems": [increment(table, "counter")],
        "ClientRequestToken": "token-1",
        "ReturnConsumedCapacity": "TOTAL",
    }
    first = ddb.transact_write_items(**request)
    second = ddb.transact_write_items(**request)
    assert get(ddb, table, "counter")["n"] == {"N": "1"}  # type: ignore[index]
    # The first call reports its transactional writes; the replay a transactional read of the
    # item (as characterised against DynamoDB), not the writes relabelled.
    assert first["ConsumedCapacity"] == [
        {"TableName": table, "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0}
    ]
    assert second["ConsumedCapacity"] == [
        {"TableName": table, "CapacityUnits": 2.0, "ReadCapacityUnits": 2.0}
    ]


def test_same_token_different_request_is_a_mismatch(ddb: Any, table: str) -> None:
    put(ddb, table, "counter", n={"N": "0"})
    ddb.transact_write_items(
        TransactItems=[increment(table, "counter")], ClientRequestToken="token-2"
    )
    with pytest.raises(ClientError) as exc:
        ddb.transact_write_items(
            TransactItems=[increment(table, "counter", 2)], ClientRequestToken="token-2"
        )
    error = exc.value.response
    assert error["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert error["Message"] == error["Error"]["Message"] != ""
    assert get(ddb, table, "counter") == {**key("counter"), "n": {"N": "1"}}


def test_token_comparison_ignores_json_key_order(engine: Engine, direct_table: str) -> None:
    engine.execute("PutItem", {"TableName": direct_table, "Item": {**key("c"), "n": {"N": "0"}}})
    action = increment(direct_table, "c")["Update"]
    reordered = {k: action[k] for k in reversed(list(action))}
    engine.execute(
        "TransactWriteItems", {"TransactItems": [{"Update": action}], "ClientRequestToken": "tk"}
    )
    engine.execute(
        "TransactWriteItems", {"ClientRequestToken": "tk", "TransactItems": [{"Update": reordered}]}
    )
    item = engine.execute("GetItem", {"TableName": direct_table, "Key": key("c")})["Item"]
    assert item["n"] == {"N": "1"}


def test_token_is_forgotten_after_the_window(engine: Engine, direct: DirectClient) -> None:
    table = create_table(direct, "window")
    put(direct, table, "c", n={"N": "0"})
    request = {"TransactItems": [increment(table, "c")], "ClientRequestToken": "tk-window"}
    direct.transact_write_items(**request)
    engine.clock.advance(TOKEN_WINDOW_SECONDS - 1)
    direct.transact_write_items(**request)  # still inside the window: a replay
    assert get(direct, table, "c") == {**key("c"), "n": {"N": "1"}}
    with pytest.raises(ClientError) as exc:  # and a different request is still a mismatch
        direct.transact_write_items(
            TransactItems=[increment(table, "c", 5)], ClientRequestToken="tk-window"
        )
    assert exc.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    engine.clock.advance(2)  # the window counts from completion: now past it
    direct.transact_write_items(**request)
    assert get(direct, table, "c") == {**key("c"), "n": {"N": "2"}}
    direct.transact_write_items(TransactItems=[increment(table, "c", 5)], ClientRequestToken="tk")
    assert get(direct, table, "c") == {**key("c"), "n": {"N": "7"}}


def test_token_window_is_a_parameter(engine: Engine, direct: DirectClient) -> None:
    table = create_table(direct, "short-window")
    put(direct, table, "c", n={"N": "0"})
    request = {"TransactItems": [increment(table, "c")], "ClientRequestToken": "tk-short"}

    def call() -> None:
        transact_write(Context(engine, request, operation="TransactWriteItems"), token_window=5)

    call()
    engine.clock.advance(4)
    call()
    assert get(direct, table, "c") == {**key("c"), "n": {"N": "1"}}
    engine.clock.advance(2)
    call()
    assert get(direct, table, "c") == {**key("c"), "n": {"N": "2"}}


def test_cancelled_transaction_does_not_claim_its_token(direct: DirectClient) -> None:
    table = create_table(direct, "cancelled")
    request = {
        "TransactItems": [
            {
                "Update": {
                    "TableName": table,
                    "Key": key("c"),
                    "UpdateExpression": "SET n = n + :one",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            }
        ],
        "ClientRequestToken": "tk-cancelled",
    }
    with pytest.raises(ClientError) as exc:
        direct.transact_write_items(**request)
    assert cancellation(exc) == [CCF]
    put(direct, table, "c", n={"N": "0"})
    direct.transact_write_items(**request)  # re-evaluated, not a replay of the cancellation
    assert get(direct, table, "c") == {**key("c"), "n": {"N": "1"}}


def test_concurrent_retries_with_one_token_apply_once(direct: DirectClient) -> None:
    table = create_table(direct, "retries")
    put(direct, table, "c", n={"N": "0"})
    request = {"TransactItems": [increment(table, "c")], "ClientRequestToken": "tk-concurrent"}
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def retry() -> None:
        start.wait()
        try:
            direct.transact_write_items(**request)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=retry) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert get(direct, table, "c") == {**key("c"), "n": {"N": "1"}}


# -- change hooks ----------------------------------------------------------------------------


def test_change_hooks_see_each_written_item_and_nothing_when_cancelled(
    engine: Engine, direct: DirectClient
) -> None:
    table = create_table(direct, "hooks")
    put(direct, table, "upd", n={"N": "1"})
    put(direct, table, "del")
    put(direct, table, "chk")
    seen: list[tuple[str, Any, Any]] = []
    engine.hooks.change_hooks.append(
        lambda ctx, w, row, old, new: seen.append((row.name, old, new))
    )
    direct.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": key("new")}},
            increment(table, "upd"),
            {"Delete": {"TableName": table, "Key": key("del")}},
            {"Delete": {"TableName": table, "Key": key("absent")}},
            {
                "ConditionCheck": {
                    "TableName": table,
                    "Key": key("chk"),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        ]
    )
    assert seen == [
        (table, None, key("new")),
        (table, {**key("upd"), "n": {"N": "1"}}, {**key("upd"), "n": {"N": "2"}}),
        (table, key("del"), None),
    ]
    seen.clear()
    with pytest.raises(ClientError):
        direct.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": key("x")}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key("absent"),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert seen == []


# -- TransactGetItems ------------------------------------------------------------------------


def test_get_returns_responses_in_request_order(ddb: Any, table: str, table_name: str) -> None:
    other = create_table(ddb, table_name + "-2")
    put(ddb, table, "a", n={"N": "1"}, s={"S": "x"})
    put(ddb, other, "b", b={"B": b"\x02"})
    response = ddb.transact_get_items(
        TransactItems=[
            {"Get": {"TableName": other, "Key": key("b")}},
            {"Get": {"TableName": table, "Key": key("missing")}},
            {
                "Get": {
                    "TableName": table,
                    "Key": key("a"),
                    "ProjectionExpression": "#n",
                    "ExpressionAttributeNames": {"#n": "n"},
                }
            },
        ],
        ReturnConsumedCapacity="TOTAL",
    )
    assert response["Responses"] == [
        {"Item": {**key("b"), "b": {"B": b"\x02"}}},
        {},
        {"Item": {"n": {"N": "1"}}},
    ]
    assert response["ConsumedCapacity"] == [
        {"TableName": other, "CapacityUnits": 2.0, "ReadCapacityUnits": 2.0},
        {"TableName": table, "CapacityUnits": 4.0, "ReadCapacityUnits": 4.0},
    ]


def test_get_errors(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.transact_get_items(
            TransactItems=[{"Get": {"TableName": table + "-missing", "Key": key("a")}}]
        )
    assert exc.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as exc:
        ddb.transact_get_items(
            TransactItems=[
                {"Get": {"TableName": table, "Key": key("a")}},
                {"Get": {"TableName": table, "Key": {}}},
            ]
        )
    reasons = cancellation(exc)
    assert [r["Code"] for r in reasons] == ["None", "ValidationError"]
    assert reasons[1]["Message"] == "The provided key element does not match the schema"
    with pytest.raises(ClientError) as exc:
        ddb.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": key("a")}}] * 101)
    assert "Member must have length less than or equal to 100" in validation_message(exc)


def test_transactions_are_isolated_under_concurrency(direct: DirectClient) -> None:
    """Transfers keep a sum invariant; concurrent TransactGetItems never see half a transfer."""
    table = create_table(direct, "bank")
    accounts = [f"acct{i}" for i in range(4)]
    for name in accounts:
        put(direct, table, name, bal={"N": "100"})
    stop = threading.Event()
    failures: list[str] = []
    reads = [0]

    def transfer(seed: int) -> None:
        for step in range(150):
            src = accounts[(seed + step) % 4]
            dst = accounts[(seed + step + 1 + step % 3) % 4]
            try:
                direct.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": table,
                                "Key": key(src),
                                "UpdateExpression": "SET bal = bal - :v",
                                "ConditionExpression": "bal >= :v",
                                "ExpressionAttributeValues": {":v": {"N": "7"}},
                            }
                        },
                        {
                            "Update": {
                                "TableName": table,
                                "Key": key(dst),
                                "UpdateExpression": "SET bal = bal + :v",
                                "ExpressionAttributeValues": {":v": {"N": "7"}},
                            }
                        },
                    ]
                )
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "TransactionCanceledException":
                    failures.append(repr(exc))

    def audit() -> None:
        while not stop.is_set():
            response = direct.transact_get_items(
                TransactItems=[{"Get": {"TableName": table, "Key": key(a)}} for a in accounts]
            )
            total = sum(int(r["Item"]["bal"]["N"]) for r in response["Responses"])
            reads[0] += 1
            if total != 400:
                failures.append(f"saw a total of {total}")

    writers = [threading.Thread(target=transfer, args=(seed,)) for seed in range(4)]
    auditors = [threading.Thread(target=audit) for _ in range(2)]
    for thread in writers + auditors:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in auditors:
        thread.join()
    assert failures == []
    assert reads[0] > 0
    final = [int(get(direct, table, a)["bal"]["N"]) for a in accounts]  # type: ignore[index]
    assert sum(final) == 400 and min(final) >= 0
