"""An unmodified test module written for moto's ``@mock_aws`` runs under the plugin.

``MOTO_MODULE`` is what a project's existing DynamoDB tests look like: moto's documented
fixture pattern, ``@mock_aws`` on functions and on a ``unittest.TestCase``, clients and
resources created inside the tests and at import time; table creation, puts, queries,
conditional failures, a cancelled transaction. It passes under moto alone, and it passes with
``--firstwrite-mock``, where a conftest beside it (the module is untouched) records which
tables each test's engine ended up holding: proof that the engine, not moto, answered.
"""

from __future__ import annotations

import json

import pytest

MOTO_MODULE = """
import os
import unittest

import boto3
import pytest
from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError
from moto import mock_aws

TABLE = "orders"
SCHEMA = dict(
    TableName=TABLE,
    KeySchema=[
        {"AttributeName": "customer", "KeyType": "HASH"},
        {"AttributeName": "order_id", "KeyType": "RANGE"},
    ],
    AttributeDefinitions=[
        {"AttributeName": "customer", "AttributeType": "S"},
        {"AttributeName": "order_id", "AttributeType": "S"},
    ],
    BillingMode="PAY_PER_REQUEST",
)

REGISTRY = boto3.session.Session(
    aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
).client("dynamodb")  # created at import, as application modules do


@pytest.fixture
def aws_credentials():
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ["AWS_SECURITY_TOKEN"] = "testing"
    os.environ["AWS_SESSION_TOKEN"] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"


@pytest.fixture
def dynamodb(aws_credentials):
    with mock_aws():
        yield boto3.resource("dynamodb", region_name="us-east-1")


def test_put_and_query(dynamodb):
    table = dynamodb.create_table(**SCHEMA)
    for n in range(1, 6):
        table.put_item(Item={"customer": "c1", "order_id": f"2024-0{n}", "total": n * 10})
    table.put_item(Item={"customer": "c2", "order_id": "2024-01", "total": 99})
    response = table.query(
        KeyConditionExpression=Key("customer").eq("c1") & Key("order_id").between("2024-02", "2024-04"),
        FilterExpression=Attr("total").gt(20),
    )
    assert [item["order_id"] for item in response["Items"]] == ["2024-03", "2024-04"]
    assert response["ScannedCount"] == 3
    newest = table.query(KeyConditionExpression=Key("customer").eq("c1"), ScanIndexForward=False, Limit=1)
    assert newest["Items"][0]["order_id"] == "2024-05"
    assert "LastEvaluatedKey" in newest


def test_conditional_put_rejects_a_duplicate(dynamodb):
    table = dynamodb.create_table(**SCHEMA)
    item = {"customer": "c1", "order_id": "o-1", "total": 10}
    table.put_item(Item=item, ConditionExpression="attribute_not_exists(order_id)")
    with pytest.raises(ClientError) as error:
        table.put_item(Item={**item, "total": 11}, ConditionExpression="attribute_not_exists(order_id)")
    assert error.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert table.get_item(Key={"customer": "c1", "order_id": "o-1"})["Item"]["total"] == 10


@mock_aws
def test_state_machine_with_the_low_level_client():
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(**SCHEMA)
    key = {"customer": {"S": "c1"}, "order_id": {"S": "o-1"}}
    client.put_item(TableName=TABLE, Item={**key, "status": {"S": "PENDING"}})
    move = dict(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET #s = :paid",
        ConditionExpression="#s = :pending",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":paid": {"S": "PAID"}, ":pending": {"S": "PENDING"}},
        ReturnValues="ALL_NEW",
    )
    assert client.update_item(**move)["Attributes"]["status"] == {"S": "PAID"}
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.update_item(**move)
    assert REGISTRY.list_tables()["TableNames"] == [TABLE]


@mock_aws
class TestOrders(unittest.TestCase):
    def setUp(self):
        self.client = boto3.client("dynamodb", region_name="us-east-1")
        self.client.create_table(**SCHEMA)

    def test_batch_write_then_query_pages(self):
        table = boto3.resource("dynamodb", region_name="us-east-1").Table(TABLE)
        with table.batch_writer() as batch:
            for n in range(30):
                batch.put_item(Item={"customer": "c1", "order_id": f"o-{n:02d}"})
        seen, kwargs = [], {"KeyConditionExpression": Key("customer").eq("c1"), "Limit": 7}
        while True:
            page = table.query(**kwargs)
            seen += [item["order_id"] for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        self.assertEqual(seen, [f"o-{n:02d}" for n in range(30)])

    def test_a_failed_condition_cancels_the_transaction(self):
        key = {"customer": {"S": "c1"}, "order_id": {"S": "o-1"}}
        self.client.put_item(TableName=TABLE, Item={**key, "stock": {"N": "0"}})
        with self.assertRaises(ClientError) as error:
            self.client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": {"customer": {"S": "c1"}, "order_id": {"S": "o-2"}}}},
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": key,
                            "UpdateExpression": "SET stock = stock - :one",
                            "ConditionExpression": "stock >= :one",
                            "ExpressionAttributeValues": {":one": {"N": "1"}},
                        }
                    },
                ]
            )
        self.assertEqual(error.exception.response["Error"]["Code"], "TransactionCanceledException")
        self.assertIn("ConditionalCheckFailed", str(error.exception))
        missing = self.client.get_item(TableName=TABLE, Key={"customer": {"S": "c1"}, "order_id": {"S": "o-2"}})
        self.assertNotIn("Item", missing)
"""

