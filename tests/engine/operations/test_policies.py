"""Resource-based policies: PutResourcePolicy, GetResourcePolicy, DeleteResourcePolicy (in
process and over HTTP), and their evaluation for signed callers of a server started with
access keys (``--require-auth``).

Sources: the DynamoDB API reference for PutResourcePolicy (RevisionId; the same document put
again returns the same RevisionId; ExpectedRevisionId and ``NO_POLICY``; a mismatch is a
PolicyNotFoundException; 20 KB at most), GetResourcePolicy and DeleteResourcePolicy
(PolicyNotFoundException without a policy); the developer guide's "Using resource-based
policies for DynamoDB" (a table policy covers its indexes; a stream has its own) and IAM's
"Policy evaluation logic" (an explicit deny in a resource-based policy overrides any allow:
"... with an explicit deny in a resource-based policy").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.clock import Clock
from firstwrite.engine.server.app import ServerThread

ACCOUNT = "000000000000"


def failure(call: Any, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def make_table(ddb: Any, name: str) -> str:
    described = ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "tenant", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-tenant",
                "KeySchema": [{"AttributeName": "tenant", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return str(described["TableDescription"]["TableArn"])


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def deny(principal: Any, action: Any, resource: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Principal": principal, "Action": action, "Resource": resource}


def test_put_get_delete_with_revision_ids(ddb: Any, table_name: str) -> None:
    arn = make_table(ddb, table_name)
    missing = f"Resource-based policy not found for the provided ResourceArn: {arn}"
    assert failure(ddb.get_resource_policy, ResourceArn=arn) == ("PolicyNotFoundException", missing)
    assert failure(ddb.delete_resource_policy, ResourceArn=arn) == (
        "PolicyNotFoundException",
        missing,
    )
    first = policy(deny({"AWS": "*"}, "dynamodb:DeleteItem", arn))
    revision = ddb.put_resource_policy(ResourceArn=arn, Policy=first)["RevisionId"]
    assert revision.isdigit()
    got = ddb.get_resource_policy(ResourceArn=arn)
    assert (got["Policy"], got["RevisionId"]) == (first, revision)
    # The same document again: the same revision (the API reference: idempotent).
    assert ddb.put_resource_policy(ResourceArn=arn, Policy=first)["RevisionId"] == revision
    second = policy(deny("*", ["dynamodb:DeleteItem", "dynamodb:PutItem"], arn))
    # NO_POLICY: only when there is none; a stale ExpectedRevisionId is refused.
    code, _ = failure(
        ddb.put_resource_policy, ResourceArn=arn, Policy=second, ExpectedRevisionId="NO_POLICY"
    )
    assert code == "PolicyNotFoundException"
    code, _ = failure(
        ddb.put_resource_policy, ResourceArn=arn, Policy=second, ExpectedRevisionId="1"
    )
    assert code == "PolicyNotFoundException"
    newer = ddb.put_resource_policy(ResourceArn=arn, Policy=second, ExpectedRevisionId=revision)
    assert int(newer["RevisionId"]) > int(revision)
    assert ddb.get_resource_policy(ResourceArn=arn)["Policy"] == second
    code, _ = failure(ddb.delete_resource_policy, ResourceArn=arn, ExpectedRevisionId=revision)
    assert code == "PolicyNotFoundException"
    deleted = ddb.delete_resource_policy(ResourceArn=arn, ExpectedRevisionId=newer["RevisionId"])
    assert deleted["RevisionId"] == newer["RevisionId"]
    assert failure(ddb.get_resource_policy, ResourceArn=arn)[0] == "PolicyNotFoundException"
    fresh = ddb.put_resource_policy(ResourceArn=arn, Policy=first, ExpectedRevisionId="NO_POLICY")
    assert int(fresh["RevisionId"]) > int(newer["RevisionId"])


def test_refused_documents_and_resources(ddb: Any, table_name: str) -> None:
    arn = make_table(ddb, table_name)
    for document in (
        "not json",
        json.dumps({"Version": "2012-10-17"}),
        policy({"Effect": "Maybe", "Principal": "*", "Action": "dynamodb:GetItem"}),
        policy({"Effect": "Deny", "Action": "dynamodb:GetItem"}),
        policy({"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject"}),
        policy(deny("*", "dynamodb:GetItem", arn + "x" * 21_000)),  # over 20 KB
    ):
        code, _ = failure(ddb.put_resource_policy, ResourceArn=arn, Policy=document)
        assert code == "ValidationException", document[:60]
    code, message = failure(
        ddb.get_resource_policy, ResourceArn=arn.replace(table_name, table_name + "-gone")
    )
    assert code == "ResourceNotFoundException" and "-gone" in message
    assert failure(ddb.get_resource_policy, ResourceArn="table/x")[1].endswith(
        "ARNs must start with 'arn:': table/x"
    )


@pytest.fixture
def served(engine: Engine) -> Iterator[str]:
    with ServerThread(engine, credentials={"ALICE": "alice-secret", "BOB": "bob-secret"}) as url:
        yield url


def client(url: str, key: str) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=f"{key.lower()}-secret",
        config=Config(retries={"max_attempts": 0}),
    )


def test_an_explicit_deny_refuses_the_principal_it_names(served: str, table_name: str) -> None:
    alice, bob = client(served, "ALICE"), client(served, "BOB")
    arn = make_table(alice, table_name)
    item = {"pk": {"S": "1"}, "tenant": {"S": "acme"}}
    bob_arn = f"arn:aws:iam::{ACCOUNT}:user/BOB"
    alice.put_resource_policy(
        ResourceArn=arn,
        Policy=policy(
            deny({"AWS": bob_arn}, ["dynamodb:PutItem", "dynamodb:Query"], [arn, f"{arn}/index/*"]),
            {"Effect": "Allow", "Principal": "*", "Action": "dynamodb:*", "Resource": arn},
        ),
    )
    alice.put_item(TableName=table_name, Item=item)
    assert failure(bob.put_item, TableName=table_name, Item=item) == (
        "AccessDeniedException",
        f"User: {bob_arn} is not authorized to perform: dynamodb:PutItem on resource: {arn} "
        "with an explicit deny in a resource-based policy",
    )
    # A transaction's Put is a PutItem to IAM; a read the policy does not name stays open.
    put = {"Put": {"TableName": table_name, "Item": item}}
    code, _ = failure(bob.transact_write_items, TransactItems=[put])
    assert code == "AccessDeniedException"
    assert bob.get_item(TableName=table_name, Key={"pk": {"S": "1"}})["Item"] == item
    code, message = failure(
        bob.query,
        TableName=table_name,
        IndexName="by-tenant",
        KeyConditionExpression="tenant = :t",
        ExpressionAttributeValues={":t": {"S": "acme"}},
    )
    assert code == "AccessDeniedException" and f"{arn}/index/by-tenant" in message
    # A Condition is not evaluated: that statement refuses nothing.
    alice.put_resource_policy(
        ResourceArn=arn,
        Policy=policy(
            {
                **deny("*", "dynamodb:GetItem", arn),
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ),
    )
    bob.put_item(TableName=table_name, Item=item)
    assert bob.get_item(TableName=table_name, Key={"pk": {"S": "1"}})["Item"] == item


def test_a_policy_that_locks_its_writer_out_needs_confirmation(
    served: str, table_name: str
) -> None:
    alice = client(served, "ALICE")
    arn = make_table(alice, table_name)
    lockout = policy(deny("*", "dynamodb:*ResourcePolicy", arn))
    code, message = failure(alice.put_resource_policy, ResourceArn=arn, Policy=lockout)
    assert code == "ValidationException" and "ConfirmRemoveSelfResourceAccess" in message
    alice.put_resource_policy(ResourceArn=arn, Policy=lockout, ConfirmRemoveSelfResourceAccess=True)
    assert failure(alice.delete_resource_policy, ResourceArn=arn)[0] == "AccessDeniedException"


def test_in_process_calls_are_never_refused(tmp_path: Any) -> None:
    """The operator's way back from a lockout: an unsigned, in-process call."""
    from firstwrite.engine.direct.client import DirectClient

    with Engine(tmp_path / "p.db", clock=Clock()) as engine:
        direct = DirectClient(engine)
        arn = make_table(direct, "locked")
        direct.put_resource_policy(ResourceArn=arn, Policy=policy(deny("*", "dynamodb:*", arn)))
        direct.delete_resource_policy(ResourceArn=arn)
        assert failure(direct.get_resource_policy, ResourceArn=arn)[0] == "PolicyNotFoundException"


def test_create_table_sets_a_resource_policy(ddb: Any, table_name: str) -> None:
    """CreateTable's ResourcePolicy (the API reference): stored as PutResourcePolicy stores
    it; a refused document refuses the CreateTable and leaves no table."""
    arn = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{table_name}"
    document = policy(deny("*", "dynamodb:DeleteTable", arn))
    params: dict[str, Any] = {
        "TableName": table_name,
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    code, _ = failure(ddb.create_table, **params, ResourcePolicy="{not json")
    assert code == "ValidationException"
    assert table_name not in ddb.list_tables()["TableNames"]
    ddb.create_table(**params, ResourcePolicy=document)
    got = ddb.get_resource_policy(ResourceArn=arn)
    assert got["Policy"] == document and got["RevisionId"].isdigit()
