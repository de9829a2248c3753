"""The direct client: boto3's low-level API and response shapes, with no JSON in between."""

from __future__ import annotations

import datetime
import functools
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from engine.garbage import cycles_left_by
from firstwrite.engine import errors as errors_module
from firstwrite.engine import operations
from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.context import Context
from firstwrite.engine.direct.client import DirectClient, client_error, service_model
from firstwrite.engine.errors import DynamoDBError

KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}]


def create_table(client: Any, name: str) -> dict[str, Any]:
    return client.create_table(  # type: ignore[no-any-return]
        TableName=name,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST",
    )


ONE_CHECK = [
    {
        "ConditionCheck": {
            "TableName": "t",
            "Key": {"pk": {"S": "a"}},
            "ConditionExpression": "attribute_exists(pk)",
        }
    }
]


def strip_metadata(response: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


# --- surface ------------------------------------------------------------------------------------


def test_methods_follow_the_operation_table(
    direct: DirectClient, temp_operation: Callable[..., None]
) -> None:
    assert "put_item" in dir(direct)
    assert "describe_table" in dir(direct)
    with pytest.raises(AttributeError):
        direct.no_such_method  # noqa: B018
    # An operation registered after the client was made appears as a method.
    temp_operation("FirstwriteTestOperation", lambda ctx: {"Echo": dict(ctx.params)})
    assert direct.firstwrite_test_operation(A=1)["Echo"] == {"A": 1}


def test_positional_arguments_are_rejected_like_boto3(direct: DirectClient) -> None:
    with pytest.raises(TypeError, match=r"list_tables\(\) only accepts keyword arguments"):
        direct.list_tables({})


def test_response_metadata(direct: DirectClient) -> None:
    first = direct.list_tables()
    second = direct.list_tables()
    metadata = first["ResponseMetadata"]
    assert metadata["HTTPStatusCode"] == 200
    assert metadata["RetryAttempts"] == 0
    assert len(metadata["RequestId"]) == 52
    assert metadata["HTTPHeaders"]["x-amzn-requestid"] == metadata["RequestId"]
    assert second["ResponseMetadata"]["RequestId"] != metadata["RequestId"]


def test_meta_and_exceptions(engine: Engine) -> None:
    client = DirectClient(engine, region="eu-central-1")
    assert client.meta.region_name == "eu-central-1"
    assert client.meta.service_model.service_name == "dynamodb"
    assert issubclass(client.exceptions.ConditionalCheckFailedException, ClientError)
    assert client.exceptions.ConditionalCheckFailedException is (
        local_client(engine).exceptions.ConditionalCheckFailedException
    )
    with pytest.raises(ValueError):
        DirectClient(engine, service="s3")  # type: ignore[arg-type]


def test_region_reaches_the_engine(engine: Engine, temp_operation: Callable[..., None]) -> None:
    temp_operation(
        "DescribeEndpoints",
        lambda ctx: {"Endpoints": [{"Address": ctx.region, "CachePeriodInMinutes": 1}]},
    )
    client = DirectClient(engine, region="sa-east-1")
    assert client.describe_endpoints()["Endpoints"] == [
        {"Address": "sa-east-1", "CachePeriodInMinutes": 1}
    ]


def test_requests_are_not_wire_encoded(
    direct: DirectClient, temp_operation: Callable[..., None]
) -> None:
    seen: list[Context] = []

    def capture(ctx: Context) -> dict[str, Any]:
        seen.append(ctx)
        return {"Item": {"b": {"B": b"\x00\xff"}}}

    temp_operation("GetItem", capture)
    response = direct.get_item(TableName="t", Key={"pk": {"B": b"\x01"}})
    assert response["Item"] == {"b": {"B": b"\x00\xff"}}
    assert seen[0].wire is False
    assert seen[0].params["Key"] == {"pk": {"B": b"\x01"}}


def test_idempotency_token_is_injected_like_botocore(
    direct: DirectClient, temp_operation: Callable[..., None]
) -> None:
    tokens: list[str] = []

    def capture(ctx: Context) -> dict[str, Any]:
        tokens.append(ctx.params["ClientRequestToken"])
        return {}

    temp_operation("TransactWriteItems", capture)
    direct.transact_write_items(TransactItems=ONE_CHECK)
    direct.transact_write_items(TransactItems=ONE_CHECK, ClientRequestToken="mine")
    assert len(tokens[0]) == 36 and tokens[0].count("-") == 4  # a uuid4
    assert tokens[1] == "mine"


def test_timestamps_become_datetimes(direct: DirectClient, table_name: str) -> None:
    created = create_table(direct, table_name)["TableDescription"]["CreationDateTime"]
    assert isinstance(created, datetime.datetime)
    assert created.tzinfo is not None
    described = direct.describe_table(TableName=table_name)["Table"]["CreationDateTime"]
    assert described == created


def test_input_timestamps_are_serialised_to_epoch_seconds(
    direct: DirectClient, temp_operation: Callable[..., None]
) -> None:
    seen: list[Any] = []

    def capture(ctx: Context) -> dict[str, Any]:
        seen.append(ctx.params["TimeRangeLowerBound"])
        return {"BackupSummaries": []}

    temp_operation("ListBackups", capture)
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    direct.list_backups(TimeRangeLowerBound=when)
    assert seen == [when.timestamp()]


def test_param_validation_is_optional(engine: Engine) -> None:
    # Off by default (the fast path): the engine reports what a server would. On, as in boto3.
    with pytest.raises(ClientError) as info:
        DirectClient(engine).describe_table()
    assert info.value.response["Error"]["Code"] == "ValidationException"
    assert info.value.response["Error"]["Message"] == (
        "The parameter 'TableName' is required but was not present in the request"
    )
    with pytest.raises(
        ParamValidationError, match='Missing required parameter in input: "TableName"'
    ):
        DirectClient(engine, validate=True).describe_table()


def test_paginator(direct: DirectClient) -> None:
    names = sorted(f"paged-{i}" for i in range(3))
    for name in names:
        create_table(direct, name)
    assert direct.can_paginate("list_tables")
    assert not direct.can_paginate("put_item")
    pages = list(direct.get_paginator("list_tables").paginate(PaginationConfig={"PageSize": 1}))
    assert [n for page in pages for n in page["TableNames"]] == names
    assert len(pages) >= 3


def test_waiter(direct: DirectClient, table_name: str) -> None:
    assert "table_exists" in direct.waiter_names
    create_table(direct, table_name)
    direct.get_waiter("table_exists").wait(TableName=table_name)


def test_streams_variant(engine: Engine, temp_operation: Callable[..., None]) -> None:
    temp_operation("ListStreams", lambda ctx: {"Streams": [{"TableName": "x"}]}, service="streams")
    streams = DirectClient(engine, service="dynamodbstreams")
    assert streams.meta.service_model.service_name == "dynamodbstreams"
    assert streams.list_streams()["Streams"] == [{"TableName": "x"}]
    assert not hasattr(streams, "put_item")


# --- errors -------------------------------------------------------------------------------------


def test_modeled_operation_missing_from_engine_is_unknown_operation(engine: Engine) -> None:
    direct = DirectClient(engine, validate=False)  # the operation's required members don't matter
    missing = next(
        op for op in service_model("dynamodb").operation_names if op not in operations.DYNAMODB
    )
    from botocore import xform_name

    with pytest.raises(ClientError) as info:
        getattr(direct, xform_name(missing))()
    assert type(info.value) is ClientError
    assert info.value.response["Error"] == {"Message": "", "Code": "UnknownOperationException"}
    assert str(info.value) == (
        f"An error occurred (UnknownOperationException) when calling the {missing} operation: "
    )


def test_error_shape_matches_botocore(
    direct: DirectClient, temp_operation: Callable[..., None]
) -> None:
    def cancel(ctx: Context) -> dict[str, Any]:
        raise DynamoDBError(
            "TransactionCanceledException",
            "Transaction cancelled, please refer cancellation reasons for specific reasons "
            "[ConditionalCheckFailed]",
            CancellationReasons=[
                {
                    "Code": "ConditionalCheckFailed",
                    "Message": "The conditional request failed",
                    "Item": {"pk": {"B": b"\x07"}},
                }
            ],
        )

    temp_operation("TransactWriteItems", cancel)
    with pytest.raises(direct.exceptions.TransactionCanceledException) as info:
        direct.transact_write_items(TransactItems=ONE_CHECK)
    response = info.value.response
    assert response["Error"]["Code"] == "TransactionCanceledException"
    assert response["Message"] == response["Error"]["Message"]
    assert response["CancellationReasons"][0]["Item"] == {"pk": {"B": b"\x07"}}
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert info.value.operation_name == "TransactWriteItems"


def test_unmodeled_error_has_no_extra_members(
    direct: DirectClient, temp_operation: Callable[..., None]
) -> None:
    def throttle(ctx: Context) -> dict[str, Any]:
        raise DynamoDBError("ValidationException", "bad", Unmodeled=1)

    temp_operation("DescribeEndpoints", throttle)
    with pytest.raises(ClientError) as info:
        direct.describe_endpoints()
    assert type(info.value) is ClientError  # ValidationException is not a modeled shape
    assert set(info.value.response) == {"Error", "ResponseMetadata"}


def test_engine_bug_becomes_internal_server_error(
    direct: DirectClient, temp_operation: Callable[..., None]
) -> None:
    def crash(ctx: Context) -> dict[str, Any]:
        raise KeyError("boom")

    temp_operation("DescribeEndpoints", crash)
    with pytest.raises(direct.exceptions.InternalServerError) as info:
        direct.describe_endpoints()
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert isinstance(info.value.__cause__, KeyError)


def test_client_error_helper() -> None:
    error = client_error(DynamoDBError("ResourceNotFoundException", "gone"), "GetItem")
    assert error.response["Error"] == {"Message": "gone", "Code": "ResourceNotFoundException"}
    assert error.response["message"] == "gone"


@functools.cache
def _boto3_exceptions() -> Any:
    return local_client().exceptions


@pytest.mark.parametrize("code", [*sorted(errors_module._SHAPES), "NoSuchErrorCode"])
@pytest.mark.parametrize("message", ["", "it failed"])
def test_client_error_is_botocores_parse_of_the_wire_body(code: str, message: str) -> None:
    from botocore.parsers import create_parser

    error = DynamoDBError(code, message)
    got = client_error(error, "PutItem", request_id="RID")
    headers = {"x-amzn-requestid": "RID", "content-type": "application/x-amz-json-1.0"}
    response = {
        "status_code": error.status,
        "headers": headers,
        "body": json.dumps(error.wire_body()).encode(),
    }
    parser = create_parser("json")
    model = service_model("dynamodb")
    want = parser.parse(response, model.operation_model("PutItem").output_shape)
    shape = model.shape_for_error_code(code)
    if shape is not None:
        want.update(parser.parse(response, shape))
    want["ResponseMetadata"]["RetryAttempts"] = 0
    assert got.response == want
    assert type(got) is _boto3_exceptions().from_code(code)


# --- against the real operations ---------------------------------------------------------------


def test_put_get_binary_round_trip(direct: DirectClient, table_name: str) -> None:
    create_table(direct, table_name)
    item = {"pk": {"S": "a"}, "blob": {"B": b"\x00\x01\xff"}, "set": {"BS": [b"x", b"y"]}}
    assert strip_metadata(direct.put_item(TableName=table_name, Item=item)) == {}
    got = direct.get_item(TableName=table_name, Key={"pk": {"S": "a"}}, ConsistentRead=True)
    assert got["Item"]["blob"] == {"B": b"\x00\x01\xff"}
    assert sorted(got["Item"]["set"]["BS"]) == [b"x", b"y"]


def test_same_error_as_bound_client(engine: Engine, direct: DirectClient, table_name: str) -> None:
    bound = local_client(engine)
    create_table(direct, table_name)
    item = {"pk": {"S": "k"}, "b": {"B": b"\x01\x02"}, "n": {"N": "1.50"}}
    direct.put_item(TableName=table_name, Item=item)
    request = {
        "TableName": table_name,
        "Item": {"pk": {"S": "k"}},
        "ConditionExpression": "attribute_not_exists(pk)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    errors = []
    for client in (direct, bound):
        with pytest.raises(ClientError) as info:
            client.put_item(**request)
        errors.append(info.value)
    mine, theirs = errors
    assert type(mine) is type(theirs) is bound.exceptions.ConditionalCheckFailedException
    assert (
        str(mine)
        == str(theirs)
        == (
            "An error occurred (ConditionalCheckFailedException) when calling the PutItem "
            "operation: The conditional request failed"
        )
    )
    assert strip_metadata(mine.response) == strip_metadata(theirs.response)
    assert mine.response["Item"] == {"pk": {"S": "k"}, "b": {"B": b"\x01\x02"}, "n": {"N": "1.5"}}
    for key in ("HTTPStatusCode", "RetryAttempts"):
        assert mine.response["ResponseMetadata"][key] == theirs.response["ResponseMetadata"][key]


def test_concurrent_conditional_puts_from_threads(direct: DirectClient, table_name: str) -> None:
    create_table(direct, table_name)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def claim(worker: int) -> None:
        barrier.wait()
        try:
            direct.put_item(
                TableName=table_name,
                Item={"pk": {"S": "once"}, "owner": {"N": str(worker)}},
                ConditionExpression="attribute_not_exists(pk)",
            )
            outcomes.append("won")
        except direct.exceptions.ConditionalCheckFailedException:
            outcomes.append("lost")
        except Exception as exc:
            outcomes.append(repr(exc))

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]


@pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time")  # no Lambda context
def test_drop_in_for_powertools_idempotency(direct: DirectClient, table_name: str) -> None:
    # A third-party library written against boto3 runs unchanged on the direct client.
    idempotency = pytest.importorskip("aws_lambda_powertools.utilities.idempotency")
    direct.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    layer = idempotency.DynamoDBPersistenceLayer(table_name=table_name, boto3_client=direct)
    calls: list[dict[str, Any]] = []

    @idempotency.idempotent_function(data_keyword_argument="order", persistence_store=layer)
    def process(order: dict[str, Any]) -> dict[str, Any]:
        calls.append(order)
        return {"charged": order["id"]}

    assert process(order={"id": "o-1"}) == {"charged": "o-1"}
    assert process(order={"id": "o-1"}) == {"charged": "o-1"}
    assert calls == [{"id": "o-1"}]


def _errors_of(direct: DirectClient, table_name: str) -> list[tuple[str, ClientError]]:
    """Four errors (a failed condition twice, so the second text comes formatted already, a
    missing table, a refused request), with the operation each was raised by."""
    create_table(direct, table_name)
    direct.put_item(TableName=table_name, Item={"pk": {"S": "there"}})
    caught: list[tuple[str, ClientError]] = []
    calls: list[tuple[str, Callable[[], Any]]] = [
        (
            "PutItem",
            lambda: direct.put_item(
                TableName=table_name,
                Item={"pk": {"S": "there"}},
                ConditionExpression="attribute_not_exists(pk)",
            ),
        ),
        (
            "PutItem",
            lambda: direct.put_item(
                TableName=table_name,
                Item={"pk": {"S": "there"}},
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ),
        ),
        ("GetItem", lambda: direct.get_item(TableName="missing", Key={"pk": {"S": "x"}})),
        ("Query", lambda: direct.query(TableName=table_name)),
    ]
    for operation, call in calls:
        with pytest.raises(ClientError) as error:
            call()
        caught.append((operation, error.value))
    return caught


@pytest.mark.parametrize("preformatted", [True, False])
def test_errors_are_what_botocore_makes_of_their_response(
    direct: DirectClient, table_name: str, preformatted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client formats each error's text once (client_errors.ErrorMaker): the exception must
    # be the one ClientError(response, operation) makes, attribute for attribute.
    from firstwrite.engine.direct import errors as client_errors

    monkeypatch.setattr(client_errors, "PREFORMATTED", preformatted)
    for operation, error in _errors_of(direct, table_name):
        made = type(error)(error.response, operation)
        assert (error.args, vars(error), str(error)) == (made.args, vars(made), str(made))
        assert error.operation_name == operation
        assert type(error) is direct.exceptions.from_code(error.response["Error"]["Code"])


def test_failed_conditions_leave_no_garbage_cycle(direct: DirectClient, table_name: str) -> None:
    # A failed condition found by the hinted read is returned up to its operation and raised
    # there: a local left holding it would make frame -> error -> traceback -> frame a cycle
    # per failed call, freed only by the garbage collector.
    create_table(direct, table_name)
    key = {"pk": {"S": "a"}}
    direct.put_item(TableName=table_name, Item=key)
    ccf = direct.exceptions.ConditionalCheckFailedException
    calls: list[Callable[[], Any]] = [
        lambda: direct.put_item(
            TableName=table_name, Item=key, ConditionExpression="attribute_not_exists(pk)"
        ),
        lambda: direct.delete_item(
            TableName=table_name, Key=key, ConditionExpression="attribute_not_exists(pk)"
        ),
        lambda: direct.update_item(
            TableName=table_name, Key=key, ConditionExpression="attribute_not_exists(pk)"
        ),
    ]

    def fail_each() -> None:
        for call in calls:
            for _ in range(3):  # the first failure sets the hint, the next ones take the read
                with pytest.raises(ccf):
                    call()

    assert cycles_left_by(fail_each) == []
