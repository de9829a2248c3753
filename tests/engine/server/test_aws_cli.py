"""The real AWS CLI (``aws dynamodb ...``, awscli v1 with its own vendored botocore) against a
real ``firstwrite engine serve`` process: the wire protocol is DynamoDB's, not boto3's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

AWS = Path(sys.executable).with_name("aws")
pytestmark = [
    pytest.mark.skipif(not AWS.exists(), reason="awscli is not installed (requirements/dev.lock)"),
    pytest.mark.slow,
]

CCF = (
    "An error occurred (ConditionalCheckFailedException) when calling the PutItem operation: "
    "The conditional request failed"
)


class Aws:
    """``aws dynamodb ...`` with an isolated configuration and the given credentials."""

    def __init__(self, url: str, home: Path, key: str = "AKIDCLI", secret: str = "cli") -> None:
        self.url = url
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(AWS), "dynamodb", *args, "--endpoint-url", self.url, "--output", "json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def ok(self, *args: str) -> Any:
        done = self.run(*args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    def fails(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode != 0, done.stdout
        return done.stderr.strip()


@pytest.fixture
def aws(cli_server: Callable[..., Any], tmp_path: Path) -> Aws:
    return Aws(cli_server().url, tmp_path)


def _create(aws: Aws, name: str = "orders") -> None:
    aws.ok(
        "create-table",
        "--table-name", name,
        "--attribute-definitions", "AttributeName=pk,AttributeType=S",
        "AttributeName=sk,AttributeType=N",
        "--key-schema", "AttributeName=pk,KeyType=HASH", "AttributeName=sk,KeyType=RANGE",
        "--billing-mode", "PAY_PER_REQUEST",
    )  # fmt: skip
    aws.ok("wait", "table-exists", "--table-name", name)


def _item(pk: str, sk: int, **extra: Any) -> str:
    return json.dumps({"pk": {"S": pk}, "sk": {"N": str(sk)}, **extra})


def test_conditional_put_get_update_and_the_duplicate_error(aws: Aws) -> None:
    _create(aws)
    assert aws.ok("list-tables")["TableNames"] == ["orders"]
    absent = ("--condition-expression", "attribute_not_exists(pk)")
    item = _item("order-1", 1, amount={"N": "1999"})
    assert aws.ok("put-item", "--table-name", "orders", "--item", item, *absent) is None

    # The duplicate: the CLI prints DynamoDB's error and exits non-zero.
    assert aws.fails("put-item", "--table-name", "orders", "--item", item, *absent) == CCF

    key = json.dumps({"pk": {"S": "order-1"}, "sk": {"N": "1"}})
    got = aws.ok("get-item", "--table-name", "orders", "--key", key, "--consistent-read")
    assert got["Item"] == {"pk": {"S": "order-1"}, "sk": {"N": "1"}, "amount": {"N": "1999"}}

    updated = aws.ok(
        "update-item",
        "--table-name", "orders",
        "--key", key,
        "--update-expression", "SET amount = amount + :d, #s = :s",
        "--condition-expression", "amount = :old",
        "--expression-attribute-names", json.dumps({"#s": "status"}),
        "--expression-attribute-values",
        json.dumps({":d": {"N": "1"}, ":old": {"N": "1999"}, ":s": {"S": "PAID"}}),
        "--return-values", "UPDATED_NEW",
    )  # fmt: skip
    assert updated["Attributes"] == {"amount": {"N": "2000"}, "status": {"S": "PAID"}}


def test_query_and_scan_page_through_last_evaluated_key(aws: Aws) -> None:
    _create(aws)
    requests = [
        {"PutRequest": {"Item": json.loads(_item(pk, sk))}}
        for pk in ("a", "b")
        for sk in range(1, 13)
    ]
    for chunk in (requests[:12], requests[12:]):  # BatchWriteItem takes 25 at most
        answer = aws.ok("batch-write-item", "--request-items", json.dumps({"orders": chunk}))
        assert answer["UnprocessedItems"] == {}

    # --page-size makes the CLI follow LastEvaluatedKey / ExclusiveStartKey page by page.
    queried = aws.ok(
        "query",
        "--table-name", "orders",
        "--key-condition-expression", "pk = :p AND sk > :low",
        "--expression-attribute-values", json.dumps({":p": {"S": "b"}, ":low": {"N": "2"}}),
        "--no-scan-index-forward",
        "--page-size", "4",
    )  # fmt: skip
    assert [int(i["sk"]["N"]) for i in queried["Items"]] == list(range(12, 2, -1))
    assert queried["Count"] == 10

    scanned = aws.ok("scan", "--table-name", "orders", "--page-size", "5", "--select", "COUNT")
    assert scanned["Count"] == 24

    first = aws.ok("scan", "--table-name", "orders", "--max-items", "7")
    assert len(first["Items"]) == 7 and first["NextToken"]
    rest = aws.ok("scan", "--table-name", "orders", "--starting-token", first["NextToken"])
    keys = {(i["pk"]["S"], i["sk"]["N"]) for i in first["Items"] + rest["Items"]}
    assert len(keys) == 24


def test_a_cancelled_transaction_reports_its_reasons(aws: Aws) -> None:
    _create(aws)
    aws.ok("put-item", "--table-name", "orders", "--item", _item("taken", 1))
    items = [
        {"Put": {"TableName": "orders", "Item": json.loads(_item("new", 1))}},
        {
            "Put": {
                "TableName": "orders",
                "Item": json.loads(_item("taken", 1)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
    ]
    error = aws.fails("transact-write-items", "--transact-items", json.dumps(items))
    assert "TransactionCanceledException" in error
    assert "[None, ConditionalCheckFailed]" in error
    # All or nothing: the first put did not happen.
    key = json.dumps({"pk": {"S": "new"}, "sk": {"N": "1"}})
    # DynamoDB answers {} for a missing item, which the CLI prints as nothing.
    assert aws.ok("get-item", "--table-name", "orders", "--key", key) is None
    assert aws.ok("scan", "--table-name", "orders", "--select", "COUNT")["Count"] == 1


def test_bad_input_gets_dynamodb_validation_errors(aws: Aws) -> None:
    _create(aws)
    error = aws.fails(
        "put-item",
        "--table-name", "orders",
        "--item", _item("x", 1),
        "--condition-expression", "attribute_not_exists(",
    )  # fmt: skip
    assert "(ValidationException) when calling the PutItem operation: Invalid " in error
    assert "ConditionExpression: Syntax error" in error
    missing = aws.fails("describe-table", "--table-name", "nope")
    assert "(ResourceNotFoundException) when calling the DescribeTable operation" in missing


def test_require_auth_checks_the_cli_signature(
    cli_server: Callable[..., Any], tmp_path: Path
) -> None:
    server = cli_server("--require-auth", "AKIDCLI:right-secret")
    good = Aws(server.url, tmp_path, secret="right-secret")
    _create(good, "signed")
    assert good.ok("describe-table", "--table-name", "signed")["Table"]["TableName"] == "signed"
    wrong = Aws(server.url, tmp_path, secret="wrong-secret")
    assert "InvalidSignatureException" in wrong.fails("list-tables")
    stranger = Aws(server.url, tmp_path, key="AKIDOTHER", secret="right-secret")
    assert "UnrecognizedClientException" in stranger.fails("list-tables")
