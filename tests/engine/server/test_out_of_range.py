"""Integers and instants past what DynamoDB (or SQLite) can hold get a 400, never a 500.

Issue 27's findings 4 and 7, over real HTTP: a Query ``Limit`` of 2^63 on a table with a sort
key (or on its local or global secondary index) reached SQLite and failed there
(``OverflowError``, a 500 that SDKs retry); ``ReadCapacityUnits`` of 2^63 was accepted; after the
admin call ``clock {"set": 1e18}`` CreateTable answered 500. Every integer member is now checked
against its model type (Java's ``int`` or ``long``) before anything else, and the admin API
refuses an instant the engine cannot stand at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread

TARGET = "DynamoDB_20120810."
SERIALIZATION = "com.amazon.coral.service#SerializationException"
KEY = {"pk": {"S": "a"}, "sk": {"N": "1"}}


@pytest.fixture
def http(engine: Engine) -> Iterator[httpx.Client]:
    engine.execute(
        "CreateTable",
        {
            "TableName": "sorted",
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
                {"AttributeName": "g", "AttributeType": "S"},
            ],
            "LocalSecondaryIndexes": [
                {
                    "IndexName": "by-g",
                    "KeySchema": [
                        {"AttributeName": "pk", "KeyType": "HASH"},
                        {"AttributeName": "g", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": "global",
                    "KeySchema": [
                        {"AttributeName": "g", "KeyType": "HASH"},
                        {"AttributeName": "sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    engine.execute("PutItem", {"TableName": "sorted", "Item": {**KEY, "g": {"S": "x"}}})
    with ServerThread(engine) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def call(http: httpx.Client, operation: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(
        "/",
        content=json.dumps(body),
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": TARGET + operation,
        },
    )


QUERIES = {
    "table": {"KeyConditionExpression": "pk = :v", "ExpressionAttributeValues": {":v": {"S": "a"}}},
    "local index": {
        "IndexName": "by-g",
        "KeyConditionExpression": "pk = :v",
        "ExpressionAttributeValues": {":v": {"S": "a"}},
    },
    "global index": {
        "IndexName": "global",
        "KeyConditionExpression": "g = :v",
        "ExpressionAttributeValues": {":v": {"S": "x"}},
    },
}


@pytest.mark.parametrize("where", list(QUERIES))
@pytest.mark.parametrize("limit", [2**63, 2**64, 10**30, 2**31, 1e300])
def test_a_query_limit_past_an_int_is_a_400(http: httpx.Client, where: str, limit: Any) -> None:
    answer = call(http, "Query", {"TableName": "sorted", "Limit": limit, **QUERIES[where]})
    assert answer.status_code == 400, answer.text
    assert answer.json()["__type"] == SERIALIZATION
    assert "out of range of int" in answer.json()["Message"]


@pytest.mark.parametrize(
    ("operation", "member", "value"),
    [
        ("Scan", {"Limit": 2**63}, None),
        ("Scan", {"Segment": 2**63, "TotalSegments": 2}, None),
        ("ListTables", {"Limit": 2**63}, None),
    ],
)
def test_other_integer_members_past_their_type_are_400s(
    http: httpx.Client, operation: str, member: dict[str, Any], value: None
) -> None:
    body = {"TableName": "sorted", **member} if operation == "Scan" else member
    answer = call(http, operation, body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["__type"] == SERIALIZATION


def test_the_largest_int_limit_is_still_a_limit(http: httpx.Client) -> None:
    body = {"TableName": "sorted", "Limit": 2**31 - 1, **QUERIES["table"]}
    answer = call(http, "Query", body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["Count"] == 1


@pytest.mark.parametrize("units", [2**63, 2**70])
def test_capacity_units_past_a_long_are_refused(http: httpx.Client, units: int) -> None:
    answer = call(
        http,
        "CreateTable",
        {
            "TableName": "provisioned",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "ProvisionedThroughput": {"ReadCapacityUnits": units, "WriteCapacityUnits": 1},
        },
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["__type"] == SERIALIZATION
    assert "out of range of long" in answer.json()["Message"]
    assert call(http, "DescribeTable", {"TableName": "provisioned"}).status_code == 400


@pytest.mark.parametrize(
    "move", [{"set": 1e18}, {"advance": 1e18}, {"set": -1}, {"freeze": True, "set": 1e13}]
)
def test_the_admin_api_refuses_an_instant_the_engine_cannot_show(
    http: httpx.Client, engine: Engine, move: dict[str, Any]
) -> None:
    before = engine.clock.frozen
    answer = http.post("/_firstwrite/clock", json=move)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert engine.clock.frozen == before  # nothing applied
    created = call(
        http,
        "CreateTable",
        {
            "TableName": "after-the-clock",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    assert created.status_code == 200, created.text


def test_the_last_second_of_year_9999_is_a_time_the_engine_can_stand_at(
    http: httpx.Client,
) -> None:
    assert http.post("/_firstwrite/clock", json={"set": 253_402_300_799}).status_code == 200
    created = call(
        http,
        "CreateTable",
        {
            "TableName": "far-future",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        },
    )
    assert created.status_code == 200, created.text
    assert call(http, "PutItem", {"TableName": "far-future", "Item": KEY}).status_code == 200
