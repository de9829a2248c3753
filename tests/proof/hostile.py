"""Hypothesis strategies for hostile DynamoDB requests, and how to send one and judge the answer.

:func:`requests` draws ``(operation, body)`` for every operation the engine serves (and some it
does not): the members each operation takes, filled with values that are valid, almost valid,
or of the wrong JSON type, plus members no operation has. AttributeValues nest, carry every type
tag and broken ones (non-ASCII digits, lone surrogates, bad base64, duplicate set members);
expressions are token soup from DynamoDB's grammar, deep parentheses and ``NOT`` chains.

:func:`verdict` says what is wrong with an answer: any 5xx, or a 4xx that is not one of
DynamoDB's own error types (413 is allowed only for a body over DynamoDB's 16 MB limit).

(Longer than our modules usually are: one strategy per member DynamoDB's API has, kept together.)
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any

import httpx
from hypothesis import strategies as st

TARGET = "DynamoDB_20120810."
STREAMS_TARGET = "DynamoDBStreams_20120810."
HEADERS = {"Content-Type": "application/x-amz-json-1.0"}
MAX_BODY = 16 * 1024 * 1024
TABLE = "hostile"  # exists: pk (S) + sk (N); the attack may delete and recreate it
# DynamoDB's own error types a request can earn (the part of __type after '#').
DYNAMODB_ERRORS = frozenset(
    {
        "ValidationException",
        "SerializationException",
        "UnknownOperationException",
        "ResourceNotFoundException",
        "ResourceInUseException",
        "ConditionalCheckFailedException",
        "TransactionCanceledException",
        "IdempotentParameterMismatchException",
        "LimitExceededException",
        "ItemCollectionSizeLimitExceededException",
        "ExpiredIteratorException",
        "TrimmedDataAccessException",
        "MissingAuthenticationTokenException",
        "AccessDeniedException",
    }
)
OPERATIONS = (
    "BatchGetItem",
    "BatchWriteItem",
    "CreateTable",
    "DeleteItem",
    "DeleteTable",
    "DescribeTable",
    "DescribeTimeToLive",
    "GetItem",
    "ListTables",
    "ListTagsOfResource",
    "PutItem",
    "Query",
    "Scan",
    "TagResource",
    "TransactGetItems",
    "TransactWriteItems",
    "UntagResource",
    "UpdateItem",
    "UpdateTable",
    "UpdateTimeToLive",
    "DescribeLimits",  # real DynamoDB operations the engine does not serve
    "ExecuteStatement",
    "Nonsense",
)
STREAM_OPERATIONS = ("DescribeStream", "GetRecords", "GetShardIterator", "ListStreams")


# --- values -----------------------------------------------------------------------------------

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.just([]),
    st.just({}),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
_strings = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "\ud800", "a\udfffb", "\x00", "é" * 3, "💥", "#", ":", "."]),
)
_numbers = st.one_of(
    st.integers(-(10**40), 10**40).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=5).map(str),
    st.sampled_from(
        ["", " 1", "1e126", "1e-131", "9" * 39, "9" * 40, "0x10", "NaN", "Infinity", "-0", "1_0"]
    ),
    # Digits that are not ASCII's (Arabic-Indic, full-width): issue 15, hole 6.
    st.sampled_from(["\u0661\u0662\u0663", "\uff11\uff12\uff13", "\u0663.\u0661", "1e\u0663"]),
    st.text(alphabet=string.digits + ".-+eE", max_size=12),
)
_binary = st.one_of(
    st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from(["", "=", "not base64!", "QQ", "QQ==="]),
)


def _set_of(member: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(member, max_size=4) | member.map(lambda m: [m, m])  # duplicates too


_scalar_values = st.one_of(
    st.builds(lambda v: {"S": v}, _strings),
    st.builds(lambda v: {"N": v}, _numbers),
    st.builds(lambda v: {"B": v}, _binary),
    st.builds(lambda v: {"BOOL": v}, st.booleans() | _junk),
    st.builds(lambda v: {"NULL": v}, st.booleans() | _junk),
    st.builds(lambda v: {"SS": v}, _set_of(_strings)),
    st.builds(lambda v: {"NS": v}, _set_of(_numbers)),
    st.builds(lambda v: {"BS": v}, _set_of(_binary)),
    st.builds(lambda v: {"X": v}, _junk),  # an unknown tag
    st.just({"S": "a", "N": "1"}),  # two tags
    st.just({}),
    _junk,
)
attribute_values = st.recursive(
    _scalar_values,
    lambda inner: st.one_of(
        st.builds(lambda v: {"L": v}, st.lists(inner, max_size=3)),
        st.builds(lambda v: {"M": v}, st.dictionaries(_strings, inner, max_size=3)),
    ),
    max_leaves=12,
)
_names = st.one_of(st.sampled_from(["pk", "sk", "a", "b", "exp"]), _strings)
items = st.dictionaries(_names, attribute_values, max_size=4) | _junk
keys = st.one_of(
    st.fixed_dictionaries({"pk": attribute_values, "sk": attribute_values}),
    st.dictionaries(_names, attribute_values, max_size=3),
    _junk,
)


# --- expressions --------------------------------------------------------------------------------

_tokens = st.sampled_from(
    [
        "AND",
        "OR",
        "NOT",
        "BETWEEN",
        "IN",
        "SET",
        "REMOVE",
        "ADD",
        "DELETE",
        "=",
        "<>",
        "<",
        "<=",
        ">",
        ">=",
        "(",
        ")",
        "[",
        "]",
        ",",
        ".",
        "+",
        "-",
        "attribute_exists",
        "attribute_not_exists",
        "attribute_type",
        "begins_with",
        "contains",
        "size",
        "if_not_exists",
        "list_append",
        "#n",
        "#k",
        ":v",
        ":w",
        "pk",
        "sk",
        "a",
        "b[0]",
        "a.b",
        "0",
        "1",
        ")",
        "(",
        "::",
        "##",
        "é",
        "\x00",
    ]
)
expressions = st.one_of(
    st.lists(_tokens, max_size=25).map(" ".join),
    st.integers(1, 400).map(lambda n: "NOT " * n + "a = :v"),  # hole 3: NOT chains
    st.integers(1, 400).map(lambda n: "(" * n + "a = :v" + ")" * n),  # deep parentheses
    st.integers(1, 60).map(lambda n: " AND ".join(["a = :v"] * n)),  # many operators
    st.integers(1, 40).map(lambda n: "SET " + ", ".join(f"#n{i} = :v" for i in range(n))),
    st.text(max_size=40),
    _junk,
)
_operands = st.sampled_from(
    ["#n", "#k", "a", "a.b", "a[0]", "#n.#k", "#n[1]", ":v", ":w", "size(#n)"]
)
_comparisons = st.one_of(
    st.builds(
        "{} {} {}".format, _operands, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), _operands
    ),
    st.builds("{} BETWEEN {} AND {}".format, _operands, _operands, _operands),
    st.builds("{} IN ({}, {})".format, _operands, _operands, _operands),
    st.builds("attribute_exists({})".format, _operands),
    st.builds("attribute_not_exists({})".format, _operands),
    st.builds("attribute_type({}, {})".format, _operands, _operands),
    st.builds("begins_with({}, {})".format, _operands, _operands),
    st.builds("contains({}, {})".format, _operands, _operands),
)
conditions = st.recursive(
    _comparisons,
    lambda inner: st.one_of(
        st.builds("{} AND {}".format, inner, inner),
        st.builds("{} OR {}".format, inner, inner),
        st.builds("NOT {}".format, inner),
        st.builds("({})".format, inner),
    ),
    max_leaves=8,
)
_set_values = st.one_of(
    _operands,
    st.builds("{} + {}".format, _operands, _operands),
    st.builds("{} - {}".format, _operands, _operands),
    st.builds("list_append({}, {})".format, _operands, _operands),
    st.builds("if_not_exists({}, {})".format, _operands, _operands),
)
_clauses = st.one_of(
    st.lists(st.builds("{} = {}".format, _operands, _set_values), min_size=1, max_size=3).map(
        lambda c: "SET " + ", ".join(c)
    ),
    st.lists(_operands, min_size=1, max_size=2).map(lambda c: "REMOVE " + ", ".join(c)),
    st.builds("ADD {} {}".format, _operands, _operands),
    st.builds("DELETE {} {}".format, _operands, _operands),
)
updates = st.lists(_clauses, min_size=1, max_size=3).map(" ".join)
expressions = st.one_of(conditions, updates, expressions)
expression_names = st.one_of(
    st.just({"#n": "a", "#k": "b"}),
    st.dictionaries(
        st.sampled_from(["#n", "#k", "#n0", "n", "#", ""]) | _strings, _names | _junk, max_size=4
    ),
)
expression_values = st.one_of(
    st.fixed_dictionaries({":v": attribute_values, ":w": attribute_values}),
    st.dictionaries(
        st.sampled_from([":v", ":w", ":x", "v", ":"]) | _strings, attribute_values, max_size=4
    ),
)


# --- requests -----------------------------------------------------------------------------------

_table_names = st.one_of(
    st.sampled_from([TABLE, TABLE, "missing", "", "a", "x" * 300, "bad name!", "ünï"]), _junk
)
_enums = (
    st.sampled_from(
        ["NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW", "TOTAL", "INDEXES", "SIZE"]
    )
    | _strings
)
_counts = st.integers(-5, 10**12) | _junk
_key_schema = st.lists(
    st.fixed_dictionaries(
        {"AttributeName": _names, "KeyType": st.sampled_from(["HASH", "RANGE", "X"]) | _junk}
    )
    | st.none(),
    max_size=3,
)
_definitions = st.lists(
    st.fixed_dictionaries(
        {"AttributeName": _names, "AttributeType": st.sampled_from(["S", "N", "B", "X"]) | _junk}
    ),
    max_size=3,
)


def _single(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """One transaction entry's inner request (also the shape of the single-item calls)."""
    members: dict[str, st.SearchStrategy[Any]] = {
        "TableName": _table_names,
        "ConditionExpression": expressions,
        "ExpressionAttributeNames": expression_names,
        "ExpressionAttributeValues": expression_values,
        "ReturnValuesOnConditionCheckFailure": _enums,
    }
    if kind == "Put":
        members["Item"] = items
    else:
        members["Key"] = keys
    if kind == "Update":
        members["UpdateExpression"] = expressions
    return st.fixed_dictionaries({}, optional=members)


