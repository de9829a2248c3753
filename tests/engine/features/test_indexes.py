"""Secondary indexes through boto3, in process and over HTTP: CreateTable with GSIs and LSIs,
DescribeTable, Query and Scan on an index with DynamoDB's rules, and every write path keeping
the indexes (with the write units each index costs).

Messages are DynamoDB's: dynalite's validations and tests (which run against DynamoDB), the
AWS-verified ack-api-quirks findings (DDB-TABLE-nnn, ``table-indexes.md``), moto's AWS-verified
tests, and localstack issue #478 (the "does not project" text seen from DynamoDB).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.features.ttl import TTLConfig

DEFINITIONS = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "N"},
    {"AttributeName": "tenant", "AttributeType": "S"},
    {"AttributeName": "ts", "AttributeType": "N"},
    {"AttributeName": "email", "AttributeType": "S"},
    {"AttributeName": "rank", "AttributeType": "N"},
]
KEY = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
GSIS = [
    {
        "IndexName": "by-tenant",
        "KeySchema": [
            {"AttributeName": "tenant", "KeyType": "HASH"},
            {"AttributeName": "ts", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["status"]},
    },
    {
        "IndexName": "by-email",
        "KeySchema": [{"AttributeName": "email", "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    },
]
LSIS = [
    {
        "IndexName": "by-rank",
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "rank", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
]


def create(ddb: Any, name: str, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": DEFINITIONS,
        "KeySchema": KEY,
        "GlobalSecondaryIndexes": GSIS,
        "LocalSecondaryIndexes": LSIS,
        "BillingMode": "PAY_PER_REQUEST",
    }
    params.update(extra)
    return ddb.create_table(**params)["TableDescription"]  # type: ignore[no-any-return]


def item(pk: str, sk: int, **attrs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"pk": {"S": pk}, "sk": {"N": str(sk)}}
    for name, value in attrs.items():
        if isinstance(value, bool):
            out[name] = {"BOOL": value}
        elif isinstance(value, int | Decimal):
            out[name] = {"N": str(value)}
        else:
            out[name] = {"S": value}
    return out


def seed(ddb: Any, name: str) -> None:
    """Six orders of two tenants; one without a tenant (sparse), one without an email."""
    rows = [
        item("o1", 1, tenant="acme", ts=30, email="a@x", rank=3, status="PAID", note="n1"),
        item("o1", 2, tenant="acme", ts=10, email="b@x", rank=1, status="OPEN", note="n2"),
        item("o2", 1, tenant="acme", ts=20, email="a@x", rank=2, status="OPEN", note="n3"),
        item("o2", 2, tenant="bolt", ts=10, email="c@x", rank=9, status="PAID", note="n4"),
        item("o3", 1, email="d@x", rank=5, status="OPEN", note="n5"),  # no tenant, no ts
        item("o3", 2, tenant="bolt", ts=5, status="OPEN", note="n6"),  # no email, no rank
    ]
    for row in rows:
        ddb.put_item(TableName=name, Item=row)


def query(
    ddb: Any, name: str, index: str, condition: str, values: dict[str, Any], **kw: Any
) -> Any:
    return ddb.query(
        TableName=name,
        IndexName=index,
        KeyConditionExpression=condition,
        ExpressionAttributeValues=values,
        **kw,
    )


def keys(response: dict[str, Any]) -> list[tuple[str, int]]:
    return [(i["pk"]["S"], int(i["sk"]["N"])) for i in response["Items"]]


def failure(call: Any, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    error = info.value.response["Error"]
    return error["Code"], error["Message"]


# --- CreateTable and DescribeTable -----------------------------------------------------------


def test_create_table_describes_its_indexes(ddb: Any, table_name: str) -> None:
    created = create(ddb, table_name)
    arn = created["TableArn"]
    gsi = {i["IndexName"]: i for i in created["GlobalSecondaryIndexes"]}
    assert gsi["by-tenant"] == {
        "IndexName": "by-tenant",
        "KeySchema": GSIS[0]["KeySchema"],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["status"]},
        "IndexStatus": "ACTIVE",
        # PAY_PER_REQUEST indexes report zero throughput (DDB-TABLE-133).
        "ProvisionedThroughput": {
            "NumberOfDecreasesToday": 0,
            "ReadCapacityUnits": 0,
            "WriteCapacityUnits": 0,
        },
        "IndexArn": f"{arn}/index/by-tenant",
        "IndexSizeBytes": 0,
        "ItemCount": 0,
    }
    # An LSI has no status or throughput of its own (DDB-TABLE-357).
    assert created["LocalSecondaryIndexes"] == [
        {
            "IndexName": "by-rank",
            "KeySchema": LSIS[0]["KeySchema"],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
            "IndexArn": f"{arn}/index/by-rank",
            "IndexSizeBytes": 0,
            "ItemCount": 0,
        }
    ]
    seed(ddb, table_name)
    table = ddb.describe_table(TableName=table_name)["Table"]
    counts = {
        i["IndexName"]: (i["ItemCount"], i["IndexSizeBytes"] > 0)
        for i in table["GlobalSecondaryIndexes"] + table["LocalSecondaryIndexes"]
    }
    # Sparse: only the items that have the index key attributes are in each index.
    assert counts == {"by-tenant": (5, True), "by-email": (5, True), "by-rank": (5, True)}
    assert table["ItemCount"] == 6


def test_provisioned_indexes_keep_their_throughput(ddb: Any, table_name: str) -> None:
    gsi = {**GSIS[1], "ProvisionedThroughput": {"ReadCapacityUnits": 3, "WriteCapacityUnits": 4}}
    created = ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "email", "AttributeType": "S"},
        ],
        KeySchema=[KEY[0]],
        GlobalSecondaryIndexes=[gsi],
        ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
    )["TableDescription"]
    throughput = created["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]
    assert throughput == {
        "NumberOfDecreasesToday": 0,
        "ReadCapacityUnits": 3,
        "WriteCapacityUnits": 4,
    }


def _gsi(name: str, *keys: tuple[str, str], **projection: Any) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": a, "KeyType": k} for a, k in keys],
        "Projection": projection or {"ProjectionType": "ALL"},
    }


INVALID = "One or more parameter values were invalid: "
_DEFS2 = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "S"},
    {"AttributeName": "a", "AttributeType": "S"},
]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # DDB-TABLE-043 / 129.
        ({"GlobalSecondaryIndexes": []}, INVALID + "List of GlobalSecondaryIndexes is empty"),
        ({"LocalSecondaryIndexes": []}, INVALID + "List of LocalSecondaryIndexes is empty"),
        # dynalite validations/createTable.js (its tests run against DynamoDB).
        (
            {"LocalSecondaryIndexes": [_gsi("l-a", ("a", "HASH"), ("sk", "RANGE"))]},
            INVALID + "Index KeySchema does not have the same leading hash key as table "
            "KeySchema for index: l-a. index hash key: a, table hash key: pk",
        ),
        (
            {"LocalSecondaryIndexes": [_gsi("l-a", ("pk", "HASH"))]},
            INVALID + "Index KeySchema does not have a range key for index: l-a",
        ),
        (
            {
                "GlobalSecondaryIndexes": [
                    _gsi("dup", ("a", "HASH")),
                    _gsi("dup", ("sk", "HASH")),
                ]
            },
            INVALID + "Duplicate index name: dup",
        ),
        (
            {"GlobalSecondaryIndexes": [_gsi("g-a", ("a", "HASH"), ProjectionType="INCLUDE")]},
            INVALID + "ProjectionType is INCLUDE, but NonKeyAttributes is not specified",
        ),
        (
            {
                "GlobalSecondaryIndexes": [
                    _gsi("g-a", ("a", "HASH"), ProjectionType="KEYS_ONLY", NonKeyAttributes=["x"])
                ]
            },
            INVALID + "ProjectionType is KEYS_ONLY, but NonKeyAttributes is specified",
        ),
        (
            {"GlobalSecondaryIndexes": [{**_gsi("g-a", ("a", "HASH")), "Projection": {}}]},
            INVALID + "Unknown ProjectionType: null",
        ),
        (
            {"GlobalSecondaryIndexes": [_gsi("g-a", ("a", "RANGE"))]},
            "Invalid KeySchema: The first KeySchemaElement is not a HASH key type",
        ),
        (
            {"GlobalSecondaryIndexes": [_gsi("g-a", ("a", "HASH"), ("a", "RANGE"))]},
            "Both the Hash Key and the Range Key element in the KeySchema have the same name",
        ),
        (
            {"GlobalSecondaryIndexes": [_gsi("g-a", ("q", "HASH"))]},
            INVALID + "Some index key attributes are not defined in AttributeDefinitions. "
            "Keys: [q], AttributeDefinitions: [pk, sk]",
        ),
        (
            {
                "GlobalSecondaryIndexes": [
                    {
                        **_gsi("g-a", ("a", "HASH")),
                        "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
                    }
                ]
            },
            INVALID + "ProvisionedThroughput should not be specified for index: g-a when "
            "BillingMode is PAY_PER_REQUEST",
        ),
        (
            {"GlobalSecondaryIndexes": [_gsi(f"g{i:02}", ("a", "HASH")) for i in range(21)]},
            INVALID + "GlobalSecondaryIndex count exceeds the per-table limit of 20",
        ),
        (
            {
                "LocalSecondaryIndexes": [
                    _gsi(f"l{i:02}", ("pk", "HASH"), ("a", "RANGE")) for i in range(6)
                ]
            },
            INVALID + "Number of LocalSecondaryIndexes exceeds per-table limit of 5",
        ),
    ],
)
def test_create_table_index_errors(
    ddb: Any, table_name: str, extra: dict[str, Any], message: str
) -> None:
    params = {
        "TableName": table_name,
        "AttributeDefinitions": _DEFS2,
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
        **extra,
    }
    # Define exactly the attributes the keys use ("a" or not): an unused one masks the rest.
    indexes = extra.get("GlobalSecondaryIndexes", []) + extra.get("LocalSecondaryIndexes", [])
    if not any(k["AttributeName"] == "a" for i in indexes for k in i["KeySchema"]):
        params["AttributeDefinitions"] = _DEFS2[:2]
    assert failure(ddb.create_table, **params) == ("ValidationException", message)


def test_create_table_definition_rules_with_indexes(ddb: Any, table_name: str) -> None:
    base = {
        "TableName": table_name,
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }
    # An unused definition masks every other index error (DDB-TABLE-127); "keys used" is
    # printed in DynamoDB's (Java HashSet) order.
    defs = [{"AttributeName": n, "AttributeType": "S"} for n in ("sk", "a", "b", "pk", "c")]
    assert failure(
        ddb.create_table,
        **base,
        AttributeDefinitions=defs,
        GlobalSecondaryIndexes=[_gsi("g-a", ("a", "HASH"), ProjectionType="INCLUDE")],
    ) == (
        "ValidationException",
        INVALID + "Some AttributeDefinitions are not used. AttributeDefinitions: "
        "[sk, a, b, pk, c], keys used: [a, sk, pk]",
    )
    # An LSI needs a table with a sort key.
    assert failure(
        ddb.create_table,
        TableName=table_name,
        KeySchema=[base["KeySchema"][0]],
        AttributeDefinitions=[_DEFS2[0], _DEFS2[2]],
        BillingMode="PAY_PER_REQUEST",
        LocalSecondaryIndexes=[_gsi("l-a", ("pk", "HASH"), ("a", "RANGE"))],
    ) == (
        "ValidationException",
        INVALID + "Table KeySchema does not have a range key, which is required when "
        "specifying a LocalSecondaryIndex",
    )
    # A GSI on a PROVISIONED table needs its own throughput (DDB-TABLE-128).
    assert failure(
        ddb.create_table,
        TableName=table_name,
        KeySchema=[base["KeySchema"][0]],
        AttributeDefinitions=[_DEFS2[0], _DEFS2[2]],
        ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
        GlobalSecondaryIndexes=[_gsi("g-a", ("a", "HASH"))],
    ) == ("ValidationException", INVALID + "ProvisionedThroughput is not specified for index: g-a")
    with pytest.raises(ClientError):
        ddb.describe_table(TableName=table_name)  # nothing was created


@pytest.mark.parametrize("transport", ["inprocess", "http"])
def test_index_name_constraints_are_reported_with_their_paths(
    make_ddb: Any, transport: str, table_name: str
) -> None:
    # Past botocore's own parameter validation, the server's constraint messages.
    ddb = make_ddb(
        transport, config=Config(parameter_validation=False, retries={"max_attempts": 0})
    )
    code, message = failure(
        ddb.create_table,
        TableName=table_name,
        AttributeDefinitions=_DEFS2[::2],
        KeySchema=[KEY[0]],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[_gsi("a;", ("a", "HASH"))],
    )
    assert code == "ValidationException"
    assert message == (
        "2 validation errors detected: "
        "Value 'a;' at 'globalSecondaryIndexes.1.member.indexName' failed to satisfy constraint: "
        "Member must have length greater than or equal to 3; "
        "Value 'a;' at 'globalSecondaryIndexes.1.member.indexName' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"
    )


@pytest.mark.parametrize("kind", ["GlobalSecondaryIndexes", "LocalSecondaryIndexes", "UpdateTable"])
def test_a_projected_attribute_name_is_at_most_255_long(
    ddb: Any, table_name: str, kind: str
) -> None:
    # The model's NonKeyAttributeName (1 to 255), for both kinds of index (ScyllaDB's
    # test_limits.py, test_limit_attribute_length_gsi_lsi_projection_bad, run against DynamoDB).
    keys = ("a", "HASH") if kind != "LocalSecondaryIndexes" else ("pk", "HASH")
    extra_key = [] if kind != "LocalSecondaryIndexes" else [("a", "RANGE")]

    def index(name: str, attribute: str) -> dict[str, Any]:
        projection = {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["ok", attribute]}
        return _gsi(name, keys, *extra_key, **projection)

    def create(name: str, indexes: list[dict[str, Any]]) -> Any:
        params = {
            "TableName": name,
            "AttributeDefinitions": _DEFS2,
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
        }
        if kind == "UpdateTable":
            ddb.create_table(**{**params, "GlobalSecondaryIndexes": [_gsi("g-0", ("a", "HASH"))]})
            return ddb.update_table(
                TableName=name,
                AttributeDefinitions=_DEFS2,
                GlobalSecondaryIndexUpdates=[{"Create": indexes[0]}],
            )
        return ddb.create_table(**{**params, kind: indexes})

    long = "n" * 256
    code, message = failure(create, name=table_name, indexes=[index("i-1", long)])
    path = {
        "GlobalSecondaryIndexes": "globalSecondaryIndexes.1.member",
        "LocalSecondaryIndexes": "localSecondaryIndexes.1.member",
        "UpdateTable": "globalSecondaryIndexUpdates.1.member.create",
    }[kind]
    assert (code, message) == (
        "ValidationException",
        f"1 validation error detected: Value '[ok, {long}]' at '{path}.projection."
        "nonKeyAttributes' failed to satisfy constraint: Member must satisfy constraint: "
        "[Member must have length less than or equal to 255, Member must have length greater "
        "than or equal to 1]",
    )
    create(table_name + "-255", [index("i-2", "n" * 255)])  # the longest name is accepted


# --- Query and Scan on an index --------------------------------------------------------------


@pytest.fixture
def orders(ddb: Any, table_name: str) -> tuple[Any, str]:
    create(ddb, table_name)
    seed(ddb, table_name)
    return ddb, table_name


def test_query_a_gsi_in_index_key_order(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    acme = {":t": {"S": "acme"}}
    response = query(ddb, name, "by-tenant", "tenant = :t", acme)
    assert keys(response) == [("o1", 2), ("o2", 1), ("o1", 1)]  # ts 10, 20, 30
    # INCLUDE: the keys of the table and the index, and the listed attributes; nothing else.
    assert response["Items"][0] == {
        "pk": {"S": "o1"},
        "sk": {"N": "2"},
        "tenant": {"S": "acme"},
        "ts": {"N": "10"},
        "status": {"S": "OPEN"},
    }
    backwards = query(ddb, name, "by-tenant", "tenant = :t", acme, ScanIndexForward=False)
    assert keys(backwards) == [("o1", 1), ("o2", 1), ("o1", 2)]
    for condition, values, expected in [
        ("ts = :a", {":a": {"N": "20"}}, [("o2", 1)]),
        ("ts < :a", {":a": {"N": "20"}}, [("o1", 2)]),
        ("ts <= :a", {":a": {"N": "20"}}, [("o1", 2), ("o2", 1)]),
        ("ts > :a", {":a": {"N": "10"}}, [("o2", 1), ("o1", 1)]),
        ("ts >= :a", {":a": {"N": "20"}}, [("o2", 1), ("o1", 1)]),
        ("ts BETWEEN :a AND :b", {":a": {"N": "15"}, ":b": {"N": "30"}}, [("o2", 1), ("o1", 1)]),
    ]:
        got = query(ddb, name, "by-tenant", f"tenant = :t AND {condition}", {**acme, **values})
        assert keys(got) == expected, condition
    # Index keys need not be unique: equal keys come back in table key order.
    same = query(ddb, name, "by-email", "email = :e", {":e": {"S": "a@x"}})
    assert keys(same) == [("o1", 1), ("o2", 1)]
    assert same["Items"][0] == {"pk": {"S": "o1"}, "sk": {"N": "1"}, "email": {"S": "a@x"}}
    # A filter on a non-key attribute the index projects.
    paid = query(
        ddb,
        name,
        "by-tenant",
        "tenant = :t",
        {**acme, ":p": {"S": "PAID"}},
        FilterExpression="#s = :p",
        ExpressionAttributeNames={"#s": "status"},
    )
    assert keys(paid) == [("o1", 1)] and paid["ScannedCount"] == 3


def test_begins_with_on_a_string_index_sort_key(ddb: Any, table_name: str) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
            {"AttributeName": "s", "AttributeType": "S"},
        ],
        KeySchema=[KEY[0]],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[_gsi("g-s", ("g", "HASH"), ("s", "RANGE"))],
    )
    for n, s in enumerate(["ab", "abc", "b", "a", "abd"]):
        ddb.put_item(
            TableName=table_name, Item={"pk": {"S": f"k{n}"}, "g": {"S": "G"}, "s": {"S": s}}
        )
    got = query(
        ddb,
        table_name,
        "g-s",
        "g = :g AND begins_with(s, :p)",
        {":g": {"S": "G"}, ":p": {"S": "ab"}},
    )
    assert [i["s"]["S"] for i in got["Items"]] == ["ab", "abc", "abd"]


def test_query_pages_carry_table_and_index_keys(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    acme = {":t": {"S": "acme"}}
    first = query(ddb, name, "by-tenant", "tenant = :t", acme, Limit=2)
    assert keys(first) == [("o1", 2), ("o2", 1)]
    assert first["LastEvaluatedKey"] == {
        "pk": {"S": "o2"},
        "sk": {"N": "1"},
        "tenant": {"S": "acme"},
        "ts": {"N": "20"},
    }
    rest = query(
        ddb, name, "by-tenant", "tenant = :t", acme, ExclusiveStartKey=first["LastEvaluatedKey"]
    )
    assert keys(rest) == [("o1", 1)] and "LastEvaluatedKey" not in rest
    # Equal index keys: the table key orders the entries and resumes exactly after one.
    page = query(ddb, name, "by-email", "email = :e", {":e": {"S": "a@x"}}, Limit=1)
    assert page["LastEvaluatedKey"] == {"pk": {"S": "o1"}, "sk": {"N": "1"}, "email": {"S": "a@x"}}
    after = query(
        ddb,
        name,
        "by-email",
        "email = :e",
        {":e": {"S": "a@x"}},
        ExclusiveStartKey=page["LastEvaluatedKey"],
    )
    assert keys(after) == [("o2", 1)]
    # The SDK's paginator follows them, on a local index too.
    paginator = ddb.get_paginator("query")
    pages = paginator.paginate(
        TableName=name,
        IndexName="by-rank",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "o1"}},
        PaginationConfig={"PageSize": 1},
    )
    assert [keys(p) for p in pages] == [[("o1", 2)], [("o1", 1)], []]


def test_scan_an_index_sees_each_entry_once(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    everything = ddb.scan(TableName=name, IndexName="by-tenant")
    assert sorted(keys(everything)) == [("o1", 1), ("o1", 2), ("o2", 1), ("o2", 2), ("o3", 2)]
    paged: list[tuple[str, int]] = []
    start: dict[str, Any] | None = None
    while True:
        kw = {"ExclusiveStartKey": start} if start else {}
        page = ddb.scan(TableName=name, IndexName="by-email", Limit=2, **kw)
        paged += keys(page)
        start = page.get("LastEvaluatedKey")
        if start is None:
            break
        assert set(start) == {"pk", "sk", "email"}
    assert sorted(paged) == [("o1", 1), ("o1", 2), ("o2", 1), ("o2", 2), ("o3", 1)]
    assert ddb.scan(TableName=name, IndexName="by-rank", Select="COUNT")["Count"] == 5


def test_select_and_projection_rules_per_index_type(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    acme = {":t": {"S": "acme"}}
    a_x = {":e": {"S": "a@x"}}
    # Select ALL_ATTRIBUTES on a GSI that does not project everything (dynalite tests).
    assert failure(
        query,
        ddb=ddb,
        name=name,
        index="by-email",
        condition="email = :e",
        values=a_x,
        Select="ALL_ATTRIBUTES",
    ) == (
        "ValidationException",
        INVALID + "Select type ALL_ATTRIBUTES is not supported for global secondary index "
        "by-email because its projection type is not ALL",
    )
    assert failure(ddb.scan, TableName=name, IndexName="by-tenant", Select="ALL_ATTRIBUTES")[
        1
    ].endswith("by-tenant because its projection type is not ALL")
    # A projection beyond what a GSI holds (DynamoDB's words, localstack issue #478).
    assert failure(
        query,
        ddb=ddb,
        name=name,
        index="by-tenant",
        condition="tenant = :t",
        values=acme,
        ProjectionExpression="note, #r, #s",
        ExpressionAttributeNames={"#s": "status", "#r": "rank"},
    ) == (
        "ValidationException",
        INVALID + "Global secondary index by-tenant does not project [note, rank]",
    )
    # Within the projection: fine, and so is ALL_PROJECTED_ATTRIBUTES and COUNT.
    only = query(
        ddb,
        name,
        "by-tenant",
        "tenant = :t",
        acme,
        ProjectionExpression="#s",
        ExpressionAttributeNames={"#s": "status"},
    )
    assert only["Items"] == [
        {"status": {"S": "OPEN"}},
        {"status": {"S": "OPEN"}},
        {"status": {"S": "PAID"}},
    ]
    projected = query(ddb, name, "by-email", "email = :e", a_x, Select="ALL_PROJECTED_ATTRIBUTES")
    assert projected["Items"][0] == {"pk": {"S": "o1"}, "sk": {"N": "1"}, "email": {"S": "a@x"}}
    counted = query(ddb, name, "by-email", "email = :e", a_x, Select="COUNT")
    assert counted["Count"] == 2 and "Items" not in counted
    # A local index fetches what it does not project from the table.
    o1 = {":p": {"S": "o1"}}
    fetched = query(ddb, name, "by-rank", "pk = :p", o1, Select="ALL_ATTRIBUTES", Limit=1)
    assert fetched["Items"] == [
        item("o1", 2, tenant="acme", ts=10, email="b@x", rank=1, status="OPEN", note="n2")
    ]
    notes = query(
        ddb,
        name,
        "by-rank",
        "pk = :p",
        o1,
        ProjectionExpression="note, #r",
        ExpressionAttributeNames={"#r": "rank"},
    )
    assert notes["Items"] == [
        {"note": {"S": "n2"}, "rank": {"N": "1"}},
        {"note": {"S": "n1"}, "rank": {"N": "3"}},
    ]
    keys_only = query(ddb, name, "by-rank", "pk = :p", o1)
    assert keys_only["Items"][0] == {"pk": {"S": "o1"}, "sk": {"N": "2"}, "rank": {"N": "1"}}
    # A filter on an attribute the LSI lacks is evaluated on the fetched item; the answer
    # still holds only what the index projects.
    filtered = query(
        ddb, name, "by-rank", "pk = :p", {**o1, ":n": {"S": "n1"}}, FilterExpression="note = :n"
    )
    assert filtered["Items"] == [{"pk": {"S": "o1"}, "sk": {"N": "1"}, "rank": {"N": "3"}}]


def test_consistency_and_unknown_indexes(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    acme = {":t": {"S": "acme"}}
    assert failure(
        query,
        ddb=ddb,
        name=name,
        index="by-tenant",
        condition="tenant = :t",
        values=acme,
        ConsistentRead=True,
    ) == ("ValidationException", "Consistent reads are not supported on global secondary indexes")
    assert (
        failure(ddb.scan, TableName=name, IndexName="by-email", ConsistentRead=True)[1]
        == "Consistent reads are not supported on global secondary indexes"
    )
    # A local index reads consistently like its table.
    strong = query(ddb, name, "by-rank", "pk = :p", {":p": {"S": "o1"}}, ConsistentRead=True)
    assert keys(strong) == [("o1", 2), ("o1", 1)]
    assert failure(
        query, ddb=ddb, name=name, index="nope", condition="tenant = :t", values=acme
    ) == ("ValidationException", "The table does not have the specified index: nope")
    # The key condition is about the index's key schema.
    assert failure(
        query, ddb=ddb, name=name, index="by-tenant", condition="pk = :t", values=acme
    ) == ("ValidationException", "Query condition missed key schema element: tenant")
    assert failure(
        query,
        ddb=ddb,
        name=name,
        index="by-tenant",
        condition="tenant = :t AND ts = :a",
        values={**acme, ":a": {"S": "x"}},
    ) == ("ValidationException", INVALID + "Condition parameter type does not match schema type")
    # The index key may not be filtered on; the table key may (dynalite tests).
    assert failure(
        query,
        ddb=ddb,
        name=name,
        index="by-tenant",
        condition="tenant = :t",
        values={**acme, ":a": {"N": "1"}},
        FilterExpression="ts > :a",
    ) == (
        "ValidationException",
        "Filter Expression can only contain non-primary key attributes: Primary key attribute: ts",
    )
    by_sk = query(
        ddb,
        name,
        "by-tenant",
        "tenant = :t",
        {**acme, ":s": {"N": "1"}},
        FilterExpression="sk = :s",
    )
    assert keys(by_sk) == [("o2", 1), ("o1", 1)]


def test_exclusive_start_key_rules_on_an_index(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    acme = {":t": {"S": "acme"}}

    def start(key: dict[str, Any], **kw: Any) -> tuple[str, str]:
        return failure(
            query,
            ddb=ddb,
            name=name,
            index="by-tenant",
            condition="tenant = :t",
            values=acme,
            ExclusiveStartKey=key,
            **kw,
        )

    good = {"pk": {"S": "o1"}, "sk": {"N": "2"}, "tenant": {"S": "acme"}, "ts": {"N": "10"}}
    invalid = ("ValidationException", "The provided starting key is invalid")
    assert start({k: v for k, v in good.items() if k != "ts"}) == invalid  # a part missing
    assert start({**good, "x": {"S": "1"}}) == invalid  # one too many
    assert start({**good, "ts": {"S": "10"}}) == (
        "ValidationException",
        "The provided key element does not match the schema",
    )
    assert start({**good, "sk": {"S": "2"}}) == (
        "ValidationException",
        "The provided starting key is invalid: The provided key element does not match the schema",
    )
    assert start({**good, "tenant": {"S": "bolt"}}) == (
        "ValidationException",
        "The provided starting key is outside query boundaries based on provided condition",
    )


def test_page_size_limit_applies_to_index_entries(ddb: Any, table_name: str) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        KeySchema=[KEY[0]],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[_gsi("by-g", ("g", "HASH"))],
    )
    blob = "x" * 300_000
    for n in range(5):
        ddb.put_item(
            TableName=table_name, Item={"pk": {"S": f"k{n}"}, "g": {"S": "G"}, "v": {"S": blob}}
        )
    pages = []
    start = None
    while True:
        kw: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
        page = query(ddb, table_name, "by-g", "g = :g", {":g": {"S": "G"}}, **kw)
        pages.append(page["Count"])
        start = page.get("LastEvaluatedKey")
        if start is None:
            break
    assert pages == [3, 2]  # 1 MB of entries per page, as on the table


# --- keeping the indexes: every write path ---------------------------------------------------


def _tenant(ddb: Any, name: str, tenant: str) -> list[tuple[str, int]]:
    return keys(query(ddb, name, "by-tenant", "tenant = :t", {":t": {"S": tenant}}))


def test_every_write_path_keeps_the_indexes(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    # UpdateItem moves an entry when the index key changes, and removes it with the attribute.
    ddb.update_item(
        TableName=name,
        Key={"pk": {"S": "o1"}, "sk": {"N": "2"}},
        UpdateExpression="SET tenant = :b",
        ExpressionAttributeValues={":b": {"S": "bolt"}},
    )
    assert _tenant(ddb, name, "acme") == [("o2", 1), ("o1", 1)]
    # Equal index keys (ts 10) follow in table key order.
    assert _tenant(ddb, name, "bolt") == [("o3", 2), ("o1", 2), ("o2", 2)]
    ddb.update_item(
        TableName=name, Key={"pk": {"S": "o3"}, "sk": {"N": "2"}}, UpdateExpression="REMOVE tenant"
    )
    assert ("o3", 2) not in _tenant(ddb, name, "bolt")
    # A projected non-key attribute changes in place.
    ddb.update_item(
        TableName=name,
        Key={"pk": {"S": "o2"}, "sk": {"N": "1"}},
        UpdateExpression="SET #s = :p",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":p": {"S": "PAID"}},
    )
    statuses = query(ddb, name, "by-tenant", "tenant = :t", {":t": {"S": "acme"}})
    assert [i["status"]["S"] for i in statuses["Items"]] == ["PAID", "PAID"]
    # DeleteItem, BatchWriteItem and TransactWriteItems.
    ddb.delete_item(TableName=name, Key={"pk": {"S": "o1"}, "sk": {"N": "1"}})
    ddb.batch_write_item(
        RequestItems={
            name: [
                {"PutRequest": {"Item": item("b1", 1, tenant="acme", ts=1, email="a@x")}},
                {"DeleteRequest": {"Key": {"pk": {"S": "o2"}, "sk": {"N": "2"}}}},
            ]
        }
    )
    ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": name, "Item": item("t1", 1, tenant="acme", ts=99)}},
            {
                "Update": {
                    "TableName": name,
                    "Key": {"pk": {"S": "b1"}, "sk": {"N": "1"}},
                    "UpdateExpression": "SET email = :e",
                    "ExpressionAttributeValues": {":e": {"S": "z@x"}},
                }
            },
        ]
    )
    assert _tenant(ddb, name, "acme") == [("b1", 1), ("o2", 1), ("t1", 1)]
    assert _tenant(ddb, name, "bolt") == [("o1", 2)]
    emails = ddb.scan(TableName=name, IndexName="by-email")["Items"]
    assert sorted((i["email"]["S"], i["pk"]["S"]) for i in emails) == [
        ("a@x", "o2"),
        ("b@x", "o1"),
        ("d@x", "o3"),
        ("z@x", "b1"),
    ]
    # A cancelled transaction changes no index either.
    with pytest.raises(ClientError):
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": name, "Item": item("t2", 1, tenant="acme", ts=5)}},
                {
                    "ConditionCheck": {
                        "TableName": name,
                        "Key": {"pk": {"S": "nope"}, "sk": {"N": "1"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert _tenant(ddb, name, "acme") == [("b1", 1), ("o2", 1), ("t1", 1)]


def test_ttl_deletions_leave_the_indexes(tmp_path: Any) -> None:
    with Engine(tmp_path / "ttl.db", ttl_config=TTLConfig(sweep_interval=None)) as engine:
        client = DirectClient(engine)
        create(client, "ttl-orders")
        client.update_time_to_live(
            TableName="ttl-orders",
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"},
        )
        client.put_item(
            TableName="ttl-orders",
            Item={**item("o1", 1, tenant="acme", ts=1, rank=1), "expires": {"N": "1000"}},
        )
        client.put_item(TableName="ttl-orders", Item=item("o1", 2, tenant="acme", ts=2, rank=2))
        engine.clock.set(2000)
        assert len(engine.ttl.sweep_now()) == 1
        assert _tenant(client, "ttl-orders", "acme") == [("o1", 2)]
        local = query(client, "ttl-orders", "by-rank", "pk = :p", {":p": {"S": "o1"}})
        assert keys(local) == [("o1", 2)]


def test_items_an_index_cannot_hold_are_refused(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    # dynalite db/index.js validateItem (its tests run against DynamoDB).
    assert failure(ddb.put_item, TableName=name, Item=item("x", 1, tenant=5)) == (
        "ValidationException",
        INVALID + "Type mismatch for Index Key tenant Expected: S Actual: N IndexName: by-tenant",
    )
    assert failure(ddb.put_item, TableName=name, Item=item("x", 1, rank="high")) == (
        "ValidationException",
        INVALID + "Type mismatch for Index Key rank Expected: N Actual: S IndexName: by-rank",
    )
    # moto's AWS-verified tests: an empty string as a GSI key value.
    assert failure(ddb.put_item, TableName=name, Item=item("x", 1, email="")) == (
        "ValidationException",
        "One or more parameter values are not valid. A value specified for a secondary index "
        "key is not supported. The AttributeValue for a key attribute cannot contain an empty "
        "string value. IndexName: by-email, IndexKey: email",
    )
    assert failure(
        ddb.update_item,
        TableName=name,
        Key={"pk": {"S": "o1"}, "sk": {"N": "1"}},
        UpdateExpression="SET email = :e",
        ExpressionAttributeValues={":e": {"S": ""}},
    ) == (
        "ValidationException",
        "One or more parameter values are not valid. The update expression attempted to update "
        "a secondary index key to a value that is not supported. The AttributeValue for a key "
        "attribute cannot contain an empty string value.",
    )
    assert (
        failure(
            ddb.update_item,
            TableName=name,
            Key={"pk": {"S": "o1"}, "sk": {"N": "1"}},
            UpdateExpression="SET ts = :a",
            ExpressionAttributeValues={":a": {"S": "noon"}},
        )[1]
        == INVALID + "Type mismatch for Index Key ts Expected: N Actual: S IndexName: by-tenant"
    )
    code, message = failure(
        ddb.batch_write_item,
        RequestItems={name: [{"PutRequest": {"Item": item("x", 1, email=1)}}]},
    )
    assert (code, message) == (
        "ValidationException",
        INVALID + "Type mismatch for Index Key email Expected: S Actual: N IndexName: by-email",
    )
    with pytest.raises(ClientError) as info:
        ddb.transact_write_items(
            TransactItems=[{"Put": {"TableName": name, "Item": item("x", 1, ts="noon")}}]
        )
    reasons = info.value.response["CancellationReasons"]
    assert reasons == [
        {
            "Code": "ValidationError",
            "Message": INVALID
            + "Type mismatch for Index Key ts Expected: N Actual: S IndexName: by-tenant",
        }
    ]
    # Nothing of any of them was written.
    assert ddb.scan(TableName=name, Select="COUNT")["Count"] == 6
    assert _tenant(ddb, name, "acme") == [("o1", 2), ("o2", 1), ("o1", 1)]


# --- capacity --------------------------------------------------------------------------------


def test_consumed_capacity_per_index(orders: tuple[Any, str]) -> None:
    ddb, name = orders
    put = ddb.put_item(
        TableName=name,
        Item=item("n1", 1, tenant="acme", ts=1, email="e@x", rank=1),
        ReturnConsumedCapacity="INDEXES",
    )
    assert put["ConsumedCapacity"] == {
        "TableName": name,
        "CapacityUnits": 4.0,
        "Table": {"CapacityUnits": 1.0},
        "GlobalSecondaryIndexes": {
            "by-tenant": {"CapacityUnits": 1.0},
            "by-email": {"CapacityUnits": 1.0},
        },
        "LocalSecondaryIndexes": {"by-rank": {"CapacityUnits": 1.0}},
    }
    # Changing an index key deletes one entry and puts another: two writes on that index;
    # an attribute no index holds costs the indexes nothing.
    moved = ddb.update_item(
        TableName=name,
        Key={"pk": {"S": "n1"}, "sk": {"N": "1"}},
        UpdateExpression="SET email = :e, note = :n",
        ExpressionAttributeValues={":e": {"S": "f@x"}, ":n": {"S": "x"}},
        ReturnConsumedCapacity="INDEXES",
    )
    assert moved["ConsumedCapacity"] == {
        "TableName": name,
        "CapacityUnits": 3.0,
        "Table": {"CapacityUnits": 1.0},
        "GlobalSecondaryIndexes": {"by-email": {"CapacityUnits": 2.0}},
    }
    total = ddb.delete_item(
        TableName=name, Key={"pk": {"S": "n1"}, "sk": {"N": "1"}}, ReturnConsumedCapacity="TOTAL"
    )
    assert total["ConsumedCapacity"] == {"TableName": name, "CapacityUnits": 4.0}
    batch = ddb.batch_write_item(
        RequestItems={name: [{"PutRequest": {"Item": item("n2", 1, email="g@x")}}]},
        ReturnConsumedCapacity="INDEXES",
    )
    assert batch["ConsumedCapacity"] == [
        {
            "TableName": name,
            "CapacityUnits": 2.0,
            "Table": {"CapacityUnits": 1.0},
            "GlobalSecondaryIndexes": {"by-email": {"CapacityUnits": 1.0}},
        }
    ]
    transaction = ddb.transact_write_items(
        TransactItems=[{"Put": {"TableName": name, "Item": item("n3", 1, email="h@x")}}],
        ReturnConsumedCapacity="INDEXES",
    )
    # Transactions double every unit, and name them write units.
    assert transaction["ConsumedCapacity"] == [
        {
            "TableName": name,
            "CapacityUnits": 4.0,
            "WriteCapacityUnits": 4.0,
            "Table": {"CapacityUnits": 2.0, "WriteCapacityUnits": 2.0},
            "GlobalSecondaryIndexes": {
                "by-email": {"CapacityUnits": 2.0, "WriteCapacityUnits": 2.0}
            },
        }
    ]
    # Reads: the index is charged for the entries read, the table for what an LSI fetches.
    read = query(
        ddb,
        name,
        "by-tenant",
        "tenant = :t",
        {":t": {"S": "acme"}},
        ReturnConsumedCapacity="INDEXES",
    )
    assert read["ConsumedCapacity"] == {
        "TableName": name,
        "CapacityUnits": 0.5,
        "Table": {"CapacityUnits": 0.0},
        "GlobalSecondaryIndexes": {"by-tenant": {"CapacityUnits": 0.5}},
    }
    fetched = query(
        ddb,
        name,
        "by-rank",
        "pk = :p",
        {":p": {"S": "o1"}},
        Select="ALL_ATTRIBUTES",
        ConsistentRead=True,
        ReturnConsumedCapacity="INDEXES",
    )
    assert fetched["ConsumedCapacity"] == {
        "TableName": name,
        "CapacityUnits": 2.0,
        "Table": {"CapacityUnits": 1.0},
        "LocalSecondaryIndexes": {"by-rank": {"CapacityUnits": 1.0}},
    }


# --- local secondary indexes: item collections -----------------------------------------------


def test_item_collection_metrics_and_limit(tmp_path: Any) -> None:
    with Engine(tmp_path / "lsi.db") as engine:
        client = DirectClient(engine)
        create(client, "lsi-orders")
        written = client.put_item(
            TableName="lsi-orders",
            Item=item("o1", 1, rank=1),
            ReturnItemCollectionMetrics="SIZE",
        )
        assert written["ItemCollectionMetrics"] == {
            "ItemCollectionKey": {"pk": {"S": "o1"}},
            "SizeEstimateRangeGB": [0.0, 1.0],
        }
        # A table without an LSI reports none.
        client.create_table(
            TableName="plain",
            AttributeDefinitions=DEFINITIONS[:1],
            KeySchema=KEY[:1],
            BillingMode="PAY_PER_REQUEST",
        )
        plain = client.put_item(
            TableName="plain", Item={"pk": {"S": "a"}}, ReturnItemCollectionMetrics="SIZE"
        )
        assert "ItemCollectionMetrics" not in plain
        batch = client.batch_write_item(
            RequestItems={"lsi-orders": [{"PutRequest": {"Item": item("o2", 1, rank=2)}}]},
            ReturnItemCollectionMetrics="SIZE",
        )
        assert batch["ItemCollectionMetrics"] == {
            "lsi-orders": [
                {"ItemCollectionKey": {"pk": {"S": "o2"}}, "SizeEstimateRangeGB": [0.0, 1.0]}
            ]
        }
        # The 10 GB limit, made small: a write that would pass it is refused and undone.
        engine.indexes.configure(collection_limit=300)
        client.put_item(TableName="lsi-orders", Item=item("o1", 2, rank=2, note="x" * 100))
        with pytest.raises(ClientError) as info:
            client.put_item(TableName="lsi-orders", Item=item("o1", 3, rank=3, note="y" * 200))
        assert info.value.response["Error"]["Code"] == "ItemCollectionSizeLimitExceededException"
        with pytest.raises(ClientError):
            client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "lsi-orders", "Item": item("o9", 1, rank=1)}},
                    {"Put": {"TableName": "lsi-orders", "Item": item("o1", 4, note="z" * 300)}},
                ]
            )
        assert (
            client.get_item(TableName="lsi-orders", Key={"pk": {"S": "o1"}, "sk": {"N": "3"}}).get(
                "Item"
            )
            is None
        )
        assert (
            client.get_item(TableName="lsi-orders", Key={"pk": {"S": "o9"}, "sk": {"N": "1"}}).get(
                "Item"
            )
            is None
        )
        ranks = query(client, "lsi-orders", "by-rank", "pk = :p", {":p": {"S": "o1"}})
        assert keys(ranks) == [("o1", 1), ("o1", 2)]
        # Other collections and shrinking writes are not affected.
        client.put_item(TableName="lsi-orders", Item=item("o3", 1, rank=1))
        client.put_item(TableName="lsi-orders", Item=item("o1", 2, rank=2))


def test_a_version_1_database_is_upgraded_in_place(tmp_path: Any) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    with Engine(path) as engine:
        DirectClient(engine).create_table(
            TableName="old",
            AttributeDefinitions=DEFINITIONS[:1],
            KeySchema=KEY[:1],
            BillingMode="PAY_PER_REQUEST",
        )
    with sqlite3.connect(path) as conn:  # as an engine before secondary indexes left it
        conn.execute("DROP TABLE index_items")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    with Engine(path) as engine:
        client = DirectClient(engine)
        assert client.describe_table(TableName="old")["Table"]["TableStatus"] == "ACTIVE"
        create(client, "indexed")
        client.put_item(TableName="indexed", Item=item("a", 1, tenant="t", ts=1))
        assert _tenant(client, "indexed", "t") == [("a", 1)]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "3",
        )
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with pytest.raises(RuntimeError, match="database schema version 4 is not 3"):
        Engine(path)


def test_a_table_key_attribute_is_no_key_condition_of_an_index(ddb: Any, table_name: str) -> None:
    """A GSI keyed on ``x`` alone, on a table keyed on ``p``: ``x = :x AND p = :p`` is
    ``Query key condition not supported``, as a condition on any attribute the index key lacks
    (not the count error a table keyed on ``x`` alone gives); in KeyConditions too. ScyllaDB's
    test_gsi.py (test_faux_range_key_in_keyconditions and ..._in_keyconditionexpression), run
    against DynamoDB, which answers "just 'Query key condition not supported'"."""
    ddb.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "p", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "p", "AttributeType": "S"},
            {"AttributeName": "x", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[_gsi("hello", ("x", "HASH"))],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName=table_name, Item={"p": {"S": "1"}, "x": {"S": "2"}, "z": {"S": "3"}})
    values = {":x": {"S": "2"}, ":p": {"S": "1"}}
    found = query(ddb, table_name, "hello", "x = :x", {":x": values[":x"]})
    assert found["Count"] == 1
    unsupported = ("ValidationException", "Query key condition not supported")
    for other in ("p", "z"):
        assert (
            failure(
                query,
                ddb=ddb,
                name=table_name,
                index="hello",
                condition=f"x = :x AND {other} = :p",
                values=values,
            )
            == unsupported
        )
        conditions = {
            "x": {"AttributeValueList": [values[":x"]], "ComparisonOperator": "EQ"},
            other: {"AttributeValueList": [values[":p"]], "ComparisonOperator": "EQ"},
        }
        assert (
            failure(ddb.query, TableName=table_name, IndexName="hello", KeyConditions=conditions)
            == unsupported
        )
