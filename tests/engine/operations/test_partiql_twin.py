"""Property: PartiQL statements leave the same state and return the same items as their
equivalent GetItem / Query / Scan / PutItem / UpdateItem / DeleteItem on a twin table."""

from __future__ import annotations

import itertools
from typing import Any

from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstwrite.engine.api import Engine
from firstwrite.engine.direct.client import DirectClient
from hypothesis_budget import examples

_names = itertools.count()
PKS = st.sampled_from(["a", "b", "c"])
SKS = st.integers(0, 4)
VALUES = st.integers(-3, 3)
OPERATIONS = st.one_of(
    st.tuples(st.just("insert"), PKS, SKS, VALUES),
    st.tuples(st.just("update"), PKS, SKS, VALUES),
    st.tuples(st.just("delete"), PKS, SKS, VALUES),
    st.tuples(st.just("get"), PKS, SKS, VALUES),
    st.tuples(st.just("query"), PKS, SKS, VALUES),
    st.tuples(st.just("scan"), PKS, SKS, VALUES),
)


def _create(client: DirectClient, name: str) -> None:
    client.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except ClientError as error:
        return "error", error.response["Error"]["Code"]


def _partiql(client: DirectClient, table: str, op: tuple[str, str, int, int]) -> tuple[str, Any]:
    kind, pk, sk, value = op
    key = [{"S": pk}, {"N": str(sk)}]

    def run(statement: str, *parameters: dict[str, Any]) -> list[dict[str, Any]]:
        kw: dict[str, Any] = {"Parameters": list(parameters)} if parameters else {}
        return client.execute_statement(Statement=statement, **kw)["Items"]  # type: ignore[no-any-return]

    t = f'"{table}"'
    if kind == "insert":
        return _outcome(
            lambda: run(
                f"INSERT INTO {t} VALUE {{'pk': ?, 'sk': ?, 'a': ?}}", *key, {"N": str(value)}
            )
        )
    if kind == "update":
        return _outcome(
            lambda: run(
                f"UPDATE {t} SET a = a + ? WHERE pk = ? AND sk = ?", {"N": str(value)}, *key
            )
        )
    if kind == "delete":
        return _outcome(
            lambda: run(
                f"DELETE FROM {t} WHERE pk = ? AND sk = ? AND a <> ?", *key, {"N": str(value)}
            )
        )
    if kind == "get":
        return _outcome(lambda: run(f"SELECT * FROM {t} WHERE pk = ? AND sk = ?", *key))
    if kind == "query":
        return _outcome(
            lambda: run(
                f"SELECT sk, a FROM {t} WHERE pk = ? AND sk >= ? AND a > ?", *key, {"N": str(value)}
            )
        )
    return _outcome(
        lambda: run(f"SELECT * FROM {t} WHERE a = ? OR sk = ?", {"N": str(value)}, key[1])
    )


def _api(client: DirectClient, table: str, op: tuple[str, str, int, int]) -> tuple[str, Any]:
    kind, pk, sk, value = op
    key = {"pk": {"S": pk}, "sk": {"N": str(sk)}}
    number = {"N": str(value)}
    if kind == "insert":
        outcome = _outcome(
            lambda: (
                client.put_item(
                    TableName=table,
                    Item={**key, "a": number},
                    ConditionExpression="attribute_not_exists(pk)",
                )
                and []
            )
        )
        if outcome == ("error", "ConditionalCheckFailedException"):
            return "error", "DuplicateItemException"
        return outcome
    if kind == "update":
        return _outcome(
            lambda: (
                client.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET a = a + :v",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":v": number},
                )
                and []
            )
        )
    if kind == "delete":
        return _outcome(
            lambda: (
                client.delete_item(
                    TableName=table,
                    Key=key,
                    ConditionExpression="a <> :v",
                    ExpressionAttributeValues={":v": number},
                )
                and []
            )
        )
    if kind == "get":
        return _outcome(
            lambda: [i] if (i := client.get_item(TableName=table, Key=key).get("Item")) else []
        )
    if kind == "query":
        return _outcome(
            lambda: client.query(
                TableName=table,
                KeyConditionExpression="pk = :p AND sk >= :s",
                FilterExpression="a > :v",
                ProjectionExpression="sk, a",
                ExpressionAttributeValues={":p": key["pk"], ":s": key["sk"], ":v": number},
            )["Items"]
        )
    return _outcome(
        lambda: client.scan(
            TableName=table,
            FilterExpression="a = :v OR sk = :s",
            ExpressionAttributeValues={":v": number, ":s": key["sk"]},
        )["Items"]
    )


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(OPERATIONS, min_size=1, max_size=25))
def test_partiql_matches_its_equivalent_requests(
    engine: Engine, operations: list[tuple[str, str, int, int]]
) -> None:
    client = DirectClient(engine, region="us-east-1")
    n = next(_names)
    ours, theirs = f"twin-partiql-{n}", f"twin-api-{n}"
    _create(client, ours)
    _create(client, theirs)
    for op in operations:
        assert _partiql(client, ours, op) == _api(client, theirs, op), op
    assert client.scan(TableName=ours)["Items"] == client.scan(TableName=theirs)["Items"]
