"""PartiQL statements nested deep (issue 39, point 1) and a tuple naming an attribute twice
(point 5), in ExecuteStatement, BatchExecuteStatement and ExecuteTransaction, in process and over
HTTP (the ``ddb`` fixture's two transports).

500 nested lists in a VALUE (1,038 characters) or 1,000 nested parentheses in a WHERE, far under
DynamoDB's 8,192-character statement limit, ran the statement builder out of stack: a 500
``InternalServerError`` (in a batch, the whole batch). They are refused as DynamoDB refuses what
they would become, before anything recurses (engine/expressions/partiql_shape.py): a value past
the 32 levels an item may nest gets the item's ``Nesting Levels have exceeded supported limits``;
conditions nested past 400 levels get the expression grammar's answers (too many operators, or
redundant parentheses). In a batch each is that statement's own error, as any statement's syntax
error is (BatchStatementError, code ``ValidationError``); in a transaction, the request's.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.values import NESTING_TOO_DEEP

TOO_MANY = "The expression contains too many operators; operator count: 301"
REDUNDANT = "The expression has redundant parentheses;"
# No public source gives DynamoDB's text for a PartiQL tuple naming an attribute twice: the
# engine answers with DynamoDB's wording for a duplicated attribute name elsewhere (CreateTable's
# AttributeDefinitions); docs/engine.md lists it among the differences.
DUPLICATED = "One or more parameter values were invalid: Attribute Name is duplicated: v"


def _lists(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


CASES = [
    # (statement, DynamoDB's message)
    pytest.param("INSERT INTO \"{t}\" VALUE {{'pk':'x','sk':1,'v':" + _lists(500) + "}}",
                 NESTING_TOO_DEEP, id="500-nested-lists-in-VALUE"),
    pytest.param("SELECT * FROM \"{t}\" WHERE " + "(" * 1000 + "pk = 'a'" + ")" * 1000,
                 REDUNDANT, id="1000-nested-parentheses-in-WHERE"),
    pytest.param("SELECT * FROM \"{t}\" WHERE pk = 'a' AND sk = 1 AND v = " + _lists(800),
                 NESTING_TOO_DEEP, id="800-nested-lists-in-WHERE"),
    pytest.param("SELECT * FROM \"{t}\" WHERE " + "NOT " * 1000 + "pk = 'a'",
                 TOO_MANY, id="1000-NOTs"),
    pytest.param("SELECT * FROM \"{t}\" WHERE " + "size(" * 700 + "v" + ")" * 700 + " = 1",
                 TOO_MANY, id="700-nested-calls"),
    pytest.param("UPDATE \"{t}\" SET v = " + "size(" * 700 + "v" + ")" * 700
                 + " WHERE pk = 'a' AND sk = 1", TOO_MANY, id="700-nested-calls-in-SET"),
    pytest.param("UPDATE \"{t}\" SET v = {{'m':" + _lists(600) + "}} WHERE pk = 'a' AND sk = 1",
                 NESTING_TOO_DEEP, id="600-nested-lists-in-SET"),
    pytest.param("DELETE FROM \"{t}\" WHERE pk = 'a' AND sk = 1 AND "
                 + "(" * 600 + "v = 'v1' OR v = 'v2'" + ")" * 600,
                 REDUNDANT, id="600-nested-parentheses-in-DELETE"),
]  # fmt: skip


@pytest.fixture
def table(ddb: Any, table_name: str) -> str:
    ddb.create_table(
        TableName=table_name,
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
    for sk in range(1, 6):
        item = {"pk": {"S": "a"}, "sk": {"N": str(sk)}, "v": {"S": f"v{sk}"}}
        ddb.put_item(TableName=table_name, Item=item)
    return table_name


def _refusal(call: Any, **request: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as caught:
        call(**request)
    error = caught.value.response["Error"]
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return error["Code"], error["Message"]


@pytest.mark.parametrize(("template", "message"), CASES)
def test_a_deep_statement_is_refused_in_every_operation(
    ddb: Any, table: str, template: str, message: str
) -> None:
    statement = template.format(t=table)
    assert len(statement) <= 8192  # within DynamoDB's statement limit: refused for its shape
    assert _refusal(ddb.execute_statement, Statement=statement) == ("ValidationException", message)
    assert _refusal(ddb.execute_transaction, TransactStatements=[{"Statement": statement}]) == (
        "ValidationException",
        message,
    )
    # In a batch: that statement's own error; the other statement still runs.
    good = f"SELECT v FROM \"{table}\" WHERE pk = 'a' AND sk = 2"
    answer = ddb.batch_execute_statement(Statements=[{"Statement": statement}, {"Statement": good}])
    first, second = answer["Responses"]
    assert first["Error"] == {"Code": "ValidationError", "Message": message}
    assert second["Item"] == {"v": {"S": "v2"}}
    # The table is as it was: nothing written, nothing removed.
    got = ddb.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"N": "1"}})
    assert got["Item"]["v"] == {"S": "v1"}
    assert "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": "x"}, "sk": {"N": "1"}})


def test_nesting_up_to_the_limits_still_runs(ddb: Any, table: str) -> None:
    """The limits refuse only what DynamoDB refuses or what is nested past any use: 32 levels
    of lists, and 390 parentheses (flattened, as before), are answered as before."""
    ddb.execute_statement(
        Statement=f"INSERT INTO \"{table}\" VALUE {{'pk':'deep','sk':1,'v':{_lists(31)}}}"
    )
    got = ddb.get_item(TableName=table, Key={"pk": {"S": "deep"}, "sk": {"N": "1"}})["Item"]["v"]
    for _ in range(31):
        (got,) = got["L"]
    assert got == {"N": "1"}
    assert _refusal(
        ddb.execute_statement,
        Statement=f"INSERT INTO \"{table}\" VALUE {{'pk':'deep','sk':2,'v':{_lists(32)}}}",
    ) == ("ValidationException", NESTING_TOO_DEEP)
    where = "(" * 390 + "pk = 'a' AND sk = 3" + ")" * 390
    answer = ddb.execute_statement(Statement=f'SELECT v FROM "{table}" WHERE {where}')
    assert answer["Items"] == [{"v": {"S": "v3"}}]
    chain = " AND ".join(["pk = 'a'", "sk = 4", *(f"v <> 'w{i}'" for i in range(150))])
    answer = ddb.execute_statement(Statement=f'SELECT v FROM "{table}" WHERE {chain}')
    assert answer["Items"] == [{"v": {"S": "v4"}}]


def test_a_parameter_nested_past_an_items_levels_is_refused(ddb: Any, table: str) -> None:
    deep: dict[str, Any] = {"S": "x"}
    for _ in range(200):
        deep = {"L": [deep]}
    statement = f"SELECT * FROM \"{table}\" WHERE pk = 'a' AND sk = 1 AND v = ?"
    assert _refusal(ddb.execute_statement, Statement=statement, Parameters=[deep]) == (
        "ValidationException",
        NESTING_TOO_DEEP,
    )
    answer = ddb.batch_execute_statement(
        Statements=[{"Statement": statement, "Parameters": [deep]}]
    )
    assert answer["Responses"][0]["Error"] == {
        "Code": "ValidationError",
        "Message": NESTING_TOO_DEEP,
    }
    insert = f"INSERT INTO \"{table}\" VALUE {{'pk':'p','sk':1,'v':?}}"
    assert _refusal(
        ddb.execute_transaction, TransactStatements=[{"Statement": insert, "Parameters": [deep]}]
    ) == ("ValidationException", NESTING_TOO_DEEP)


def test_a_tuple_naming_an_attribute_twice_is_refused(ddb: Any, table: str) -> None:
    """Point 5: the last value used to win silently."""
    for statement in (
        f"INSERT INTO \"{table}\" VALUE {{'pk':'d','sk':1,'v':1,'v':2}}",
        f"INSERT INTO \"{table}\" VALUE {{'pk':'d','sk':1,'m':{{'v':1,'v':2}}}}",
        f"UPDATE \"{table}\" SET m = {{'v':1,'v':2}} WHERE pk = 'a' AND sk = 1",
    ):
        assert _refusal(ddb.execute_statement, Statement=statement) == (
            "ValidationException",
            DUPLICATED,
        )
        assert _refusal(ddb.execute_transaction, TransactStatements=[{"Statement": statement}]) == (
            "ValidationException",
            DUPLICATED,
        )
    assert "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": "d"}, "sk": {"N": "1"}})
    # Distinct names, and the same name in two different tuples, are fine.
    ddb.execute_statement(
        Statement=f"INSERT INTO \"{table}\" VALUE {{'pk':'d','sk':1,'v':{{'v':1}},'w':{{'v':2}}}}"
    )