# Beside the module, not in it: after each test, the tables its engine holds.
RECORDING_CONFTEST = """
import json
import pytest

@pytest.fixture(autouse=True)
def _record_engine_tables(request):
    if not request.config.getoption("firstwrite_mock"):
        yield
        return
    engine = request.getfixturevalue("firstwrite_engine")
    yield
    tables = engine.execute("ListTables", {})["TableNames"]
    request.node.user_properties.append(("engine_tables", json.dumps(tables)))
"""

TESTS = [
    "test_put_and_query",
    "test_conditional_put_rejects_a_duplicate",
    "test_state_machine_with_the_low_level_client",
    "TestOrders::test_batch_write_then_query_pages",
    "TestOrders::test_a_failed_condition_cancels_the_transaction",
]


def _passed(result: pytest.RunResult) -> list[str]:
    return [
        r.nodeid.split("::", 1)[1]
        for r in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
        if r.when == "call" and r.passed
    ]


@pytest.fixture
def moto_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(RECORDING_CONFTEST)
    pytester.makepyfile(test_orders=MOTO_MODULE)
    return pytester


def test_the_module_passes_under_moto_alone(moto_project: pytest.Pytester) -> None:
    result = moto_project.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=len(TESTS))
    assert sorted(_passed(result)) == sorted(TESTS)
    assert "answered in process" not in result.stdout.str()


def test_the_unmodified_module_passes_with_every_call_answered_by_the_engine(
    moto_project: pytest.Pytester,
) -> None:
    result = moto_project.runpytest("-p", "no:randomly", "--firstwrite-mock")
    result.assert_outcomes(passed=len(TESTS))
    assert sorted(_passed(result)) == sorted(TESTS)
    reports = [
        r
        for r in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
        if r.when == "teardown"
    ]
    tables = {r.nodeid.split("::", 1)[1]: dict(r.user_properties)["engine_tables"] for r in reports}
    # Each test's own engine holds the table that test created (one engine per test).
    assert {name: json.loads(value) for name, value in tables.items()} == {
        name: ["orders"] for name in TESTS
    }
    result.stdout.fnmatch_lines(["firstwrite: * DynamoDB requests of redirected clients*"])


def test_the_ini_option_turns_the_redirect_on_too(moto_project: pytest.Pytester) -> None:
    moto_project.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nfirstwrite_mock = true\n"
    )
    result = moto_project.runpytest("-p", "no:randomly", "-k", "state_machine")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["firstwrite: * DynamoDB requests of redirected clients*"])