_transact_items = st.lists(
    st.one_of(
        st.builds(lambda r: {"Put": r}, _single("Put")),
        st.builds(lambda r: {"Update": r}, _single("Update")),
        st.builds(lambda r: {"Delete": r}, _single("Delete")),
        st.builds(lambda r: {"ConditionCheck": r}, _single("Check")),
        st.builds(lambda r: {"Get": r}, _single("Get")),
        st.none(),
        _junk,
    ),
    max_size=4,
) | st.integers(0, 120).map(
    lambda n: [{"Get": {"TableName": TABLE, "Key": {"pk": {"S": "k"}}}}] * n
)

_request_items = st.dictionaries(
    _table_names.filter(lambda t: isinstance(t, str)),
    st.lists(
        st.one_of(
            st.builds(lambda i: {"PutRequest": {"Item": i}}, items),
            st.builds(lambda k: {"DeleteRequest": {"Key": k}}, keys),
            st.none(),
            _junk,
        ),
        max_size=30,
    )
    | st.fixed_dictionaries(
        {"Keys": st.lists(keys, max_size=4)}, optional={"ProjectionExpression": expressions}
    )
    | _junk,
    max_size=2,
)

MEMBERS: dict[str, st.SearchStrategy[Any]] = {
    "TableName": _table_names,
    "Key": keys,
    "Item": items,
    "ExclusiveStartKey": keys,
    "ConditionExpression": expressions,
    "UpdateExpression": expressions,
    "FilterExpression": expressions,
    "KeyConditionExpression": expressions,
    "ProjectionExpression": expressions,
    "ExpressionAttributeNames": expression_names,
    "ExpressionAttributeValues": expression_values,
    "ReturnValues": _enums,
    "ReturnValuesOnConditionCheckFailure": _enums,
    "ReturnConsumedCapacity": _enums,
    "ReturnItemCollectionMetrics": _enums,
    "ConsistentRead": st.booleans() | _junk,
    "ScanIndexForward": st.booleans() | _junk,
    "Select": st.sampled_from(["ALL_ATTRIBUTES", "COUNT", "SPECIFIC_ATTRIBUTES"]) | _strings,
    "Limit": _counts,
    "Segment": _counts,
    "TotalSegments": _counts,
    "AttributesToGet": st.lists(_names, max_size=3) | _junk,
    "Expected": st.dictionaries(_names, st.dictionaries(_strings, json_values, max_size=3)),
    "ConditionalOperator": st.sampled_from(["AND", "OR", "XOR"]) | _junk,
    "AttributeUpdates": st.dictionaries(_names, st.dictionaries(_strings, json_values, max_size=2)),
    "KeyConditions": st.dictionaries(_names, json_values, max_size=2),
    "QueryFilter": st.dictionaries(_names, json_values, max_size=2),
    "ScanFilter": st.dictionaries(_names, json_values, max_size=2),
    "TransactItems": _transact_items,
    "ClientRequestToken": _strings,
    "RequestItems": _request_items,
    "KeySchema": _key_schema | _junk,
    "AttributeDefinitions": _definitions | _junk,
    "BillingMode": st.sampled_from(["PAY_PER_REQUEST", "PROVISIONED"]) | _strings,
    "ProvisionedThroughput": st.dictionaries(
        st.sampled_from(["ReadCapacityUnits", "WriteCapacityUnits"]), _counts
    ),
    "StreamSpecification": st.dictionaries(
        st.sampled_from(["StreamEnabled", "StreamViewType"]), _junk | _enums
    ),
    "TimeToLiveSpecification": st.dictionaries(
        st.sampled_from(["Enabled", "AttributeName"]), _junk | _names
    ),
    "ReplicaUpdates": st.lists(st.dictionaries(_strings, json_values, max_size=2), max_size=2),
    "GlobalSecondaryIndexes": st.lists(json_values, max_size=2),
    "IndexName": _strings,
    "ResourceArn": _strings | st.just(f"arn:aws:dynamodb:us-east-1:000000000000:table/{TABLE}"),
    "Tags": st.lists(st.dictionaries(st.sampled_from(["Key", "Value"]), _strings), max_size=3),
    "TagKeys": st.lists(_strings, max_size=3) | _junk,
    "ExclusiveStartTableName": _strings,
    "StreamArn": _strings,
    "ShardId": _strings,
    "ShardIteratorType": st.sampled_from(["TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER"]) | _junk,
    "ShardIterator": _strings,
    "SequenceNumber": _strings,
}


