"""Query and Scan: key conditions, ordering, paging (Limit and 1 MB), Select, filters, segments."""

from __future__ import annotations

import math
import uuid
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstwrite.engine.api import Engine
from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.operations.query import MAX_PAGE_BYTES, segment_of
from firstwrite.engine.values import item_size, normalize_number
from hypothesis_budget import examples

# --- helpers ---------------------------------------------------------------------------------


def create(
    engine: Engine, name: str = "tbl", *, sort: str | None = "N", hash_type: str = "S"
) -> None:
    definitions = [{"AttributeName": "pk", "AttributeType": hash_type}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if sort is not None:
        definitions.append({"AttributeName": "sk", "AttributeType": sort})
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
    engine.execute(
        "CreateTable",
        {
            "TableName": name,
            "AttributeDefinitions": definitions,
            "KeySchema": schema,
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


def put(engine: Engine, item: dict[str, Any], name: str = "tbl") -> None:
    engine.execute("PutItem", {"TableName": name, "Item": item})


def query(engine: Engine, name: str = "tbl", **params: Any) -> dict[str, Any]:
    return engine.execute("Query", {"TableName": name, **params})


def scan(engine: Engine, name: str = "tbl", **params: Any) -> dict[str, Any]:
    return engine.execute("Scan", {"TableName": name, **params})


def q_pk(
    engine: Engine,
    cond: str = "",
    values: dict[str, Any] | None = None,
    *,
    pk: str = "p",
    **params: Any,
) -> dict[str, Any]:
    """Query partition ``pk`` with an optional sort-key condition."""
    expression = "pk = :pk" + (f" AND {cond}" if cond else "")
    return query(
        engine,
        KeyConditionExpression=expression,
        ExpressionAttributeValues={":pk": {"S": pk}, **(values or {})},
        **params,
    )


def error(fn: Any, *args: Any, **kwargs: Any) -> DynamoDBError:
    with pytest.raises(DynamoDBError) as info:
        fn(*args, **kwargs)
    return info.value


def sks(response: dict[str, Any]) -> list[str]:
    return [next(iter(item["sk"].values())) for item in response["Items"]]


NUMBERS = [
    "-1e10",
    "-100",
    "-1.5",
    "-1.25",
    "-1",
    "-0.001",
    "0",
    "1e-130",
    "0.5",
    "1",
    "1.25",
    "1.5",
    "2",
    "10",
    "99.99",
    "100",
    "12345678901234567890123456789012345678",
    "9e125",
]


@pytest.fixture
def numeric(engine: Engine) -> Engine:
    create(engine)
    for text in reversed(NUMBERS):
        put(engine, {"pk": {"S": "p"}, "sk": {"N": text}, "n": {"N": text}})
    put(engine, {"pk": {"S": "other"}, "sk": {"N": "1"}})
    return engine


def normalised(texts: list[str]) -> list[str]:
    return [normalize_number(t) for t in texts]


# --- key conditions and ordering -------------------------------------------------------------


def test_query_returns_partition_in_numeric_sort_key_order(numeric: Engine) -> None:
    response = q_pk(numeric)
    assert sks(response) == normalised(NUMBERS)
    assert response["Count"] == response["ScannedCount"] == len(NUMBERS)
    assert "LastEvaluatedKey" not in response


def test_scan_index_forward_false_reverses(numeric: Engine) -> None:
    assert sks(q_pk(numeric, ScanIndexForward=False)) == normalised(NUMBERS)[::-1]


@pytest.mark.parametrize(
    ("cond", "values", "expected"),
    [
        ("sk = :a", {":a": "1.25"}, ["1.25"]),
        ("sk < :a", {":a": "-1"}, ["-1e10", "-100", "-1.5", "-1.25"]),
        ("sk <= :a", {":a": "-1"}, ["-1e10", "-100", "-1.5", "-1.25", "-1"]),
        ("sk > :a", {":a": "99.99"}, ["100", "12345678901234567890123456789012345678", "9e125"]),
        ("sk >= :a", {":a": "100"}, ["100", "12345678901234567890123456789012345678", "9e125"]),
        ("sk BETWEEN :a AND :b", {":a": "-1.5", ":b": "0"}, ["-1.5", "-1.25", "-1", "-0.001", "0"]),
        ("sk BETWEEN :a AND :b", {":a": "0", ":b": "1e-129"}, ["0", "1e-130"]),
    ],
)
def test_numeric_sort_key_conditions(
    numeric: Engine, cond: str, values: dict[str, str], expected: list[str]
) -> None:
    response = q_pk(numeric, cond, {k: {"N": v} for k, v in values.items()})
    assert sks(response) == normalised(expected)
    reverse = q_pk(numeric, cond, {k: {"N": v} for k, v in values.items()}, ScanIndexForward=False)
    assert sks(reverse) == normalised(expected)[::-1]


def test_sort_key_condition_may_come_first(numeric: Engine) -> None:
    response = query(
        numeric,
        KeyConditionExpression="sk > :a AND pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "p"}, ":a": {"N": "99.99"}},
    )
    assert response["Count"] == 3


def test_begins_with_on_string_sort_key(engine: Engine) -> None:
    create(engine, sort="S")
    for sk in ["a", "ab", "abc", "abd", "ac", "b", "a\uffff", "é", "éa", "z"]:
        put(engine, {"pk": {"S": "p"}, "sk": {"S": sk}})
    response = q_pk(engine, "begins_with(sk, :p)", {":p": {"S": "ab"}})
    assert sks(response) == ["ab", "abc", "abd"]
    response = q_pk(engine, "begins_with(sk, :p)", {":p": {"S": "é"}})
    assert sks(response) == ["é", "éa"]
    # UTF-8 byte order: "a\uffff" (61 EF BF BF) sorts after "ac" and before "b".
    assert sks(q_pk(engine, "begins_with(sk, :p)", {":p": {"S": "a"}})) == [
        "a",
        "ab",
        "abc",
        "abd",
        "ac",
        "a\uffff",
    ]


def test_binary_sort_keys_order_unsigned_and_begins_with(engine: Engine) -> None:
    create(engine, sort="B")
    values = [
        b"\x00",
        b"\x01",
        b"\x7f",
        b"\x80",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
        b"\xff\xff\x01",
    ]
    for value in reversed(values):
        put(engine, {"pk": {"S": "p"}, "sk": {"B": value}})
    assert sks(q_pk(engine)) == values
    assert sks(q_pk(engine, "begins_with(sk, :p)", {":p": {"B": b"\xff"}})) == values[4:]
    # A prefix of 0xFF bytes has no successor: the range is open-ended.
    assert sks(q_pk(engine, "begins_with(sk, :p)", {":p": {"B": b"\xff\xff"}})) == values[6:]
    assert sks(q_pk(engine, "sk > :p", {":p": {"B": b"\x7f"}})) == values[3:]


def test_hash_only_table_query(engine: Engine) -> None:
    create(engine, sort=None)
    put(engine, {"pk": {"S": "a"}, "x": {"S": "1"}})
    put(engine, {"pk": {"S": "b"}})
    response = q_pk(engine, pk="a")
    assert response["Items"] == [{"pk": {"S": "a"}, "x": {"S": "1"}}]


def test_query_key_condition_errors(numeric: Engine) -> None:
    assert error(query, numeric).message == (
        "Either the KeyConditions or KeyConditionExpression parameter must be specified in the "
        "request."
    )
    err = error(q_pk, numeric, "sk > :a", {":a": {"S": "x"}})
    assert err.message == (
        "One or more parameter values were invalid: Condition parameter type does not match "
        "schema type"
    )
    query_error = error(
        query,
        numeric,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"N": "1"}},
    )
    assert query_error.message.endswith("Condition parameter type does not match schema type")
    err = error(q_pk, numeric, "begins_with(sk, :a)", {":a": {"N": "1"}})
    assert err.code == "ValidationException" and "begins_with" in err.message


def test_between_bounds_must_be_ordered(numeric: Engine) -> None:
    err = error(q_pk, numeric, "sk BETWEEN :a AND :b", {":a": {"N": "5"}, ":b": {"N": "3"}})
    assert err.message == (
        "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater "
        "than or equal to lower bound; lower bound operand: AttributeValue: {N:5}, upper bound "
        "operand: AttributeValue: {N:3}"
    )


def test_query_filter_on_key_attribute_is_refused(numeric: Engine) -> None:
    err = error(q_pk, numeric, "", {":a": {"N": "1"}}, FilterExpression="sk > :a")
    assert err.message == (
        "Filter Expression can only contain non-primary key attributes: Primary key attribute: sk"
    )


def test_unknown_table_and_index(engine: Engine) -> None:
    err = error(q_pk, engine)
    assert (err.code, err.message) == ("ResourceNotFoundException", "Requested resource not found")
    err = error(scan, engine)
    assert err.code == "ResourceNotFoundException"
    create(engine)
    err = error(q_pk, engine, IndexName="by-x")
    assert err.code == "ValidationException"
    assert err.message == "The table does not have the specified index: by-x"
    assert error(scan, engine, IndexName="by-x").message == err.message


# --- filter, Select, projection --------------------------------------------------------------


def test_filter_applies_after_limit_count_vs_scanned(numeric: Engine) -> None:
    response = q_pk(numeric, "", {":z": {"N": "0"}}, FilterExpression="n > :z", Limit=7)
    # The first 7 items read are all negative or zero: none match, yet the page goes on.
    assert response["Count"] == 0 and response["Items"] == []
    assert response["ScannedCount"] == 7
    assert response["LastEvaluatedKey"] == {"pk": {"S": "p"}, "sk": {"N": "0"}}
    response = q_pk(numeric, "", {":z": {"N": "0"}}, FilterExpression="n > :z")
    assert response["Count"] == 11 and response["ScannedCount"] == len(NUMBERS)


def test_select_count_omits_items(numeric: Engine) -> None:
    response = q_pk(numeric, Select="COUNT")
    assert "Items" not in response
    assert response["Count"] == len(NUMBERS)
    response = scan(numeric, Select="COUNT", Limit=3)
    assert "Items" not in response and response["Count"] == 3 and "LastEvaluatedKey" in response


def test_projection_and_specific_attributes(numeric: Engine) -> None:
    response = q_pk(
        numeric,
        "sk = :a",
        {":a": {"N": "2"}},
        ProjectionExpression="#n",
        ExpressionAttributeNames={"#n": "n"},
        Select="SPECIFIC_ATTRIBUTES",
    )
    assert response["Items"] == [{"n": {"N": "2"}}]
    assert scan(numeric, ProjectionExpression="pk", Limit=1)["Items"] == [{"pk": {"S": "other"}}]


@pytest.mark.parametrize("operation", ["Query", "Scan"])
def test_select_errors(numeric: Engine, operation: str) -> None:
    prefix = "1 validation error detected: " if operation == "Query" else ""
    base: dict[str, Any] = {"TableName": "tbl"}
    if operation == "Query":
        base.update(
            KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": "p"}}
        )

    def err(**params: Any) -> str:
        with pytest.raises(DynamoDBError) as info:
            numeric.execute(operation, {**base, **params})
        assert info.value.code == "ValidationException"
        return info.value.message

    assert err(Select="SPECIFIC_ATTRIBUTES") == (
        f"{prefix}Must specify the AttributesToGet or ProjectionExpression when choosing to get "
        "SPECIFIC_ATTRIBUTES"
    )
    assert err(Select="ALL_PROJECTED_ATTRIBUTES") == (
        f"{prefix}ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName"
    )
    for select, what in [
        ("ALL_ATTRIBUTES", "ALL_ATTRIBUTES"),
        ("COUNT", "only the Count"),
        ("ALL_PROJECTED_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES"),
    ]:
        assert err(Select=select, ProjectionExpression="pk") == (
            f"{prefix}Cannot specify the ProjectionExpression when choosing to get {what}"
        )
    assert err(Select="count") == (
        "1 validation error detected: Value 'count' at 'select' failed to satisfy constraint: "
        "Member must satisfy enum value set: [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, "
        "ALL_PROJECTED_ATTRIBUTES]"
    )
    # Query words its Limit the newer way, Scan the older: the conformance suite's records of
    # DynamoDB (tests/tier3/error-messages/query.test.ts and scan.test.ts, "Limit of 0").
    limit = "Value at 'Limit'" if operation == "Query" else "Value '0' at 'limit'"
    assert err(Limit=0) == (
        f"1 validation error detected: {limit} failed to satisfy constraint: "
        "Member must have value greater than or equal to 1"
    )


# --- paging ----------------------------------------------------------------------------------


def pages(fn: Any, engine: Engine, **params: Any) -> list[dict[str, Any]]:
    out = []
    start = None
    while True:
        extra = {"ExclusiveStartKey": start} if start else {}
        response = fn(engine, **params, **extra)
        out.append(response)
        start = response.get("LastEvaluatedKey")
        if not start:
            return out
        assert len(out) < 1000


def test_query_paging_with_limit(engine: Engine) -> None:
    create(engine)
    for i in range(50):
        put(engine, {"pk": {"S": "p"}, "sk": {"N": str(i - 25)}})
    for forward in (True, False):
        result = pages(q_pk, engine, Limit=7, ScanIndexForward=forward)
        assert [r["Count"] for r in result] == [7] * 7 + [1]
        keys = [int(s) for r in result for s in sks(r)]
        expected = list(range(-25, 25))
        assert keys == (expected if forward else expected[::-1])
    # Limit reached exactly at the end still yields a LastEvaluatedKey (no look-ahead)...
    result = pages(q_pk, engine, Limit=25)
    assert [r["Count"] for r in result] == [25, 25, 0]
    # ... and the page after it is empty.
    assert "LastEvaluatedKey" not in result[-1]


def test_query_paging_with_range_condition(engine: Engine) -> None:
    create(engine)
    for i in range(30):
        put(engine, {"pk": {"S": "p"}, "sk": {"N": str(i)}})
    result = pages(
        q_pk,
        engine,
        cond="sk BETWEEN :a AND :b",
        values={":a": {"N": "5"}, ":b": {"N": "20"}},
        Limit=4,
        ScanIndexForward=False,
    )
    assert [int(s) for r in result for s in sks(r)] == list(range(20, 4, -1))


def test_one_megabyte_page_limit(engine: Engine) -> None:
    create(engine)
    blob = "x" * 100_000
    for i in range(25):
        put(engine, {"pk": {"S": "big"}, "sk": {"N": str(i)}, "data": {"S": blob}})
    size = item_size({"pk": {"S": "big"}, "sk": {"N": "1"}, "data": {"S": blob}})
    per_page = MAX_PAGE_BYTES // size
    assert per_page == 10
    result = pages(q_pk, engine, pk="big", ReturnConsumedCapacity="TOTAL")
    assert [r["Count"] for r in result] == [10, 10, 5]
    assert [int(s) for r in result for s in sks(r)] == list(range(25))
    assert result[0]["LastEvaluatedKey"] == {"pk": {"S": "big"}, "sk": {"N": "9"}}
    # Capacity: the page's bytes summed, rounded up to 4 KB once, halved (eventual).
    first_bytes = sum(item_size(item) for item in result[0]["Items"])
    assert result[0]["ConsumedCapacity"] == {
        "TableName": "tbl",
        "CapacityUnits": math.ceil(first_bytes / 4096) / 2,
    }
    strong = q_pk(engine, pk="big", Limit=3, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
    assert strong["ConsumedCapacity"]["CapacityUnits"] == math.ceil(3 * size / 4096)
    # Select=COUNT pages the same way: the limit is on bytes read, not returned.
    counted = pages(q_pk, engine, pk="big", Select="COUNT")
    assert [r["Count"] for r in counted] == [10, 10, 5]
    scanned = pages(scan, engine)
    assert [r["ScannedCount"] for r in scanned] == [10, 10, 5]


def test_single_item_larger_than_budget_is_returned(engine: Engine) -> None:
    create(engine)
    blob = "y" * 390_000
    for i in range(5):
        put(engine, {"pk": {"S": "p"}, "sk": {"N": str(i)}, "d": {"S": blob}})
    assert [r["Count"] for r in pages(q_pk, engine)] == [2, 2, 1]


def test_empty_query_costs_the_minimum(numeric: Engine) -> None:
    response = q_pk(numeric, pk="nothing", ReturnConsumedCapacity="INDEXES", ConsistentRead=True)
    assert response["Items"] == [] and response["Count"] == 0
    assert response["ConsumedCapacity"] == {
        "TableName": "tbl",
        "CapacityUnits": 1.0,
        "Table": {"CapacityUnits": 1.0},
    }


def test_exclusive_start_key_validation(numeric: Engine) -> None:
    bad_shapes: list[dict[str, Any]] = [
        {"pk": {"S": "p"}},
        {"pk": {"N": "1"}, "sk": {"N": "1"}},
        {"pk": {"S": "p"}, "sk": {"S": "1"}},
        {"pk": {"S": "p"}, "sk": {"N": "1"}, "extra": {"S": "x"}},
    ]
    for index, start in enumerate(bad_shapes):
        # The key's own attributes of other types (shapes 1 and 2): "does not match the
        # schema", DynamoDB's answer quoted in ScyllaDB's test_query_exclusivestartkey_wrong_
        # types (which passes on DynamoDB); another set of attributes: "invalid".
        mistyped = index in (1, 2)
        assert error(q_pk, numeric, ExclusiveStartKey=start).message == (
            "The provided key element does not match the schema"
            if mistyped
            else "The provided starting key is invalid"
        )
        assert error(scan, numeric, ExclusiveStartKey=start).message == (
            "The provided starting key is invalid: The provided key element does not match the "
            "schema"
        )
    err = error(scan, numeric, ExclusiveStartKey={"pk": {"S": "p"}, "sk": {"N": "x1"}})
    assert err.message == (
        "The provided starting key is invalid: The parameter cannot be converted to a numeric value"
    )
    err = error(q_pk, numeric, ExclusiveStartKey={"pk": {"S": "other"}, "sk": {"N": "1"}})
    assert err.message == (
        "The provided starting key is outside query boundaries based on provided condition"
    )
    err = error(
        q_pk,
        numeric,
        "sk > :a",
        {":a": {"N": "5"}},
        ExclusiveStartKey={"pk": {"S": "p"}, "sk": {"N": "1"}},
    )
    assert err.message == "The provided starting key does not match the range key predicate"


def test_exclusive_start_key_need_not_exist(numeric: Engine) -> None:
    response = q_pk(numeric, ExclusiveStartKey={"pk": {"S": "p"}, "sk": {"N": "1.3"}})
    assert sks(response)[0] == "1.5"
    response = q_pk(
        numeric, ExclusiveStartKey={"pk": {"S": "p"}, "sk": {"N": "1.3"}}, ScanIndexForward=False
    )
    assert sks(response)[0] == "1.25"


# --- Scan ------------------------------------------------------------------------------------


@pytest.fixture
def spread(engine: Engine) -> Engine:
    create(engine)
    for p in range(40):
        for s in range(3):
            put(engine, {"pk": {"S": f"p{p}"}, "sk": {"N": str(s)}, "v": {"N": str(p * 3 + s)}})
    return engine


def keyset(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(i["pk"]["S"], i["sk"]["N"]) for i in items]


def test_scan_pages_cover_table_once(spread: Engine) -> None:
    whole = scan(spread)
    assert whole["Count"] == whole["ScannedCount"] == 120
    paged = [i for r in pages(scan, spread, Limit=11) for i in r["Items"]]
    assert keyset(paged) == keyset(whole["Items"])


def test_scan_filter_and_capacity(spread: Engine) -> None:
    response = scan(
        spread,
        FilterExpression="v < :x",
        ExpressionAttributeValues={":x": {"N": "9"}},
        ReturnConsumedCapacity="TOTAL",
        ConsistentRead=True,
    )
    assert response["Count"] == 9 and response["ScannedCount"] == 120
    total = sum(item_size(i) for i in scan(spread)["Items"])
    assert response["ConsumedCapacity"]["CapacityUnits"] == math.ceil(total / 4096)
    # Scan filters may name key attributes.
    response = scan(
        spread, FilterExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p7"}}
    )
    assert response["Count"] == 3


@pytest.mark.parametrize("total", [1, 2, 3, 7, 64])
def test_parallel_scan_segments_partition_the_table(spread: Engine, total: int) -> None:
    whole = set(keyset(scan(spread)["Items"]))
    seen: list[tuple[str, str]] = []
    for segment in range(total):
        items = [
            i
            for r in pages(scan, spread, Segment=segment, TotalSegments=total, Limit=5)
            for i in r["Items"]
        ]
        assert all(segment_of(i["pk"]["S"].encode(), total) == segment for i in items)
        seen.extend(keyset(items))
    assert len(seen) == len(set(seen)) == len(whole)
    assert set(seen) == whole


def test_segments_are_balanced(spread: Engine) -> None:
    sizes = [scan(spread, Segment=s, TotalSegments=4)["Count"] for s in range(4)]
    assert sum(sizes) == 120 and min(sizes) > 0


def test_segment_validation(spread: Engine) -> None:
    assert error(scan, spread, Segment=1).message == (
        "The TotalSegments parameter is required but was not present in the request when "
        "Segment parameter is present"
    )
    assert error(scan, spread, TotalSegments=2).message == (
        "The Segment parameter is required but was not present in the request when parameter "
        "TotalSegments is present"
    )
    assert error(scan, spread, Segment=3, TotalSegments=3).message == (
        "The Segment parameter is zero-based and must be less than parameter TotalSegments: "
        "Segment: 3 is not less than TotalSegments: 3"
    )
    assert error(scan, spread, Segment=0, TotalSegments=1_000_001).message == (
        "1 validation error detected: Value '1000001' at 'totalSegments' failed to satisfy "
        "constraint: Member must have value less than or equal to 1000000"
    )


# --- property: Query == a Python filter, in order --------------------------------------------

_OPS = ["=", "<", "<=", ">", ">=", "BETWEEN", "none"]
_numbers = st.decimals(min_value=-(10**6), max_value=10**6, places=3, allow_nan=False)


@pytest.fixture(scope="module")
def property_engine() -> Any:
    with Engine() as eng:
        create(eng)
        yield eng


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    keys=st.sets(_numbers, min_size=0, max_size=25),
    op=st.sampled_from(_OPS),
    a=_numbers,
    b=_numbers,
    forward=st.booleans(),
    limit=st.one_of(st.none(), st.integers(min_value=1, max_value=6)),
)
def test_query_matches_python_filter(
    property_engine: Engine,
    keys: set[Decimal],
    op: str,
    a: Decimal,
    b: Decimal,
    forward: bool,
    limit: int | None,
) -> None:
    engine = property_engine
    partition = uuid.uuid4().hex  # a fresh partition per example
    for k in keys:
        put(engine, {"pk": {"S": partition}, "sk": {"N": str(k)}})
    low, high = min(a, b), max(a, b)
    tests = {
        "=": lambda k: k == a,
        "<": lambda k: k < a,
        "<=": lambda k: k <= a,
        ">": lambda k: k > a,
        ">=": lambda k: k >= a,
        "BETWEEN": lambda k: low <= k <= high,
        "none": lambda k: True,
    }
    expected = sorted((k for k in keys if tests[op](k)), reverse=not forward)
    cond = {"none": "", "BETWEEN": "sk BETWEEN :a AND :b"}.get(op, f"sk {op} :a")
    values = {":a": {"N": str(low if op == "BETWEEN" else a)}}
    if op == "BETWEEN":
        values[":b"] = {"N": str(high)}
    elif op == "none":
        values = {}
    got: list[Decimal] = []
    start = None
    for _ in range(100):
        extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
        if limit is not None:
            extra["Limit"] = limit
        response = q_pk(engine, cond, values, pk=partition, ScanIndexForward=forward, **extra)
        got.extend(Decimal(s) for s in sks(response))
        start = response.get("LastEvaluatedKey")
        if not start:
            break
    assert got == expected


# --- through boto3 (in process and over HTTP) ------------------------------------------------


def _boto_table(ddb: Any, name: str) -> None:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "B"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def test_boto3_query_paginator_and_binary_keys(ddb: Any, table_name: str) -> None:
    _boto_table(ddb, table_name)
    for i in range(32):
        ddb.put_item(
            TableName=table_name,
            Item={"pk": {"S": "p"}, "sk": {"B": bytes([i // 4, 0xFC + i % 4])}},
        )
    paginator = ddb.get_paginator("query")
    got = [
        item["sk"]["B"]
        for page in paginator.paginate(
            TableName=table_name,
            KeyConditionExpression="pk = :p AND begins_with(sk, :b)",
            ExpressionAttributeValues={":p": {"S": "p"}, ":b": {"B": b"\x07"}},
            ScanIndexForward=False,
            PaginationConfig={"PageSize": 1},
        )
        for item in page["Items"]
    ]
    assert got == [b"\x07\xff", b"\x07\xfe", b"\x07\xfd", b"\x07\xfc"]
    all_keys = [
        item["sk"]["B"]
        for page in paginator.paginate(
            TableName=table_name,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "p"}},
            PaginationConfig={"PageSize": 7},
        )
        for item in page["Items"]
    ]
    assert all_keys == [bytes([i // 4, 0xFC + i % 4]) for i in range(32)]


def test_boto3_parallel_scan_and_errors(ddb: Any, table_name: str) -> None:
    _boto_table(ddb, table_name)
    for i in range(20):
        ddb.put_item(TableName=table_name, Item={"pk": {"S": f"p{i}"}, "sk": {"B": b"x"}})
    union = []
    for segment in range(3):
        response = ddb.scan(TableName=table_name, Segment=segment, TotalSegments=3)
        union.extend(item["pk"]["S"] for item in response["Items"])
    assert sorted(union) == sorted(f"p{i}" for i in range(20))
    with pytest.raises(ClientError) as info:
        ddb.query(
            TableName=table_name,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "p"}},
            ExclusiveStartKey={"pk": {"S": "p"}},
        )
    assert info.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "The provided starting key is invalid",
    }
    with pytest.raises(ClientError) as info:
        ddb.scan(TableName=table_name + "-missing")
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
