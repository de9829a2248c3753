"""The bound client's quick path (answers at ``before-call``) against botocore's full path.

Two engines on frozen clocks receive the same calls, one through a client bound the default
way and one bound with ``full_stack=True``; every response and every error must be the same,
down to types (bytes, datetime, Decimal-free floats), apart from the ids that are random.
Retries, hooks and credentials are then checked against what botocore does on its own.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, NoCredentialsError

from engine.garbage import cycles_left_by
from firstwrite.engine.api import Engine
from firstwrite.engine.binding.steps import FINAL_ERRORS
from firstwrite.engine.binding.sync import bind, local_client
from firstwrite.engine.clock import Clock

KEY = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
ATTRS = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "N"},
]
# Random per engine or per response: compared by type only.
VOLATILE = {"RequestId", "x-amzn-requestid", "x-amz-crc32", "TableId", "content-length"}
TABLE = "quick-parity"


def _clock() -> Clock:
    clock = Clock()
    clock.freeze(1_750_000_000.0)
    return clock


def _normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: type(v).__name__ if k in VOLATILE else _normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    return value


def _outcome(client: Any, method: str, params: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", _normalised(getattr(client, method)(**params))
    except ClientError as error:
        return type(error).__name__ + ": " + str(error), _normalised(error.response)


# Each step: a client method and its arguments. Successes and errors of every response shape the
# layer and ordinary code meet: blobs, sets, nested documents, timestamps, capacity, paging,
# modeled error members (Item, CancellationReasons).
ITEM = {
    "pk": {"S": "a"},
    "sk": {"N": "1"},
    "blob": {"B": b"\x00\xff"},
    "blobs": {"BS": [b"\x01", b"\x02"]},
    "doc": {"M": {"l": {"L": [{"N": "1.50"}, {"NULL": True}, {"BOOL": False}]}}},
    "ns": {"NS": ["3", "1"]},
}
STEPS: list[tuple[str, dict[str, Any]]] = [
    (
        "create_table",
        {
            "TableName": TABLE,
            "KeySchema": KEY,
            "AttributeDefinitions": ATTRS,
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        },
    ),
    ("describe_table", {"TableName": TABLE}),
    ("put_item", {"TableName": TABLE, "Item": ITEM, "ReturnConsumedCapacity": "TOTAL"}),
    (
        "put_item",
        {
            "TableName": TABLE,
            "Item": {"pk": {"S": "a"}, "sk": {"N": "1"}},
            "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    ),
    ("get_item", {"TableName": TABLE, "Key": {"pk": {"S": "a"}, "sk": {"N": "1"}}}),
    (
        "update_item",
        {
            "TableName": TABLE,
            "Key": {"pk": {"S": "a"}, "sk": {"N": "1"}},
            "UpdateExpression": "ADD ns :n SET #b = :b",
            "ExpressionAttributeNames": {"#b": "blob"},
            "ExpressionAttributeValues": {":n": {"NS": ["2"]}, ":b": {"B": b"\x07"}},
            "ReturnValues": "ALL_NEW",
            "ReturnConsumedCapacity": "INDEXES",
        },
    ),
    ("put_item", {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"N": "2"}}}),
    (
        "query",
        {
            "TableName": TABLE,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": "a"}},
            "Limit": 1,
        },
    ),
    ("scan", {"TableName": TABLE, "Select": "COUNT"}),
    (
        "batch_get_item",
        {"RequestItems": {TABLE: {"Keys": [{"pk": {"S": "a"}, "sk": {"N": "1"}}]}}},
    ),
    (
        "transact_write_items",
        {
            "TransactItems": [
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "a"}, "sk": {"N": "1"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "b"}, "sk": {"N": "1"}}}},
            ],
            "ClientRequestToken": "parity-token",
        },
    ),
    ("get_item", {"TableName": "no-such-table", "Key": {"pk": {"S": "a"}}}),
    ("put_item", {"TableName": TABLE, "Item": {"pk": {"S": "a"}}}),  # missing range key
    (
        "update_item",
        {
            "TableName": TABLE,
            "Key": {"pk": {"S": "a"}, "sk": {"N": "1"}},
            "UpdateExpression": "SET #x = :x",
        },
    ),  # undefined name
    (
        "delete_item",
        {
            "TableName": TABLE,
            "Key": {"pk": {"S": "a"}, "sk": {"N": "2"}},
            "ReturnValues": "ALL_OLD",
        },
    ),
    ("list_tables", {}),
    ("describe_time_to_live", {"TableName": TABLE}),
]


@pytest.fixture
def pair() -> Iterator[tuple[Any, Any]]:
    quick_engine, full_engine = Engine(clock=_clock()), Engine(clock=_clock())
    no_retries = Config(retries={"total_max_attempts": 1})
    quick = local_client(quick_engine, config=no_retries)
    full = bind(local_client(full_engine, config=no_retries), full_engine, full_stack=True)
    yield quick, full
    quick_engine.close()
    full_engine.close()


def test_quick_path_answers_exactly_like_botocores_full_path(pair: tuple[Any, Any]) -> None:
    quick, full = pair
    errors = 0
    for method, params in STEPS:
        got = _outcome(quick, method, params)
        want = _outcome(full, method, params)
        assert got == want, method
        errors += got[0] != "ok"
    assert errors == 5  # the steps above include five errors, all compared
    described = quick.describe_table(TableName=TABLE)["Table"]
    assert isinstance(described["CreationDateTime"], datetime.datetime)


def test_stream_records_parse_the_same() -> None:
    engines = [Engine(clock=_clock()), Engine(clock=_clock())]
    outcomes = []
    for engine, full_stack in zip(engines, (False, True), strict=True):
        client = bind(local_client(engine), engine, full_stack=full_stack)
        streams = bind(
            local_client(engine, service_name="dynamodbstreams"), engine, full_stack=full_stack
        )
        client.create_table(**STEPS[0][1])
        client.put_item(TableName=TABLE, Item=ITEM)
        client.delete_item(TableName=TABLE, Key={"pk": {"S": "a"}, "sk": {"N": "1"}})
        arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        [shard] = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        outcomes.append(
            _normalised([{k: r[k] for k in ("eventName", "dynamodb")} for r in records])
        )
        engine.close()
    quick, full = outcomes
    assert [r["eventName"] for r in quick] == ["INSERT", "REMOVE"]
    assert quick == full
    image = quick[0]["dynamodb"]["NewImage"]
    assert image["blob"] == {"B": b"\x00\xff"}  # parsed, not base64 text
    assert isinstance(quick[0]["dynamodb"]["ApproximateCreationDateTime"], datetime.datetime)


def _counting(engine: Engine) -> list[str]:
    calls: list[str] = []
    previous = list(engine.hooks.interceptors)

    def count(ctx: Any) -> None:
        calls.append(ctx.operation)

    engine.hooks.interceptors.insert(0, count)
    assert engine.hooks.interceptors[1:] == previous
    return calls


@pytest.mark.parametrize("full_stack", [False, True])
def test_throttles_are_retried_by_botocore_one_engine_call_per_attempt(full_stack: bool) -> None:
    engine = Engine()
    client = bind(
        local_client(engine, config=Config(retries={"mode": "standard", "max_attempts": 3})),
        engine,
        full_stack=full_stack,
    )
    client.create_table(
        TableName=TABLE, KeySchema=KEY, AttributeDefinitions=ATTRS, BillingMode="PAY_PER_REQUEST"
    )
    engine.clock.freeze()  # botocore sleeps on wall time; the fault needs no engine time
    engine.faults.throttle(operation="PutItem", count=2)
    calls = _counting(engine)
    response = client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"N": "1"}})
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert calls == ["PutItem"] * 3  # two throttled attempts and the one that wrote
    assert engine.faults.active() == []
    engine.close()


def test_a_throttle_with_retries_off_is_raised_after_one_engine_call() -> None:
    engine = Engine()
    client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
    client.create_table(
        TableName=TABLE, KeySchema=KEY, AttributeDefinitions=ATTRS, BillingMode="PAY_PER_REQUEST"
    )
    engine.faults.throttle(operation="PutItem", count=1)
    calls = _counting(engine)
    with pytest.raises(ClientError) as info:
        client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"N": "1"}})
    assert info.value.response["Error"]["Code"] not in FINAL_ERRORS
    assert info.value.response["ResponseMetadata"]["RetryAttempts"] == 0
    assert calls == ["PutItem"]
    engine.close()


def test_quick_path_skips_botocores_http_half_but_runs_the_callers_hooks() -> None:
    engine = Engine()
    quick = local_client(engine)
    full = bind(local_client(engine), engine, full_stack=True)
    seen: list[str] = []
    for name, client in (("quick", quick), ("full", full)):
        events = client.meta.events
        # Registered after bind(): the caller's before-call hook must still run.
        events.register("before-call.dynamodb", lambda n=name, **kw: seen.append(f"{n} call"))
        events.register("request-created.dynamodb", lambda n=name, **kw: seen.append(f"{n} sign"))
        events.register(
            "after-call.dynamodb",
            lambda http_response, n=name, **kw: seen.append(
                f"{n} {http_response.status_code} {http_response.content.decode()}"
            ),
        )
        client.list_tables()
    assert seen == [
        "quick call",
        'quick 200 {"TableNames":[]}',
        "full call",
        "full sign",  # only the full path builds and signs an HTTP request
        'full 200 {"TableNames":[]}',
    ]
    engine.close()


def test_stub_before_call_hooks_win_over_the_quick_path() -> None:
    engine = Engine()
    client = local_client(engine)
    canned = {"TableNames": ["stubbed"], "ResponseMetadata": {"HTTPStatusCode": 200}}
    from botocore.awsrequest import AWSResponse

    client.meta.events.register(
        "before-call.dynamodb.ListTables",
        lambda **kw: (AWSResponse("http://stub", 200, {}, None), canned),
    )
    assert client.list_tables()["TableNames"] == ["stubbed"]
    engine.close()


@pytest.mark.parametrize("full_stack", [False, True])
def test_no_credentials_fail_as_botocore_fails(full_stack: bool) -> None:
    engine = Engine()
    client = bind(local_client(engine), engine, full_stack=full_stack)
    client._request_signer._credentials = None  # what botocore holds when it found none
    with pytest.raises(NoCredentialsError):
        client.list_tables()
    engine.close()


@pytest.mark.parametrize("full_stack", [False, True])
def test_a_modeled_error_leaves_no_garbage_cycle(full_stack: bool) -> None:
    # An error the quick path kept with its traceback (the engine's frames, one holding the
    # error) made a reference cycle per failed call, only freed by the garbage collector: a
    # collection every few failed calls in a test suite's worth of conditional writes.
    engine = Engine()
    client = bind(local_client(engine), engine, full_stack=full_stack)
    client.create_table(
        TableName=TABLE, KeySchema=KEY, AttributeDefinitions=ATTRS, BillingMode="PAY_PER_REQUEST"
    )
    item = {"pk": {"S": "a"}, "sk": {"N": "1"}}
    client.put_item(TableName=TABLE, Item=item)
    ccf = client.exceptions.ConditionalCheckFailedException

    def fail_five_times() -> None:
        for _ in range(5):
            with pytest.raises(ccf):
                client.put_item(
                    TableName=TABLE,
                    Item=item,
                    ConditionExpression="attribute_not_exists(pk)",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )

    assert cycles_left_by(fail_five_times) == []
    engine.close()


# The errors of PartiQL, backups and point-in-time recovery that no botocore retry mode
# retries: each is answered at before-call, with the same error as botocore's full path.
BACKUP_TABLE = "quick-backups"
FINAL_STEPS: list[tuple[str, dict[str, Any], str]] = [
    (
        "execute_statement",
        {"Statement": f"INSERT INTO \"{TABLE}\" VALUE {{'pk': 'a', 'sk': 1}}"},
        "DuplicateItemException",
    ),
    (
        "describe_backup",
        {"BackupArn": f"arn:aws:dynamodb:us-east-1:000000000000:table/{TABLE}/backup/01"},
        "BackupNotFoundException",
    ),
    (
        "create_backup",
        {"TableName": "no-such-table", "BackupName": "bkp"},
        "TableNotFoundException",
    ),
    (
        "restore_table_to_point_in_time",
        {
            "SourceTableName": TABLE,
            "TargetTableName": BACKUP_TABLE,
            "UseLatestRestorableTime": True,
        },
        "PointInTimeRecoveryUnavailableException",
    ),
    (
        "update_continuous_backups",
        {
            "TableName": TABLE,
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        },
        "",
    ),
    (
        "restore_table_to_point_in_time",
        {
            "SourceTableName": TABLE,
            "TargetTableName": BACKUP_TABLE,
            "RestoreDateTime": datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC),
        },
        "InvalidRestoreTimeException",
    ),
]


def test_partiql_and_backup_errors_take_the_quick_path_and_match_the_full_path(
    pair: tuple[Any, Any],
) -> None:
    quick, full = pair
    for client in pair:
        client.create_table(**STEPS[0][1])
        client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"N": "1"}})
    sent: list[str] = []
    quick.meta.events.register("before-send.dynamodb", lambda **kw: sent.append("sent"))
    for method, params, code in FINAL_STEPS:
        got = _outcome(quick, method, params)
        want = _outcome(full, method, params)
        assert got == want, method
        if code:
            assert code in FINAL_ERRORS
            assert got[1]["Error"]["Code"] == code, method
        else:
            assert got[0] == "ok", method
    # A backup's ARN differs between the engines: each restores its own over an existing table.
    got, want = (
        _outcome(
            client,
            "restore_table_from_backup",
            {
                "TargetTableName": TABLE,
                "BackupArn": client.create_backup(TableName=TABLE, BackupName="bkp")[
                    "BackupDetails"
                ]["BackupArn"],
            },
        )
        for client in (quick, full)
    )
    assert got == want
    assert got[1]["Error"]["Code"] == "TableAlreadyExistsException" in FINAL_ERRORS
    assert sent == []  # every answer, error or not, was given at before-call
