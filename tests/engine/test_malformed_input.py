"""Malformed requests get DynamoDB's own 400, never a 500 (which clients and the layer retry).

Each case is a raw DynamoDB JSON 1.0 request sent over real HTTP to a served engine: null list
entries, names of the wrong JSON type, lone surrogates, deep nesting, expressions built to be
expensive, numbers written with digits other than ASCII's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread

TARGET = "DynamoDB_20120810."
VALIDATION = "com.amazon.coral.validate#ValidationException"
SERIALIZATION = "com.amazon.coral.service#SerializationException"


@pytest.fixture
def http(engine: Engine) -> Iterator[httpx.Client]:
    for name, kind in (("strings", "S"), ("numbers", "N")):
        engine.execute(
            "CreateTable",
            {
                "TableName": name,
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": kind}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )
    with ServerThread(engine) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def call(
    http: httpx.Client, operation: str, body: str | bytes | dict[str, object]
) -> httpx.Response:
    content = json.dumps(body) if isinstance(body, dict) else body
    return http.post(
        "/",
        content=content,
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": TARGET + operation,
        },
    )


def error(response: httpx.Response) -> tuple[str, str | None]:
    assert response.status_code == 400, (response.status_code, response.text)
    body = response.json()
    return body["__type"], body.get("message", body.get("Message"))


def _null_member(path: str) -> str:
    return (
        f"1 validation error detected: Value null at '{path}' failed to satisfy constraint: "
        "Member must not be null"
    )


def _table(name: str, key_schema: list[object], definitions: list[object]) -> dict[str, object]:
    return {
        "TableName": name,
        "KeySchema": key_schema,
        "AttributeDefinitions": definitions,
        "BillingMode": "PAY_PER_REQUEST",
    }


HASH = {"AttributeName": "pk", "KeyType": "HASH"}
STRING_PK = {"AttributeName": "pk", "AttributeType": "S"}


@pytest.mark.parametrize(
    ("operation", "body", "path"),
    [
        ("TransactWriteItems", {"TransactItems": [None]}, "transactItems.1.member"),
        ("TransactGetItems", {"TransactItems": [None]}, "transactItems.1.member"),
        (
            "BatchWriteItem",
            {"RequestItems": {"strings": [None]}},
            "requestItems.strings.member.1.member",
        ),
        (
            "BatchGetItem",
            {"RequestItems": {"strings": {"Keys": [None]}}},
            "requestItems.strings.member.keys.1.member",
        ),
        ("CreateTable", _table("t-null-ks", [None], [STRING_PK]), "keySchema.1.member"),
        ("CreateTable", _table("t-null-ad", [HASH], [None]), "attributeDefinitions.1.member"),
    ],
)
def test_null_list_entries(
    http: httpx.Client, operation: str, body: dict[str, object], path: str
) -> None:
    assert error(call(http, operation, body)) == (VALIDATION, _null_member(path))


@pytest.mark.parametrize(
    ("value", "kind"), [(["x"], "START_ARRAY"), ({"x": 1}, "START_OBJECT"), (5, "NUMBER_VALUE")]
)
@pytest.mark.parametrize("operation", ["GetItem", "PutItem", "Query", "TransactWriteItems"])
def test_expression_attribute_names_values_must_be_strings(
    http: httpx.Client, operation: str, value: object, kind: str
) -> None:
    names = {"#a": value}
    requests: dict[str, dict[str, object]] = {
        "GetItem": {
            "TableName": "strings",
            "Key": {"pk": {"S": "a"}},
            "ProjectionExpression": "#a",
            "ExpressionAttributeNames": names,
        },
        "PutItem": {
            "TableName": "strings",
            "Item": {"pk": {"S": "a"}},
            "ConditionExpression": "attribute_exists(#a)",
            "ExpressionAttributeNames": names,
        },
        "Query": {
            "TableName": "strings",
            "KeyConditionExpression": "#a = :v",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":v": {"S": "a"}},
        },
        "TransactWriteItems": {
            "TransactItems": [
                {
                    "ConditionCheck": {
                        "TableName": "strings",
                        "Key": {"pk": {"S": "a"}},
                        "ConditionExpression": "attribute_exists(#a)",
                        "ExpressionAttributeNames": names,
                    }
                }
            ]
        },
    }
    assert error(call(http, operation, requests[operation])) == (
        SERIALIZATION,
        f"{kind} cannot be converted to String",
    )


@pytest.mark.parametrize(
    "body",
    [
        '{"TableName":"strings","Item":{"pk":{"S":"\\ud800"}}}',  # lone high half, escaped
        '{"TableName":"strings","Item":{"pk":{"S":"a"},"x":{"S":"\\udc00x"}}}',  # lone low half
        '{"TableName":"strings","Item":{"pk":{"S":"a"},"\\uDBFF":{"S":"x"}}}',  # in a name
        '{"TableName":"strings","Item":{"pk":{"S":"a\\\\\\udc00"}}}',  # after an escaped \\
        b'{"TableName":"strings","Item":{"pk":{"S":"\xed\xa0\x80"}}}',  # encoded (CESU-8)
        b'{"TableName":"strings","Item":{"pk":{"S":"\xff"}}}',  # not UTF-8 at all
    ],
)
def test_lone_surrogates_and_bad_encodings_are_serialization_errors(
    http: httpx.Client, body: str | bytes
) -> None:
    # As for any body DynamoDB cannot read as Unicode text: a bare SerializationException.
    response = call(http, "PutItem", body)
    assert response.status_code == 400
    assert response.json() == {"__type": SERIALIZATION}


def test_surrogate_pairs_and_escaped_backslashes_are_fine(
    http: httpx.Client, engine: Engine
) -> None:
    # boto3 writes non-BMP characters as escaped surrogate pairs: those are one character.
    body = '{"TableName":"strings","Item":{"pk":{"S":"\\ud83d\\ude00"},"x":{"S":"\\\\ud800"}}}'
    assert call(http, "PutItem", body).status_code == 200
    item = engine.execute("GetItem", {"TableName": "strings", "Key": {"pk": {"S": "\U0001f600"}}})
    assert item["Item"]["x"] == {"S": "\\ud800"}


def _nested_map(levels: int) -> str:
    return '{"M":{"a":' * levels + '{"S":"x"}' + "}}" * levels


@pytest.mark.parametrize("levels", [40, 300, 480])
def test_deeply_nested_items_are_a_validation_error(http: httpx.Client, levels: int) -> None:
    body = f'{{"TableName":"strings","Item":{{"pk":{{"S":"a"}},"x":{_nested_map(levels)}}}}}'
    assert error(call(http, "PutItem", body)) == (
        VALIDATION,
        "Nesting Levels have exceeded supported limits: Attributes in the item have nested levels "
        "beyond supported limit",
    )


@pytest.mark.parametrize(
    ("operation", "body"),
    [
        ("PutItem", '{"TableName":"strings","Item":' + "[" * 5000 + "]" * 5000 + "}"),
        (
            "PutItem",
            '{"TableName":"strings","Item":{"pk":{"S":"a"},"x":' + _nested_map(3000) + "}}",
        ),
        ("GetItem", '{"TableName":"strings","Key":{"pk":' + _nested_map(2000) + "}}"),
        ("ListTables", '{"Unknown":' + '{"a":' * 4000 + "1" + "}" * 4000 + "}"),
    ],
)
def test_documents_too_deep_to_read_are_serialization_errors(
    http: httpx.Client, operation: str, body: str
) -> None:
    response = call(http, operation, body)
    assert response.status_code == 400
    assert response.json() == {"__type": SERIALIZATION}


def test_deep_values_in_constraint_messages(http: httpx.Client) -> None:
    # AWS quotes the offending value in the message; a value nested 450 deep must not break
    # the quoting (it recursed).
    keys = "[" * 450 + "]" * 450
    body = '{"RequestItems":{"t":{"Keys":[' + keys + "]}}}"
    kind, message = error(call(http, "BatchGetItem", body))
    assert kind == VALIDATION
    assert message is not None and message.startswith("1 validation error detected: Value '{t={")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "NOT " * 1000 + "attribute_exists(pk)",
            "The expression contains too many operators; operator count: 301",
        ),
        (
            "(" * 1000 + "attribute_exists(pk)" + ")" * 1000,
            "The expression has redundant parentheses;",
        ),
        (
            "NOT (" * 340 + "attribute_exists(pk)" + ")" * 340,
            "The expression contains too many operators; operator count: 301",
        ),
        (
            " AND ".join(["attribute_exists(pk)"] * 160),
            "The expression contains too many operators; operator count: 301",
        ),
    ],
)
def test_expensive_expressions_are_refused_by_their_cost(
    http: httpx.Client, expression: str, message: str
) -> None:
    assert len(expression.encode()) <= 4096
    body = {"TableName": "strings", "Item": {"pk": {"S": "a"}}, "ConditionExpression": expression}
    assert error(call(http, "PutItem", body)) == (
        VALIDATION,
        f"Invalid ConditionExpression: {message}",
    )


def test_deep_but_valid_expressions_still_work(http: httpx.Client, engine: Engine) -> None:
    # 299 NOTs, each around a parenthesised condition: within every DynamoDB limit.
    expression = "NOT (" * 299 + "attribute_exists(pk)" + ")" * 299
    body = {"TableName": "strings", "Item": {"pk": {"S": "a"}}, "ConditionExpression": expression}
    assert call(http, "PutItem", body).status_code == 200  # odd NOT count: "does not exist"


# Arabic-Indic, full-width (U+FF11..), Persian, mixed, Devanagari.
@pytest.mark.parametrize("digits", ["١٢٣", "\uff11\uff12\uff13", "۱۲", "1٢3", "१"])
@pytest.mark.parametrize("where", ["key", "attribute", "set", "expression value"])
def test_non_ascii_digits_are_not_numbers(http: httpx.Client, digits: str, where: str) -> None:
    requests: dict[str, tuple[str, dict[str, object]]] = {
        "key": ("PutItem", {"TableName": "numbers", "Item": {"pk": {"N": digits}}}),
        "attribute": (
            "PutItem",
            {"TableName": "strings", "Item": {"pk": {"S": "a"}, "n": {"N": digits}}},
        ),
        "set": (
            "PutItem",
            {"TableName": "strings", "Item": {"pk": {"S": "a"}, "n": {"NS": ["1", digits]}}},
        ),
        "expression value": (
            "UpdateItem",
            {
                "TableName": "strings",
                "Key": {"pk": {"S": "a"}},
                "UpdateExpression": "SET n = :n",
                "ExpressionAttributeValues": {":n": {"N": digits}},
            },
        ),
    }
    operation, body = requests[where]
    kind, message = error(call(http, operation, body))
    assert kind == VALIDATION
    assert message is not None and "The parameter cannot be converted to a numeric value" in message
