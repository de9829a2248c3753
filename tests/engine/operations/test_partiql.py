"""PartiQL (ExecuteStatement, BatchExecuteStatement, ExecuteTransaction) through real boto3
clients, in process and over HTTP: every statement kind, its parameters, paging, capacity and
DynamoDB's errors; and the hooks (streams, indexes, faults) seeing PartiQL writes."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine

WELL_FORMED = "Statement wasn't well formed, can't be processed: "
INCOMPLETE = "Where clause does not contain a mandatory equality on all key attributes"
CANCELLED = "Transaction cancelled, please refer cancellation reasons for specific reasons"


@pytest.fixture
def table(ddb: Any, table_name: str) -> str:
    return make_table(ddb, table_name)


def make_table(ddb: Any, table_name: str) -> str:
    ddb.create_table(
        TableName=table_name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for sk in range(1, 6):
        ddb.put_item(
            TableName=table_name,
            Item={
                "pk": {"S": "a"},
                "sk": {"N": str(sk)},
                "v": {"S": f"v{sk}"},
                "m": {"M": {"k": {"L": [{"N": "10"}, {"N": "20"}, {"N": "30"}]}}},
                **({"g": {"S": "even"}} if sk % 2 == 0 else {}),
            },
        )
    ddb.put_item(TableName=table_name, Item={"pk": {"S": "b"}, "sk": {"N": "1"}})
    return table_name


def run(ddb: Any, statement: str, *parameters: dict[str, Any], **kw: Any) -> Any:
    if parameters:
        kw["Parameters"] = list(parameters)
    response = ddb.execute_statement(Statement=statement, **kw)
    response.pop("ResponseMetadata", None)
    return response


def error(ddb: Any, statement: str, *parameters: dict[str, Any], **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as exc:
        run(ddb, statement, *parameters, **kw)
    return exc.value.response["Error"]["Code"], exc.value.response["Error"]["Message"]


def item(ddb: Any, table: str, pk: str, sk: int) -> dict[str, Any] | None:
    got: dict[str, Any] | None = ddb.get_item(
        TableName=table, Key={"pk": {"S": pk}, "sk": {"N": str(sk)}}, ConsistentRead=True
    ).get("Item")
    return got


# --- SELECT ---------------------------------------------------------------------------------


def test_select_by_full_key_is_a_get_item(ddb: Any, table: str) -> None:
    answer = run(
        ddb,
        f'SELECT * FROM "{table}" WHERE pk = ? AND sk = ?',
        {"S": "a"},
        {"N": "2"},
        ConsistentRead=True,
        ReturnConsumedCapacity="TOTAL",
    )
    assert answer["Items"] == [item(ddb, table, "a", 2)]
    assert answer["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 1.0}
    assert "NextToken" not in answer
    missing = run(ddb, f"SELECT * FROM \"{table}\" WHERE pk = 'zz' AND sk = 1")
    assert missing["Items"] == []


def test_select_by_partition_key_is_a_query_in_key_order(ddb: Any, table: str) -> None:
    answer = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk = 'a' AND sk > 2")
    assert answer["Items"] == [{"sk": {"N": str(n)}} for n in (3, 4, 5)]
    descending = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk = 'a' ORDER BY sk DESC")
    assert [i["sk"]["N"] for i in descending["Items"]] == ["5", "4", "3", "2", "1"]
    between = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk='a' AND sk BETWEEN 2 AND 3")
    assert [i["sk"]["N"] for i in between["Items"]] == ["2", "3"]
    filtered = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk='a' AND v IN ['v1', 'v4']")
    assert [i["sk"]["N"] for i in filtered["Items"]] == ["1", "4"]


def test_select_on_an_index_and_a_scan(ddb: Any, table: str) -> None:
    on_index = run(ddb, f'SELECT sk FROM "{table}"."by-g" WHERE g = \'even\'')
    assert sorted(i["sk"]["N"] for i in on_index["Items"]) == ["2", "4"]
    scan = run(ddb, f'SELECT pk, sk FROM "{table}" WHERE sk = 1')
    assert sorted(i["pk"]["S"] for i in scan["Items"]) == ["a", "b"]
    assert len(run(ddb, f'SELECT * FROM "{table}"')["Items"]) == 6
    code, message = error(
        ddb, f'SELECT * FROM "{table}"."by-g" WHERE g = \'x\'', ConsistentRead=True
    )
    assert (code, message) == (
        "ValidationException",
        "Strongly consistent read is not supported on Global Secondary Indexes",
    )


def test_projections_name_nested_paths_by_their_leaf(ddb: Any, table: str) -> None:
    answer = run(ddb, f"SELECT v, m.k[1], m.k[2], nope FROM \"{table}\" WHERE pk='a' AND sk=1")
    assert answer["Items"] == [{"v": {"S": "v1"}, "k[1]": {"N": "20"}, "k[2]": {"N": "30"}}]
    _code, message = error(ddb, f'SELECT v, x.v FROM "{table}"')
    assert message == "Duplicate identifiers in select clause: v"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("begins_with(v, 'v')", ["1", "2", "3", "4", "5"]),
        ("contains(v, '3')", ["3"]),
        ("attribute_exists(g)", ["2", "4"]),
        ("attribute_not_exists(g)", ["1", "3", "5"]),
        ("g IS MISSING", ["1", "3", "5"]),
        ("g IS NOT MISSING", ["2", "4"]),
        ("attribute_type(g, 'S')", ["2", "4"]),
        ("size(v) = 2 AND v <> 'v1'", ["2", "3", "4", "5"]),
        ("NOT (v >= 'v2' AND v <= 'v4')", ["1", "5"]),
        ("v = 'v1' OR v = 'v5'", ["1", "5"]),
        ("m.k[0] = 10 AND sk < 3", ["1", "2"]),
    ],
)
def test_conditions(ddb: Any, table: str, where: str, expected: list[str]) -> None:
    answer = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk = 'a' AND {where}")
    assert sorted(i["sk"]["N"] for i in answer["Items"]) == expected


def test_limit_and_next_token_page_through(ddb: Any, table: str) -> None:
    statement = f'SELECT sk FROM "{table}" WHERE pk = ?'
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        kw: dict[str, Any] = {"Limit": 2}
        if token:
            kw["NextToken"] = token
        page = run(ddb, statement, {"S": "a"}, **kw)
        seen += [i["sk"]["N"] for i in page["Items"]]
        pages += 1
        token = page.get("NextToken")
        if token is None:
            break
        assert page["LastEvaluatedKey"]["pk"] == {"S": "a"}
    assert seen == ["1", "2", "3", "4", "5"] and pages == 3
    first = run(ddb, statement, {"S": "a"}, Limit=1)
    assert error(ddb, statement, {"S": "b"}, Limit=1, NextToken=first["NextToken"]) == (
        "ValidationException",
        "NextToken does not match request",
    )
    assert error(ddb, statement, {"S": "a"}, NextToken="not a token") == (
        "ValidationException",
        "Invalid NextToken",
    )
    forged = base64.b64encode(b'{"k": 1}').decode()
    assert error(ddb, statement, {"S": "a"}, NextToken=forged)[1] == "Invalid NextToken"


# --- INSERT, UPDATE, DELETE -----------------------------------------------------------------


def test_insert_is_not_an_upsert(ddb: Any, table: str) -> None:
    statement = f"INSERT INTO \"{table}\" VALUE {{'pk': ?, 'sk': 9, 'n': -1.50, 's': <<'x', 'y'>>, 'l': [null, true, {{'q': 'r'}}]}}"
    assert run(ddb, statement, {"S": "new"}) == {"Items": []}
    assert item(ddb, table, "new", 9) == {
        "pk": {"S": "new"},
        "sk": {"N": "9"},
        "n": {"N": "-1.5"},
        "s": {"SS": ["x", "y"]},
        "l": {"L": [{"NULL": True}, {"BOOL": True}, {"M": {"q": {"S": "r"}}}]},
    }
    assert error(ddb, statement, {"S": "new"}) == (
        "DuplicateItemException",
        "Duplicate primary key exists in table",
    )
    assert error(ddb, f"INSERT INTO \"{table}\" VALUE {{'pk': 'x'}}")[1] == (
        "Key attribute should be present in the item: Key sk"
    )
    assert error(ddb, f"INSERT INTO \"{table}\" VALUE {{'pk': 1, 'sk': 1}}")[1] == (
        "Key attribute's data type should match its data type in table's schema: Key pk"
    )


def test_update_set_remove_and_returning(ddb: Any, table: str) -> None:
    answer = run(
        ddb,
        f"UPDATE \"{table}\" SET n = 1, v = 'new', m.k[0] = m.k[0] + 5, ss = set_add(ss, <<'a'>>) "
        "REMOVE g WHERE pk = 'a' AND sk = 2 RETURNING ALL NEW *",
    )
    after = item(ddb, table, "a", 2)
    assert answer == {"Items": [after]}
    assert after is not None and "g" not in after
    assert after["m"]["M"]["k"]["L"][0] == {"N": "15"} and after["ss"] == {"SS": ["a"]}
    modified = run(
        ddb, f"UPDATE \"{table}\" SET n = 2 WHERE pk='a' AND sk=2 RETURNING MODIFIED OLD *"
    )
    assert modified == {"Items": [{"n": {"N": "1"}}]}
    plain = run(ddb, f"UPDATE \"{table}\" SET n = 3 WHERE pk='a' AND sk=2")
    assert plain == {"Items": []}


def test_update_of_a_missing_item_and_a_failed_condition(ddb: Any, table: str) -> None:
    code, _message = error(ddb, f"UPDATE \"{table}\" SET n = 1 WHERE pk = 'zz' AND sk = 1")
    assert code == "ConditionalCheckFailedException"
    assert item(ddb, table, "zz", 1) is None
    with pytest.raises(ClientError) as exc:
        run(
            ddb,
            f"UPDATE \"{table}\" SET n = 1 WHERE pk = 'a' AND sk = 1 AND v = 'other'",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert exc.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert exc.value.response["Item"] == item(ddb, table, "a", 1)


def test_delete_with_conditions_and_returning(ddb: Any, table: str) -> None:
    assert error(ddb, f"DELETE FROM \"{table}\" WHERE pk='a' AND sk=1 AND v='x'")[0] == (
        "ConditionalCheckFailedException"
    )
    old = item(ddb, table, "a", 1)
    answer = run(ddb, f"DELETE FROM \"{table}\" WHERE pk='a' AND sk=1 RETURNING ALL OLD *")
    assert answer == {"Items": [old]} and item(ddb, table, "a", 1) is None
    assert run(ddb, f"DELETE FROM \"{table}\" WHERE pk='a' AND sk=1") == {"Items": []}
    assert error(ddb, f"DELETE FROM \"{table}\" WHERE pk='a' AND sk=2 RETURNING ALL NEW *")[1] == (
        "Invalid returning clause: RETURNING ALL NEW *. Only RETURNING ALL OLD * is allowed in "
        "DELETE statements."
    )


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE \"{t}\" SET n = 1 WHERE pk = 'a'",
        "UPDATE \"{t}\" SET n = 1 WHERE pk = 'a' OR sk = 1",
        'DELETE FROM "{t}" WHERE sk = 1',
        "DELETE FROM \"{t}\" WHERE pk = 'a' AND sk > 1",
    ],
)
def test_writes_need_the_whole_key(ddb: Any, table: str, statement: str) -> None:
    assert error(ddb, statement.format(t=table)) == ("ValidationException", INCOMPLETE)


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("UPSERT INTO t VALUE {{'pk': 'a'}}", WELL_FORMED + "Expected data manipulation"),
        ("CREATE TABLE t", WELL_FORMED + "Expected data manipulation"),
        ("SELECT * FROM \"{t}\" WHERE pad = 'none'", WELL_FORMED + "Unexpected keyword"),
        ('SELECT * FROM "{t}" WHERE v == 1', WELL_FORMED + "Unexpected token at 1:{c}:1"),
        ('SELECT * FROM "{t}" WHERE', WELL_FORMED + "Unexpected end of statement"),
        (
            "INSERT INTO \"{t}\".\"by-g\" VALUE {{'pk': 'a', 'sk': 1}}",
            "FROM clause may only contain a single table name in data manipulation statements",
        ),
        (
            'UPDATE "{t}"."by-g" SET n = 1 WHERE pk = \'a\' AND sk = 1',
            "This operation is not supported on an index",
        ),
        (
            "EXISTS(SELECT * FROM \"{t}\" WHERE pk = 'a' AND sk = 1)",
            "EXISTS can only be used in ExecuteTransaction write requests.",
        ),
        (
            'SELECT * FROM "{t}" ORDER BY sk',
            "Must have WHERE clause in the statement when using ORDER BY clause.",
        ),
        (
            "SELECT * FROM \"{t}\" WHERE pk = 'a' ORDER BY v",
            "Variable reference v in ORDER BY clause must be part of the primary key",
        ),
    ],
)
def test_statement_errors(ddb: Any, table: str, statement: str, message: str) -> None:
    text = statement.format(t=table)
    expected = message.format(c=len(f'SELECT * FROM "{table}" WHERE v =') + 1)
    assert error(ddb, text) == ("ValidationException", expected)


def test_unknown_table_and_parameter_count(ddb: Any, table: str) -> None:
    assert error(ddb, "SELECT * FROM \"no-such-table\" WHERE pk = 'a'") == (
        "ResourceNotFoundException",
        "Requested resource not found",
    )
    message = "Number of parameters in request and statement don't match."
    assert error(ddb, f'SELECT * FROM "{table}" WHERE pk = ?')[1] == message
    assert error(ddb, f"SELECT * FROM \"{table}\" WHERE pk = 'a'", {"S": "a"})[1] == message


# --- BatchExecuteStatement ------------------------------------------------------------------


def test_batch_reads_answer_per_statement(ddb: Any, table: str) -> None:
    answer = ddb.batch_execute_statement(
        Statements=[
            {
                "Statement": f'SELECT v FROM "{table}" WHERE pk=? AND sk=?',
                "Parameters": [{"S": "a"}, {"N": "1"}],
            },
            {"Statement": f"SELECT * FROM \"{table}\" WHERE pk='zz' AND sk=1"},
            {"Statement": f"SELECT * FROM \"{table}\" WHERE pk='a'"},
            {"Statement": "SELECT * FROM \"no-such-table\" WHERE pk='a' AND sk=1"},
            {"Statement": "SELEC nothing"},
        ],
        ReturnConsumedCapacity="TOTAL",
    )
    assert answer["Responses"] == [
        {"TableName": table, "Item": {"v": {"S": "v1"}}},
        {"TableName": table},
        {
            "TableName": table,
            "Error": {
                "Code": "ValidationError",
                "Message": "Select statements within BatchExecuteStatement must specify the "
                "primary key in the where clause.",
            },
        },
        {
            "TableName": "no-such-table",
            "Error": {"Code": "ResourceNotFound", "Message": "Requested resource not found"},
        },
        {
            "Error": {
                "Code": "ValidationError",
                "Message": WELL_FORMED + "Expected data manipulation",
            }
        },
    ]
    assert answer["ConsumedCapacity"] == [{"TableName": table, "CapacityUnits": 1.0}]


def test_batch_writes_fail_one_by_one(ddb: Any, table: str) -> None:
    answer = ddb.batch_execute_statement(
        Statements=[
            {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'n', 'sk': 1}}"},
            {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'a', 'sk': 1}}"},
            {
                "Statement": f"UPDATE \"{table}\" SET n = 1 WHERE pk='a' AND sk=1 AND v='no'",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
            {"Statement": f"DELETE FROM \"{table}\" WHERE pk='b' AND sk=1"},
        ]
    )
    responses = answer["Responses"]
    assert responses[0] == {"TableName": table}
    assert responses[1]["Error"] == {
        "Code": "DuplicateItem",
        "Message": "Duplicate primary key exists in table",
    }
    assert responses[2]["Error"]["Code"] == "ConditionalCheckFailed"
    assert responses[2]["Error"]["Item"]["v"] == {"S": "v1"}
    assert responses[3] == {"TableName": table}
    assert item(ddb, table, "n", 1) is not None and item(ddb, table, "b", 1) is None


def test_batch_refuses_reads_with_writes_and_more_than_25(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.batch_execute_statement(
            Statements=[
                {"Statement": f"SELECT * FROM \"{table}\" WHERE pk='a' AND sk=1"},
                {"Statement": f"DELETE FROM \"{table}\" WHERE pk='a' AND sk=1"},
            ]
        )
    assert exc.value.response["Error"]["Message"] == (
        "Read and write requests together in the same batch is not supported"
    )
    assert item(ddb, table, "a", 1) is not None
    with pytest.raises(ClientError) as too_many:
        ddb.batch_execute_statement(
            Statements=[{"Statement": f"SELECT * FROM \"{table}\" WHERE pk='a' AND sk=1"}] * 26
        )
    assert "Member must have length less than or equal to 25" in str(too_many.value)


# --- ExecuteTransaction ---------------------------------------------------------------------


def test_transaction_of_reads(ddb: Any, table: str) -> None:
    answer = ddb.execute_transaction(
        TransactStatements=[
            {"Statement": f"SELECT v FROM \"{table}\" WHERE pk='a' AND sk=1"},
            {"Statement": f"SELECT * FROM \"{table}\" WHERE pk='zz' AND sk=1"},
        ]
    )
    assert answer["Responses"] == [{"Item": {"v": {"S": "v1"}}}, {}]
    with pytest.raises(ClientError) as exc:
        ddb.execute_transaction(
            TransactStatements=[{"Statement": f"SELECT * FROM \"{table}\" WHERE pk='a'"}]
        )
    assert exc.value.response["Error"]["Message"] == (
        "Select statements within ExecuteTransaction must specify the primary key in the where "
        "clause."
    )


def test_transaction_of_writes_is_all_or_nothing(ddb: Any, table: str) -> None:
    statements = [
        {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'tx', 'sk': 1}}"},
        {"Statement": f"UPDATE \"{table}\" SET n = 1 WHERE pk='a' AND sk=1"},
        {"Statement": f"DELETE FROM \"{table}\" WHERE pk='b' AND sk=1"},
        {"Statement": f"EXISTS(SELECT * FROM \"{table}\" WHERE pk='a' AND sk=2 AND v='v2')"},
    ]
    failing = [
        *statements[:3],
        {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'a', 'sk': 3}}"},
    ]
    with pytest.raises(ClientError) as exc:
        ddb.execute_transaction(TransactStatements=failing)
    response = exc.value.response
    assert response["Error"]["Code"] == "TransactionCanceledException"
    assert response["Error"]["Message"] == f"{CANCELLED} [None, None, None, DuplicateItem]"
    assert response["CancellationReasons"][3]["Code"] == "DuplicateItem"
    assert item(ddb, table, "tx", 1) is None and item(ddb, table, "b", 1) is not None
    token = "partiql-token-1"
    answer = ddb.execute_transaction(TransactStatements=statements, ClientRequestToken=token)
    assert "Responses" not in answer
    assert item(ddb, table, "tx", 1) is not None and item(ddb, table, "b", 1) is None
    again = ddb.execute_transaction(TransactStatements=statements, ClientRequestToken=token)
    assert "Responses" not in again  # replayed: the INSERT is not a duplicate
    with pytest.raises(ClientError) as mismatch:
        ddb.execute_transaction(TransactStatements=statements[:2], ClientRequestToken=token)
    assert mismatch.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"


def test_transaction_refuses_reads_with_writes(ddb: Any, table: str) -> None:
    with pytest.raises(ClientError) as exc:
        ddb.execute_transaction(
            TransactStatements=[
                {"Statement": f"SELECT * FROM \"{table}\" WHERE pk='a' AND sk=1"},
                {"Statement": f"DELETE FROM \"{table}\" WHERE pk='a' AND sk=1"},
            ]
        )
    assert exc.value.response["Error"]["Message"] == (
        "ExecuteTransaction API does not support both read and write operations in the same "
        "request."
    )


# --- the hooks see PartiQL writes -----------------------------------------------------------


def test_streams_and_indexes_see_partiql_writes(
    engine: Engine, make_ddb: Any, table_name: str
) -> None:
    ddb = make_ddb("inprocess")
    ddb.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        BillingMode="PAY_PER_REQUEST",
    )
    run(ddb, f"INSERT INTO \"{table_name}\" VALUE {{'pk': 'p', 'g': 'x'}}")
    run(ddb, f"UPDATE \"{table_name}\" SET g = 'y' WHERE pk = 'p'")
    run(ddb, f"DELETE FROM \"{table_name}\" WHERE pk = 'p'")
    assert run(ddb, f'SELECT * FROM "{table_name}"."by-g" WHERE g = \'y\'')["Items"] == []
    streams = make_ddb("inprocess", service_name="dynamodbstreams")
    arn = ddb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]


def test_faults_see_the_equivalent_operation(
    engine: Engine, make_ddb: Any, table_name: str
) -> None:
    ddb = make_ddb("inprocess")
    table = make_table(ddb, table_name)
    engine.faults.error(
        "ProvisionedThroughputExceededException", operation="UpdateItem", table=table, count=1
    )
    code, _message = error(ddb, f"UPDATE \"{table}\" SET n = 1 WHERE pk='a' AND sk=1")
    assert code == "ProvisionedThroughputExceededException"
    assert "n" not in (item(ddb, table, "a", 1) or {})
    run(ddb, f"UPDATE \"{table}\" SET n = 1 WHERE pk='a' AND sk=1")
    assert (item(ddb, table, "a", 1) or {})["n"] == {"N": "1"}