_valid_key = st.fixed_dictionaries(
    {
        "pk": st.text(min_size=1, max_size=4).map(lambda s: {"S": s}),
        "sk": st.integers(0, 9).map(lambda n: {"N": str(n)}),
    }
)
_valid_item = st.builds(
    lambda k, rest: {**rest, **k}, _valid_key, st.dictionaries(_names, attribute_values, max_size=3)
)
_expressed = {
    "ExpressionAttributeNames": expression_names,
    "ExpressionAttributeValues": expression_values,
    "ReturnValues": _enums,
}
# Well-formed requests on the table that exists, with hostile expressions and values: these get
# past validation into parsing, evaluation and storage.
SKELETONS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "PutItem": st.fixed_dictionaries(
        {"TableName": st.just(TABLE), "Item": _valid_item},
        optional={"ConditionExpression": conditions, **_expressed},
    ),
    "UpdateItem": st.fixed_dictionaries(
        {"TableName": st.just(TABLE), "Key": _valid_key, "UpdateExpression": updates},
        optional={"ConditionExpression": conditions, **_expressed},
    ),
    "DeleteItem": st.fixed_dictionaries(
        {"TableName": st.just(TABLE), "Key": _valid_key},
        optional={"ConditionExpression": conditions, **_expressed},
    ),
    "GetItem": st.fixed_dictionaries(
        {"TableName": st.just(TABLE), "Key": _valid_key},
        optional={
            "ProjectionExpression": st.sampled_from(["a", "#n, a.b", "a[0], #k"]),
            **_expressed,
        },
    ),
    "Query": st.fixed_dictionaries(
        {
            "TableName": st.just(TABLE),
            "KeyConditionExpression": st.just("pk = :v"),
            "ExpressionAttributeValues": st.fixed_dictionaries(
                {":v": attribute_values, ":w": attribute_values}
            ),
        },
        optional={
            "FilterExpression": conditions,
            "Limit": _counts,
            "ScanIndexForward": st.booleans(),
        },
    ),
    "Scan": st.fixed_dictionaries(
        {"TableName": st.just(TABLE)},
        optional={"FilterExpression": conditions, **_expressed, "Limit": _counts},
    ),
    "TransactWriteItems": st.lists(
        st.builds(
            lambda key, update, cond, values: {
                "Update": {
                    "TableName": TABLE,
                    "Key": key,
                    "UpdateExpression": update,
                    "ConditionExpression": cond,
                    "ExpressionAttributeNames": {"#n": "a", "#k": "b"},
                    "ExpressionAttributeValues": values,
                }
            },
            _valid_key,
            updates,
            conditions,
            st.fixed_dictionaries({":v": attribute_values, ":w": attribute_values}),
        ),
        min_size=1,
        max_size=3,
    ).map(lambda items: {"TransactItems": items}),
}


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """``(X-Amz-Target, body)``: an operation and a hostile request for it."""
    if draw(st.booleans()):
        operation = draw(st.sampled_from(sorted(SKELETONS)))
        return TARGET + operation, draw(SKELETONS[operation])
    if draw(st.integers(0, 9)) == 0:
        target = STREAMS_TARGET + draw(st.sampled_from(STREAM_OPERATIONS))
    else:
        target = TARGET + draw(st.sampled_from(OPERATIONS))
    names = draw(st.lists(st.sampled_from(sorted(MEMBERS)), max_size=7, unique=True))
    body = {name: draw(MEMBERS[name]) for name in names}
    if draw(st.integers(0, 5)) == 0:
        body[draw(_strings)] = draw(json_values)  # a member no operation has
    return target, body


# --- sending and judging ------------------------------------------------------------------------


def send(http: httpx.Client, target: str | None, body: bytes, **headers: str) -> httpx.Response:
    sent = {**HEADERS, **headers}
    if target is not None:
        sent["X-Amz-Target"] = target
    return http.post("/", content=body, headers=sent)


def encode(body: Any) -> bytes:
    return json.dumps(body).encode()  # ensure_ascii: lone surrogates travel as \\ud800 escapes


def verdict(response: httpx.Response, sent_bytes: int) -> str | None:
    """What is wrong with ``response`` (None: nothing)."""
    status = response.status_code
    if status >= 500:
        return f"{status}: {response.text[:300]}"
    if status == 200:
        return None
    if status == 413:
        return None if sent_bytes > MAX_BODY else f"413 for {sent_bytes} bytes"
    if status == 404 and b"UnknownOperationException" in response.content:
        return None  # DynamoDB's answer to a body that is not JSON-typed
    try:
        error = response.json()
    except ValueError:
        return f"{status} with a body that is not JSON: {response.text[:200]}"
    kind = str(error.get("__type", "")).rpartition("#")[2]
    if status != 400 or kind not in DYNAMODB_ERRORS:
        return f"{status} {error}"
    return None
