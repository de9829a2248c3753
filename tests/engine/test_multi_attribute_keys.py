"""Multi-attribute GSI keys (DynamoDB, November 2025): a global secondary index whose partition
key and sort key are each made of up to four attributes, through boto3 in process and over HTTP.

Sources: the AWS-verified ack-api-quirks finding DDB-TABLE-123 (CreateTable's limits and
messages), moto's AWS-verified tests ``test_dynamodb_multi_attribute_gsi.py`` (query rules,
sparseness, order, paging, KeyConditions) and the DynamoDB developer guide's "Multi-attribute
keys pattern" (up to four attributes each, every partition-key attribute given with =, sort-key
attributes left to right with at most one range condition, on the last one used).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.features.indexes.maintenance import IndexConfig

DEFINITIONS = [
    {"AttributeName": "match", "AttributeType": "S"},
    {"AttributeName": "tournament", "AttributeType": "S"},
    {"AttributeName": "area", "AttributeType": "N"},
    {"AttributeName": "round", "AttributeType": "S"},
    {"AttributeName": "bracket", "AttributeType": "B"},
    {"AttributeName": "seq", "AttributeType": "N"},
]
INDEX_KEY = [
    {"AttributeName": "tournament", "KeyType": "HASH"},
    {"AttributeName": "area", "KeyType": "HASH"},
    {"AttributeName": "round", "KeyType": "RANGE"},
    {"AttributeName": "bracket", "KeyType": "RANGE"},
    {"AttributeName": "seq", "KeyType": "RANGE"},
]
GSI = {
    "IndexName": "by-bracket",
    "KeySchema": INDEX_KEY,
    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["score"]},
}
INVALID = "One or more parameter values were invalid: "


def create(ddb: Any, name: str) -> dict[str, Any]:
    response = ddb.create_table(
        TableName=name,
        AttributeDefinitions=DEFINITIONS,
        KeySchema=[{"AttributeName": "match", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[GSI],
        BillingMode="PAY_PER_REQUEST",
    )
    return response["TableDescription"]  # type: ignore[no-any-return]


def match(
    ident: str,
    tournament: str | None = "w24",
    area: int | None = 1,
    round_: str | None = "final",
    bracket: bytes | None = b"\x01",
    seq: int | None = 1,
    **extra: Any,
) -> dict[str, Any]:
    item: dict[str, Any] = {"match": {"S": ident}, "note": {"S": "not projected"}}
    for name, value in (
        ("tournament", tournament),
        ("area", area),
        ("round", round_),
        ("bracket", bracket),
        ("seq", seq),
    ):
        if value is None:
            continue
        if isinstance(value, bytes):
            item[name] = {"B": value}
        elif isinstance(value, int):
            item[name] = {"N": str(value)}
        else:
            item[name] = {"S": value}
    item.update(extra)
    return item


# Matches of one partition (w24, area 1) in index order: round, then bracket bytes (a zero
# byte and a value that begins another included), then seq numerically; then other partitions.
ORDERED = [
    match("m01", round_="final", bracket=b"\x00", seq=2),
    match("m02", round_="final", bracket=b"\x00\x00", seq=1),
    match("m03", round_="final", bracket=b"\x00\x01", seq=1),
    match("m04", round_="final", bracket=b"\x01", seq=-5),
    match("m05", round_="final", bracket=b"\x01", seq=3),
    match("m06", round_="final", bracket=b"\x01", seq=10),
    match("m07", round_="final", bracket=b"\x01\x00", seq=0),
    match("m08", round_="semi", bracket=b"\x00", seq=1),
    match("m09", round_="semifinal", bracket=b"\x00", seq=1),
]
OTHERS = [
    match("x01", area=2),  # another partition: the same tournament, another area
    match("x02", tournament="w25"),
    match("s01", area=None),  # sparse: any key attribute missing leaves the item out
    match("s02", round_=None),
    match("s03", bracket=None),
    match("s04", seq=None),
]


def seed(ddb: Any, name: str) -> None:
    for item in [*reversed(ORDERED), *OTHERS]:
        ddb.put_item(TableName=name, Item={**item, "score": {"N": "7"}})


def query(ddb: Any, name: str, condition: str, values: dict[str, Any], **kw: Any) -> Any:
    base = {":t": {"S": "w24"}, ":r": {"N": "1"}}
    return ddb.query(
        TableName=name,
        IndexName="by-bracket",
        KeyConditionExpression="tournament = :t AND area = :r" + condition,
        ExpressionAttributeValues={**base, **values},
        **kw,
    )


def ids(response: dict[str, Any]) -> list[str]:
    return [i["match"]["S"] for i in response["Items"]]


def failure(call: Any, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kw)
    error = info.value.response["Error"]
    return error["Code"], error["Message"]


def test_create_describe_and_count(ddb: Any, table_name: str) -> None:
    created = create(ddb, table_name)
    assert created["GlobalSecondaryIndexes"][0]["KeySchema"] == INDEX_KEY  # submitted order
    seed(ddb, table_name)
    described = ddb.describe_table(TableName=table_name)["Table"]
    (index,) = described["GlobalSecondaryIndexes"]
    assert index["KeySchema"] == INDEX_KEY
    assert index["ItemCount"] == len(ORDERED) + 2  # the sparse four are not in it
    assert index["IndexSizeBytes"] > 0
    entries = ddb.scan(TableName=table_name, IndexName="by-bracket")["Items"]
    assert {e["match"]["S"] for e in entries} == {i["match"]["S"] for i in ORDERED} | {
        "x01",
        "x02",
    }
    # Projection: the table key, every index key attribute and the INCLUDE list, nothing else.
    assert set(entries[0]) == {"match", "tournament", "area", "round", "bracket", "seq", "score"}


def test_query_order_prefixes_and_range_conditions(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    seed(ddb, table_name)
    everything = [i["match"]["S"] for i in ORDERED]
    assert ids(query(ddb, table_name, "", {})) == everything
    assert ids(query(ddb, table_name, "", {}, ScanIndexForward=False)) == everything[::-1]
    cases: list[tuple[str, dict[str, Any], list[str]]] = [
        (" AND round = :a", {":a": {"S": "final"}}, everything[:7]),
        (" AND round > :a", {":a": {"S": "final"}}, ["m08", "m09"]),
        (" AND round <= :a", {":a": {"S": "semi"}}, everything[:8]),
        (" AND round < :a", {":a": {"S": "semi"}}, everything[:7]),
        (" AND round >= :a", {":a": {"S": "semi"}}, ["m08", "m09"]),
        (" AND begins_with(round, :a)", {":a": {"S": "semi"}}, ["m08", "m09"]),
        (" AND round BETWEEN :a AND :b", {":a": {"S": "f"}, ":b": {"S": "semi"}}, everything[:8]),
        (
            " AND round = :a AND bracket = :b",
            {":a": {"S": "final"}, ":b": {"B": b"\x00"}},
            ["m01"],
        ),
        (
            " AND round = :a AND begins_with(bracket, :b)",
            {":a": {"S": "final"}, ":b": {"B": b"\x00"}},
            ["m01", "m02", "m03"],
        ),
        (
            " AND round = :a AND bracket > :b",
            {":a": {"S": "final"}, ":b": {"B": b"\x00"}},
            ["m02", "m03", "m04", "m05", "m06", "m07"],
        ),
        (
            " AND round = :a AND bracket < :b",
            {":a": {"S": "final"}, ":b": {"B": b"\x01"}},
            ["m01", "m02", "m03"],
        ),
        (
            " AND round = :a AND bracket = :b AND seq BETWEEN :c AND :d",
            {":a": {"S": "final"}, ":b": {"B": b"\x01"}, ":c": {"N": "-5"}, ":d": {"N": "3"}},
            ["m04", "m05"],
        ),
        (
            " AND round = :a AND bracket = :b AND seq > :c",
            {":a": {"S": "final"}, ":b": {"B": b"\x01"}, ":c": {"N": "3"}},
            ["m06"],
        ),
        (
            " AND round = :a AND bracket = :b AND seq = :c",
            {":a": {"S": "final"}, ":b": {"B": b"\x01"}, ":c": {"N": "3.0"}},
            ["m05"],
        ),
    ]
    for condition, values, expected in cases:
        assert ids(query(ddb, table_name, condition, values)) == expected, condition
        backwards = query(ddb, table_name, condition, values, ScanIndexForward=False)
        assert ids(backwards) == expected[::-1], condition
    other = ddb.query(
        TableName=table_name,
        IndexName="by-bracket",
        KeyConditionExpression="area = :r AND tournament = :t",  # any order in the text
        ExpressionAttributeValues={":t": {"S": "w24"}, ":r": {"N": "2"}},
    )
    assert ids(other) == ["x01"]


def test_paging_carries_every_key_attribute(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    seed(ddb, table_name)
    seen: list[str] = []
    params: dict[str, Any] = {}
    while True:
        page = query(ddb, table_name, " AND round = :a", {":a": {"S": "final"}}, Limit=2, **params)
        seen.extend(ids(page))
        if "LastEvaluatedKey" not in page:
            break
        last = page["LastEvaluatedKey"]
        assert set(last) == {"match", "tournament", "area", "round", "bracket", "seq"}
        params = {"ExclusiveStartKey": last}
    assert seen == [i["match"]["S"] for i in ORDERED[:7]]
    start = {**last, "seq": {"S": "1"}}  # an index key of the wrong type
    code, message = failure(
        query, ddb=ddb, name=table_name, condition="", values={}, ExclusiveStartKey=start
    )
    assert (code, message) == (
        "ValidationException",
        "The provided key element does not match the schema",
    )
    del start["seq"]
    code, message = failure(
        query, ddb=ddb, name=table_name, condition="", values={}, ExclusiveStartKey=start
    )
    assert (code, message) == ("ValidationException", "The provided starting key is invalid")


@pytest.mark.parametrize(
    ("condition", "values", "message"),
    [
        (
            "tournament = :t",
            {":t": {"S": "w24"}},
            # ScyllaDB's test_gsi_composite_keys.py (run against DynamoDB): "HASH ... equality".
            "HASH key attributes area must have equality conditions specified in the query",
        ),
        (
            "tournament = :t AND area = :r AND bracket = :b",
            {":t": {"S": "w24"}, ":r": {"N": "1"}, ":b": {"B": b"\x01"}},
            "RANGE key attributes round must have equality conditions specified in the query "
            "because a condition is present on key attribute bracket",
        ),
        (
            "tournament = :t AND area = :r AND round = :a AND seq = :s",
            {":t": {"S": "w24"}, ":r": {"N": "1"}, ":a": {"S": "final"}, ":s": {"N": "1"}},
            "RANGE key attributes bracket must have equality conditions specified in the query "
            "because a condition is present on key attribute seq",
        ),
        (
            "tournament = :t AND area = :r AND round > :a AND bracket = :b",
            {":t": {"S": "w24"}, ":r": {"N": "1"}, ":a": {"S": "f"}, ":b": {"B": b"\x01"}},
            # ScyllaDB's test_gsi_composite_keys.py, checked on DynamoDB to name both.
            "RANGE key attributes round must have equality conditions specified in the query "
            "because a condition is present on key attribute bracket",
        ),
        (
            "tournament = :t AND area > :r",
            {":t": {"S": "w24"}, ":r": {"N": "1"}},
            "HASH key attributes area must have equality conditions specified in the query",
        ),
        (
            "tournament = :t AND area = :r AND note = :n",
            {":t": {"S": "w24"}, ":r": {"N": "1"}, ":n": {"S": "x"}},
            "Query condition missed key schema element: round",
        ),
        (
            "tournament = :t AND area = :r",
            {":t": {"S": "w24"}, ":r": {"S": "1"}},
            INVALID + "Condition parameter type does not match schema type",
        ),
        (
            "tournament = :t AND area = :r AND round = :a AND bracket > :b",
            {":t": {"S": "w24"}, ":r": {"N": "1"}, ":a": {"S": "final"}, ":b": {"S": "x"}},
            INVALID + "Condition parameter type does not match schema type",
        ),
        (
            "tournament = :t AND area = :r AND round = :a AND bracket = :b "
            "AND begins_with(seq, :s)",
            {
                ":t": {"S": "w24"},
                ":r": {"N": "1"},
                ":a": {"S": "final"},
                ":b": {"B": b"\x01"},
                ":s": {"N": "1"},
            },
            "Invalid KeyConditionExpression: Incorrect operand type for operator or function; "
            "operator or function: begins_with, operand type: N",
        ),
    ],
)
def test_key_condition_rules(
    ddb: Any, table_name: str, condition: str, values: dict[str, Any], message: str
) -> None:
    create(ddb, table_name)
    code, got = failure(
        ddb.query,
        TableName=table_name,
        IndexName="by-bracket",
        KeyConditionExpression=condition,
        ExpressionAttributeValues=values,
    )
    assert (code, got) == ("ValidationException", message)


def test_legacy_key_conditions(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    seed(ddb, table_name)

    def cond(operator: str, *values: dict[str, Any]) -> dict[str, Any]:
        return {"ComparisonOperator": operator, "AttributeValueList": list(values)}

    conditions = {
        "tournament": cond("EQ", {"S": "w24"}),
        "area": cond("EQ", {"N": "1"}),
        "round": cond("EQ", {"S": "final"}),
        "bracket": cond("EQ", {"B": b"\x01"}),
        "seq": cond("GT", {"N": "-5"}),
    }
    got = ddb.query(TableName=table_name, IndexName="by-bracket", KeyConditions=conditions)
    assert ids(got) == ["m05", "m06"]
    del conditions["round"]
    code, message = failure(
        ddb.query, TableName=table_name, IndexName="by-bracket", KeyConditions=conditions
    )
    assert code == "ValidationException" and "round" in message
    # The table's own key still takes one or two conditions.
    code, message = failure(ddb.query, TableName=table_name, KeyConditions=conditions)
    assert (code, message) == ("ValidationException", "Conditions can be of length 1 or 2 only")


def test_writes_keep_the_index_and_check_each_key_attribute(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    seed(ddb, table_name)
    code, message = failure(
        ddb.put_item, TableName=table_name, Item={**match("bad"), "seq": {"S": "1"}}
    )
    assert (code, message) == (
        "ValidationException",
        INVALID + "Type mismatch for Index Key seq Expected: N Actual: S IndexName: by-bracket",
    )
    code, message = failure(ddb.put_item, TableName=table_name, Item=match("bad", round_=""))
    assert code == "ValidationException" and "IndexKey: round" in message
    # Moving an item within the index (a sort-key attribute) and out of it (one removed).
    ddb.update_item(
        TableName=table_name,
        Key={"match": {"S": "m01"}},
        UpdateExpression="SET seq = :s",
        ExpressionAttributeValues={":s": {"N": "99"}},
    )
    ddb.update_item(
        TableName=table_name, Key={"match": {"S": "m02"}}, UpdateExpression="REMOVE bracket"
    )
    got = ids(
        query(
            ddb,
            table_name,
            " AND round = :a AND bracket = :b",
            {":a": {"S": "final"}, ":b": {"B": b"\x00"}},
        )
    )
    assert got == ["m01"]
    assert ids(query(ddb, table_name, " AND round = :a", {":a": {"S": "final"}}))[:2] == [
        "m01",
        "m03",
    ]
    ddb.delete_item(TableName=table_name, Key={"match": {"S": "m03"}})
    index = ddb.describe_table(TableName=table_name)["Table"]["GlobalSecondaryIndexes"][0]
    assert index["ItemCount"] == len(ORDERED) + 2 - 2


def _table(client: Any, name: str, gsis: list[dict[str, Any]], **extra: Any) -> None:
    names = sorted({k["AttributeName"] for i in gsis for k in i["KeySchema"]} | {"pk"})
    client.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in names],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=gsis,
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )


def _gsi(*keys: tuple[str, str]) -> dict[str, Any]:
    return {
        "IndexName": "gsi",
        "KeySchema": [{"AttributeName": a, "KeyType": k} for a, k in keys],
        "Projection": {"ProjectionType": "ALL"},
    }


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            [("a", "HASH"), ("b", "HASH"), ("c", "HASH"), ("d", "HASH"), ("e", "HASH")],
            "The KeySchema exceeds the maximum allowed number of HASH key attributes",
        ),
        (
            [("a", "HASH"), *((n, "RANGE") for n in "bcdef")],
            "The KeySchema exceeds the maximum allowed number of RANGE key attributes",
        ),
        (
            [("a", "HASH"), ("b", "RANGE"), ("c", "HASH")],
            "All HASH key attributes must precede RANGE key attributes in the KeySchema",
        ),
        (
            [("a", "HASH"), ("b", "RANGE"), ("a", "RANGE")],
            "The KeySchema contains multiple key attributes with the same name",
        ),
        (
            [("a", "HASH"), ("a", "HASH")],
            "The KeySchema contains multiple key attributes with the same name",
        ),
        (
            [("b", "RANGE"), ("a", "HASH")],
            "Invalid KeySchema: The first KeySchemaElement is not a HASH key type",
        ),
    ],
)
def test_create_table_key_schema_rules(
    ddb: Any, table_name: str, keys: list[tuple[str, str]], message: str
) -> None:
    code, got = failure(_table, client=ddb, name=table_name, gsis=[_gsi(*keys)])
    assert (code, got) == ("ValidationException", message)


def test_four_and_four_is_the_limit_and_tables_and_lsis_keep_two(ddb: Any, table_name: str) -> None:
    eight = [*((f"h{n}", "HASH") for n in range(4)), *((f"r{n}", "RANGE") for n in range(4))]
    _table(ddb, table_name, [_gsi(*eight)])
    described = ddb.describe_table(TableName=table_name)["Table"]
    assert len(described["GlobalSecondaryIndexes"][0]["KeySchema"]) == 8
    item = {"pk": {"S": "p"}, **{name: {"S": name} for name, _ in eight}}
    ddb.put_item(TableName=table_name, Item=item)
    condition = " AND ".join(f"{name} = :{name}" for name, _ in eight)
    got = ddb.query(
        TableName=table_name,
        IndexName="gsi",
        KeyConditionExpression=condition,
        ExpressionAttributeValues={f":{name}": {"S": name} for name, _ in eight},
    )
    assert got["Items"] == [item]
    lsi = {
        "IndexName": "lsi",
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "a", "KeyType": "RANGE"},
            {"AttributeName": "b", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "ALL"},
    }
    code, message = failure(
        ddb.create_table,
        TableName=table_name + "-l",
        AttributeDefinitions=[
            {"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "a", "b")
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        LocalSecondaryIndexes=[lsi],
        BillingMode="PAY_PER_REQUEST",
    )
    assert code == "ValidationException"
    assert message.endswith("Member must have length less than or equal to 2"), message


def test_update_table_adds_one_and_backfills_it(tmp_path: Path) -> None:
    with Engine(
        tmp_path / "backfill.db", index_config=IndexConfig(background=False, batch_size=2)
    ) as engine:
        client = DirectClient(engine)
        client.create_table(
            TableName="matches",
            AttributeDefinitions=[{"AttributeName": "match", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "match", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for item in [*ORDERED, *OTHERS]:
            client.put_item(TableName="matches", Item=item)
        client.update_table(
            TableName="matches",
            AttributeDefinitions=DEFINITIONS,
            GlobalSecondaryIndexUpdates=[{"Create": GSI}],
        )
        while engine.indexes.work_now():
            pass
        index = client.describe_table(TableName="matches")["Table"]["GlobalSecondaryIndexes"][0]
        assert (index["IndexStatus"], index["KeySchema"]) == ("ACTIVE", INDEX_KEY)
        assert index["ItemCount"] == len(ORDERED) + 2
        assert ids(query(client, "matches", "", {})) == [i["match"]["S"] for i in ORDERED]
        code, message = failure(
            client.update_table,
            TableName="matches",
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in "abc"],
            GlobalSecondaryIndexUpdates=[
                {
                    "Create": {
                        **_gsi(("a", "HASH"), ("b", "RANGE"), ("c", "HASH")),
                        "IndexName": "gsi2",
                    }
                }
            ],
        )
        assert (code, message) == (
            "ValidationException",
            "All HASH key attributes must precede RANGE key attributes in the KeySchema",
        )
