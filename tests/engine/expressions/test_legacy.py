"""Legacy (pre-expression) parameters: Expected, ConditionalOperator, AttributeUpdates,
AttributesToGet, KeyConditions, QueryFilter and ScanFilter.

Each behaviour is checked on its own, and against its expression twin: the legacy request and
the equivalent expression request must give the same answer on the same data.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.errors import DynamoDBError

INVALID = "One or more parameter values were invalid: "
TABLE = "tbl"

# The item most conditions are evaluated against.
ITEM: dict[str, Any] = {
    "pk": {"S": "p"},
    "sk": {"N": "1"},
    "s": {"S": "hello"},
    "n": {"N": "5"},
    "b": {"B": b"\x01\x02\x03"},
    "ss": {"SS": ["x", "y"]},
    "ns": {"NS": ["1", "2"]},
    "l": {"L": [{"S": "x"}, {"N": "3"}]},
    "m": {"M": {"k": {"S": "v"}}},
    "t": {"BOOL": True},
    "z": {"NULL": True},
}


def create(engine: Engine, name: str = TABLE, *, sort: bool = True) -> None:
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if sort:
        definitions.append({"AttributeName": "sk", "AttributeType": "N"})
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


@pytest.fixture
def eng(engine: Engine) -> Engine:
    create(engine)
    engine.execute("PutItem", {"TableName": TABLE, "Item": ITEM})
    return engine


def error(engine: Engine, operation: str, params: dict[str, Any]) -> DynamoDBError:
    with pytest.raises(DynamoDBError) as info:
        engine.execute(operation, {"TableName": TABLE, **params})
    return info.value


def validation_message(engine: Engine, operation: str, params: dict[str, Any]) -> str:
    exc = error(engine, operation, params)
    assert exc.code == "ValidationException", exc.message
    return exc.message


def put_passes(engine: Engine, **condition: Any) -> bool:
    """Whether a conditional PutItem of ITEM (over itself) is accepted."""
    try:
        engine.execute("PutItem", {"TableName": TABLE, "Item": ITEM, **condition})
    except DynamoDBError as exc:
        assert exc.code == "ConditionalCheckFailedException", exc.message
        return False
    return True


def cond(operator: str, *values: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"ComparisonOperator": operator}
    if values:
        entry["AttributeValueList"] = list(values)
    return entry


# --- Expected: one case per ComparisonOperator, with its expression twin -------------------

# (attribute, Expected entry, expected outcome, ConditionExpression twin, twin's values)
OPERATOR_CASES = [
    ("s", cond("EQ", {"S": "hello"}), True, "#a = :v0", {":v0": {"S": "hello"}}),
    ("s", cond("EQ", {"S": "other"}), False, "#a = :v0", {":v0": {"S": "other"}}),
    ("n", cond("EQ", {"S": "5"}), False, "#a = :v0", {":v0": {"S": "5"}}),
    ("missing", cond("EQ", {"S": "x"}), False, "#a = :v0", {":v0": {"S": "x"}}),
    (
        "m",
        cond("EQ", {"M": {"k": {"S": "v"}}}),
        True,
        "#a = :v0",
        {":v0": {"M": {"k": {"S": "v"}}}},
    ),
    ("ss", cond("EQ", {"SS": ["y", "x"]}), True, "#a = :v0", {":v0": {"SS": ["y", "x"]}}),
    ("s", cond("NE", {"S": "hello"}), False, "#a <> :v0", {":v0": {"S": "hello"}}),
    ("missing", cond("NE", {"S": "x"}), True, "#a <> :v0", {":v0": {"S": "x"}}),
    ("n", cond("NE", {"S": "5"}), True, "#a <> :v0", {":v0": {"S": "5"}}),
    ("n", cond("LE", {"N": "5"}), True, "#a <= :v0", {":v0": {"N": "5"}}),
    ("n", cond("LT", {"N": "5"}), False, "#a < :v0", {":v0": {"N": "5"}}),
    ("n", cond("GE", {"N": "5.0"}), True, "#a >= :v0", {":v0": {"N": "5.0"}}),
    ("n", cond("GT", {"N": "4"}), True, "#a > :v0", {":v0": {"N": "4"}}),
    ("s", cond("GT", {"N": "4"}), False, "#a > :v0", {":v0": {"N": "4"}}),
    ("missing", cond("LT", {"N": "4"}), False, "#a < :v0", {":v0": {"N": "4"}}),
    ("z", cond("NOT_NULL"), True, "attribute_exists(#a)", None),
    ("missing", cond("NOT_NULL"), False, "attribute_exists(#a)", None),
    ("missing", cond("NULL"), True, "attribute_not_exists(#a)", None),
    ("s", cond("NULL"), False, "attribute_not_exists(#a)", None),
    ("s", cond("CONTAINS", {"S": "ell"}), True, "contains(#a, :v0)", {":v0": {"S": "ell"}}),
    ("ss", cond("CONTAINS", {"S": "y"}), True, "contains(#a, :v0)", {":v0": {"S": "y"}}),
    ("ns", cond("CONTAINS", {"N": "2"}), True, "contains(#a, :v0)", {":v0": {"N": "2"}}),
    ("l", cond("CONTAINS", {"N": "3"}), True, "contains(#a, :v0)", {":v0": {"N": "3"}}),
    ("b", cond("CONTAINS", {"B": b"\x02"}), True, "contains(#a, :v0)", {":v0": {"B": b"\x02"}}),
    ("ss", cond("CONTAINS", {"S": "q"}), False, "contains(#a, :v0)", {":v0": {"S": "q"}}),
    ("missing", cond("CONTAINS", {"S": "q"}), False, "contains(#a, :v0)", {":v0": {"S": "q"}}),
    (
        "s",
        cond("NOT_CONTAINS", {"S": "ell"}),
        False,
        "attribute_exists(#a) AND NOT contains(#a, :v0)",
        {":v0": {"S": "ell"}},
    ),
    (
        "ss",
        cond("NOT_CONTAINS", {"S": "q"}),
        True,
        "attribute_exists(#a) AND NOT contains(#a, :v0)",
        {":v0": {"S": "q"}},
    ),
    # A missing attribute fails NOT_CONTAINS: not the plain ``NOT contains(...)``.
    (
        "missing",
        cond("NOT_CONTAINS", {"S": "q"}),
        False,
        "attribute_exists(#a) AND NOT contains(#a, :v0)",
        {":v0": {"S": "q"}},
    ),
    ("s", cond("BEGINS_WITH", {"S": "he"}), True, "begins_with(#a, :v0)", {":v0": {"S": "he"}}),
    ("s", cond("BEGINS_WITH", {"S": "lo"}), False, "begins_with(#a, :v0)", {":v0": {"S": "lo"}}),
    (
        "b",
        cond("BEGINS_WITH", {"B": b"\x01"}),
        True,
        "begins_with(#a, :v0)",
        {":v0": {"B": b"\x01"}},
    ),
    (
        "n",
        cond("IN", {"N": "1"}, {"N": "5"}),
        True,
        "#a IN (:v0, :v1)",
        {":v0": {"N": "1"}, ":v1": {"N": "5"}},
    ),
    ("n", cond("IN", {"N": "1"}), False, "#a IN (:v0)", {":v0": {"N": "1"}}),
    ("missing", cond("IN", {"N": "1"}), False, "#a IN (:v0)", {":v0": {"N": "1"}}),
    (
        "n",
        cond("BETWEEN", {"N": "5"}, {"N": "9"}),
        True,
        "#a BETWEEN :v0 AND :v1",
        {":v0": {"N": "5"}, ":v1": {"N": "9"}},
    ),
    (
        "s",
        cond("BETWEEN", {"S": "a"}, {"S": "b"}),
        False,
        "#a BETWEEN :v0 AND :v1",
        {":v0": {"S": "a"}, ":v1": {"S": "b"}},
    ),
]


@pytest.mark.parametrize(("attr", "entry", "outcome", "twin", "twin_values"), OPERATOR_CASES)
def test_expected_operator_matches_its_expression_twin(
    eng: Engine,
    attr: str,
    entry: dict[str, Any],
    outcome: bool,
    twin: str,
    twin_values: dict[str, Any] | None,
) -> None:
    assert put_passes(eng, Expected={attr: entry}) is outcome
    expression: dict[str, Any] = {
        "ConditionExpression": twin,
        "ExpressionAttributeNames": {"#a": attr},
    }
    if twin_values is not None:
        expression["ExpressionAttributeValues"] = twin_values
    assert put_passes(eng, **expression) is outcome


@pytest.mark.parametrize(("attr", "entry", "outcome", "twin", "twin_values"), OPERATOR_CASES)
def test_scan_filter_matches_filter_expression(
    eng: Engine,
    attr: str,
    entry: dict[str, Any],
    outcome: bool,
    twin: str,
    twin_values: dict[str, Any] | None,
) -> None:
    eng.execute("PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "q"}, "sk": {"N": "2"}}})
    legacy = eng.execute("Scan", {"TableName": TABLE, "ScanFilter": {attr: entry}})
    expression: dict[str, Any] = {
        "TableName": TABLE,
        "FilterExpression": twin,
        "ExpressionAttributeNames": {"#a": attr},
    }
    if twin_values is not None:
        expression["ExpressionAttributeValues"] = twin_values
    twin_result = eng.execute("Scan", expression)
    assert legacy == twin_result
    assert legacy["ScannedCount"] == 2
    assert (ITEM in legacy["Items"]) is outcome


def test_expected_value_shorthand_and_exists(eng: Engine) -> None:
    assert put_passes(eng, Expected={"s": {"Value": {"S": "hello"}}})
    assert put_passes(eng, Expected={"s": {"Value": {"S": "hello"}, "Exists": True}})
    assert not put_passes(eng, Expected={"s": {"Value": {"S": "nope"}, "Exists": True}})
    assert not put_passes(eng, Expected={"missing": {"Value": {"S": "x"}}})
    assert put_passes(eng, Expected={"missing": {"Exists": False}})
    assert not put_passes(eng, Expected={"s": {"Exists": False}})


def test_expected_on_missing_item(eng: Engine) -> None:
    fresh = {"pk": {"S": "new"}, "sk": {"N": "9"}}
    with pytest.raises(DynamoDBError) as info:
        eng.execute(
            "PutItem",
            {
                "TableName": TABLE,
                "Item": fresh,
                "Expected": {"pk": {"Exists": True, "Value": {"S": "new"}}},
            },
        )
    assert info.value.code == "ConditionalCheckFailedException"
    eng.execute(
        "PutItem", {"TableName": TABLE, "Item": fresh, "Expected": {"pk": {"Exists": False}}}
    )
    got = eng.execute("GetItem", {"TableName": TABLE, "Key": fresh})
    assert got["Item"] == fresh


def test_conditional_operator_and_or(eng: Engine) -> None:
    one_true_one_false = {"s": {"Value": {"S": "hello"}}, "n": {"Value": {"N": "6"}}}
    assert not put_passes(eng, Expected=one_true_one_false)
    assert not put_passes(eng, Expected=one_true_one_false, ConditionalOperator="AND")
    assert put_passes(eng, Expected=one_true_one_false, ConditionalOperator="OR")
    both_false = {"s": {"Value": {"S": "x"}}, "n": {"Value": {"N": "6"}}}
    assert not put_passes(eng, Expected=both_false, ConditionalOperator="OR")


def test_delete_and_update_item_honour_expected(eng: Engine) -> None:
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    with pytest.raises(DynamoDBError) as info:
        eng.execute(
            "DeleteItem",
            {"TableName": TABLE, "Key": key, "Expected": {"n": cond("GT", {"N": "5"})}},
        )
    assert info.value.code == "ConditionalCheckFailedException"
    with pytest.raises(DynamoDBError) as info:
        eng.execute(
            "UpdateItem",
            {
                "TableName": TABLE,
                "Key": key,
                "Expected": {"n": {"Value": {"N": "4"}}},
                "AttributeUpdates": {"n": {"Value": {"N": "0"}}},
            },
        )
    assert info.value.code == "ConditionalCheckFailedException"
    assert eng.execute("GetItem", {"TableName": TABLE, "Key": key})["Item"] == ITEM
    eng.execute(
        "DeleteItem", {"TableName": TABLE, "Key": key, "Expected": {"n": cond("GE", {"N": "5"})}}
    )
    assert "Item" not in eng.execute("GetItem", {"TableName": TABLE, "Key": key})


def test_conditional_check_failure_returns_old_item(eng: Engine) -> None:
    exc = error(
        eng,
        "PutItem",
        {
            "Item": ITEM,
            "Expected": {"s": {"Exists": False}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    )
    assert exc.code == "ConditionalCheckFailedException"
    assert exc.extra["Item"] == ITEM


# --- Expected / Condition errors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"Exists": True, "ComparisonOperator": "LT", "AttributeValueList": [{"N": "1"}]},
            INVALID + "Exists and ComparisonOperator cannot be used together for Attribute: a",
        ),
        (
            {"Value": {"S": "x"}, "AttributeValueList": [{"S": "x"}], "ComparisonOperator": "EQ"},
            INVALID + "Value and AttributeValueList cannot be used together for Attribute: a",
        ),
        (
            {"AttributeValueList": [{"S": "x"}]},
            INVALID
            + "AttributeValueList can only be used with a ComparisonOperator for Attribute: a",
        ),
        (
            {"Exists": False, "Value": {"S": "x"}},
            INVALID + "Value cannot be used when Exists is false for Attribute: a",
        ),
        ({}, INVALID + "Value must be provided when Exists is null for Attribute: a"),
        ({"Exists": True}, INVALID + "Value must be provided when Exists is true for Attribute: a"),
        (
            {"ComparisonOperator": "LT"},
            INVALID
            + "Value or AttributeValueList must be used with ComparisonOperator: LT for Attribute: a",
        ),
        (
            {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "x"}, {"S": "y"}]},
            INVALID + "Invalid number of argument(s) for the EQ ComparisonOperator",
        ),
        (
            {"ComparisonOperator": "NULL", "Value": {"S": "x"}},
            INVALID + "Invalid number of argument(s) for the NULL ComparisonOperator",
        ),
        (
            {"ComparisonOperator": "BETWEEN", "Value": {"N": "1"}},
            INVALID + "Invalid number of argument(s) for the BETWEEN ComparisonOperator",
        ),
        (
            {"ComparisonOperator": "IN", "AttributeValueList": []},
            INVALID + "Invalid number of argument(s) for the IN ComparisonOperator",
        ),
        (
            {"ComparisonOperator": "LT", "Value": {"SS": ["x"]}},
            INVALID + "ComparisonOperator LT is not valid for SS AttributeValue type",
        ),
        (
            {"ComparisonOperator": "BEGINS_WITH", "Value": {"N": "1"}},
            INVALID + "ComparisonOperator BEGINS_WITH is not valid for N AttributeValue type",
        ),
        (
            {"ComparisonOperator": "CONTAINS", "Value": {"L": []}},
            INVALID + "ComparisonOperator CONTAINS is not valid for L AttributeValue type",
        ),
        (
            {"ComparisonOperator": "IN", "AttributeValueList": [{"S": "x"}, {"N": "1"}]},
            INVALID + "AttributeValues inside AttributeValueList must be of same type",
        ),
        (
            {"ComparisonOperator": "BETWEEN", "AttributeValueList": [{"N": "9"}, {"N": "1"}]},
            "The BETWEEN condition was provided a range where the lower bound is greater than "
            "the upper bound",
        ),
        (
            {"ComparisonOperator": "LIKE", "Value": {"S": "x"}},
            "1 validation error detected: Value 'LIKE' at 'expected.a.member.comparisonOperator' "
            "failed to satisfy constraint: Member must satisfy enum value set: [IN, NULL, "
            "BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, CONTAINS]",
        ),
    ],
)
def test_expected_errors(eng: Engine, entry: dict[str, Any], message: str) -> None:
    assert validation_message(eng, "PutItem", {"Item": ITEM, "Expected": {"a": entry}}) == message


def test_expected_invalid_value_is_refused(eng: Engine) -> None:
    message = validation_message(
        eng, "PutItem", {"Item": ITEM, "Expected": {"a": {"Value": {"N": "x"}}}}
    )
    assert message.startswith("The parameter cannot be converted to a numeric value")


@pytest.mark.parametrize("operation", ["PutItem", "DeleteItem", "UpdateItem"])
def test_conditional_operator_needs_two_conditions(eng: Engine, operation: str) -> None:
    base: dict[str, Any] = (
        {"Item": ITEM} if operation == "PutItem" else {"Key": {"pk": ITEM["pk"], "sk": ITEM["sk"]}}
    )
    assert (
        validation_message(eng, operation, {**base, "ConditionalOperator": "AND"})
        == "ConditionalOperator cannot be used without Filter or Expected"
    )
    assert (
        validation_message(
            eng,
            operation,
            {**base, "ConditionalOperator": "OR", "Expected": {"s": {"Exists": False}}},
        )
        == "ConditionalOperator can only be used when Filter or Expected has two or more elements"
    )


# --- mixing legacy and expression parameters -------------------------------------------------

MIXING = "Can not use both expression and non-expression parameters in the same request: "


def test_mixing_lists_parameters_in_dynamodb_order(eng: Engine) -> None:
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    message = validation_message(
        eng,
        "UpdateItem",
        {
            "Key": key,
            "AttributeUpdates": {"a": {"Value": {"S": "v"}, "Action": "PUT"}},
            "Expected": {"a": cond("EQ", {"S": "x"})},
            "ConditionalOperator": "AND",
            "UpdateExpression": "SET a = :v",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": {":v": {"S": "x"}},
        },
    )
    assert message == (
        MIXING + "Non-expression parameters: {AttributeUpdates, Expected, ConditionalOperator} "
        "Expression parameters: {UpdateExpression, ConditionExpression}"
    )
    message = validation_message(
        eng,
        "Query",
        {
            "KeyConditions": {"pk": cond("EQ", {"S": "p"})},
            "QueryFilter": {"a": cond("EQ", {"S": "x"})},
            "ConditionalOperator": "AND",
            "KeyConditionExpression": "pk = :p",
            "FilterExpression": "a = :v",
            "ProjectionExpression": "b",
            "ExpressionAttributeValues": {":p": {"S": "p"}, ":v": {"S": "x"}},
        },
    )
    assert message == (
        MIXING + "Non-expression parameters: {QueryFilter, ConditionalOperator, KeyConditions} "
        "Expression parameters: {ProjectionExpression, FilterExpression, KeyConditionExpression}"
    )
    message = validation_message(
        eng,
        "Scan",
        {
            "AttributesToGet": ["a"],
            "FilterExpression": "a = :v",
            "ExpressionAttributeValues": {":v": {"S": "x"}},
        },
    )
    assert (
        message
        == MIXING
        + "Non-expression parameters: {AttributesToGet} Expression parameters: {FilterExpression}"
    )
    message = validation_message(
        eng,
        "GetItem",
        {
            "Key": {"pk": ITEM["pk"], "sk": ITEM["sk"]},
            "AttributesToGet": ["a"],
            "ProjectionExpression": "a",
        },
    )
    assert (
        message
        == MIXING
        + "Non-expression parameters: {AttributesToGet} Expression parameters: {ProjectionExpression}"
    )


def test_key_conditions_combine_with_filter_and_projection_expressions(eng: Engine) -> None:
    eng.execute(
        "PutItem",
        {"TableName": TABLE, "Item": {"pk": {"S": "p"}, "sk": {"N": "2"}, "n": {"N": "1"}}},
    )
    result = eng.execute(
        "Query",
        {
            "TableName": TABLE,
            "KeyConditions": {"pk": cond("EQ", {"S": "p"})},
            "FilterExpression": "n > :v",
            "ProjectionExpression": "sk, n",
            "ExpressionAttributeValues": {":v": {"N": "2"}},
        },
    )
    assert result["Items"] == [{"sk": {"N": "1"}, "n": {"N": "5"}}]
    assert (result["Count"], result["ScannedCount"]) == (1, 2)


def test_transactions_refuse_legacy_parameters(eng: Engine) -> None:
    message = validation_message(
        eng,
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": TABLE, "Item": ITEM, "Expected": {"s": {"Exists": False}}}}
            ]
        },
    )
    assert "Expected" in message
    assert (
        eng.execute("GetItem", {"TableName": TABLE, "Key": {"pk": ITEM["pk"], "sk": ITEM["sk"]}})[
            "Item"
        ]
        == ITEM
    )


# --- AttributeUpdates ------------------------------------------------------------------------

KEY = {"pk": ITEM["pk"], "sk": ITEM["sk"]}


def update(engine: Engine, updates: dict[str, Any], **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = engine.execute(
        "UpdateItem",
        {
            "TableName": TABLE,
            "Key": KEY,
            "AttributeUpdates": updates,
            "ReturnValues": "ALL_NEW",
            **params,
        },
    )["Attributes"]
    return result


def twin_update(
    engine: Engine, expression: str, values: dict[str, Any] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "TableName": TABLE,
        "Key": KEY,
        "UpdateExpression": expression,
        "ReturnValues": "ALL_NEW",
    }
    if values:
        params["ExpressionAttributeValues"] = values
    result: dict[str, Any] = engine.execute("UpdateItem", params)["Attributes"]
    return result


@pytest.mark.parametrize(
    ("updates", "expression", "values", "changed"),
    [
        (
            {"s": {"Action": "PUT", "Value": {"S": "new"}}},
            "SET s = :v",
            {":v": {"S": "new"}},
            {"s": {"S": "new"}},
        ),
        (
            {"fresh": {"Value": {"N": "1"}}},
            "SET fresh = :v",
            {":v": {"N": "1"}},
            {"fresh": {"N": "1"}},
        ),
        ({"s": {"Action": "DELETE"}}, "REMOVE s", None, {"s": None}),
        ({"gone": {"Action": "DELETE"}}, "REMOVE gone", None, {}),
        (
            {"ss": {"Action": "DELETE", "Value": {"SS": ["x"]}}},
            "DELETE ss :v",
            {":v": {"SS": ["x"]}},
            {"ss": {"SS": ["y"]}},
        ),
        (
            {"ss": {"Action": "DELETE", "Value": {"SS": ["x", "y"]}}},
            "DELETE ss :v",
            {":v": {"SS": ["x", "y"]}},
            {"ss": None},
        ),
        (
            {"n": {"Action": "ADD", "Value": {"N": "-7"}}},
            "ADD n :v",
            {":v": {"N": "-7"}},
            {"n": {"N": "-2"}},
        ),
        (
            {"count": {"Action": "ADD", "Value": {"N": "3"}}},
            "ADD #c :v",
            {":v": {"N": "3"}},
            {"count": {"N": "3"}},
        ),
        (
            {"ns": {"Action": "ADD", "Value": {"NS": ["2", "3"]}}},
            "ADD ns :v",
            {":v": {"NS": ["2", "3"]}},
            {"ns": {"NS": ["1", "2", "3"]}},
        ),
        (
            {"l": {"Action": "ADD", "Value": {"L": [{"S": "q"}]}}},
            "SET l = list_append(l, :v)",
            {":v": {"L": [{"S": "q"}]}},
            {"l": {"L": [{"S": "x"}, {"N": "3"}, {"S": "q"}]}},
        ),
        (
            {"nl": {"Action": "ADD", "Value": {"L": [{"S": "q"}]}}},
            "SET nl = :v",
            {":v": {"L": [{"S": "q"}]}},
            {"nl": {"L": [{"S": "q"}]}},
        ),
    ],
)
def test_attribute_updates_match_update_expression(
    eng: Engine,
    updates: dict[str, Any],
    expression: str,
    values: dict[str, Any] | None,
    changed: dict[str, Any],
) -> None:
    expected = {k: v for k, v in ITEM.items() if changed.get(k, v) is not None}
    expected.update({k: v for k, v in changed.items() if v is not None})
    legacy = update(eng, updates)
    assert _sets_sorted(legacy) == _sets_sorted(expected)
    eng.execute("PutItem", {"TableName": TABLE, "Item": ITEM})
    if "#c" in expression:
        got = eng.execute(
            "UpdateItem",
            {
                "TableName": TABLE,
                "Key": KEY,
                "UpdateExpression": expression,
                "ExpressionAttributeNames": {"#c": "count"},
                "ExpressionAttributeValues": values,
                "ReturnValues": "ALL_NEW",
            },
        )["Attributes"]
    else:
        got = twin_update(eng, expression, values)
    assert _sets_sorted(got) == _sets_sorted(legacy)


def _sets_sorted(item: dict[str, Any]) -> dict[str, Any]:
    return {
        k: ({t: sorted(v)} if (t := next(iter(x))) in ("SS", "NS", "BS") and (v := x[t]) else x)
        for k, x in item.items()
    }


def test_attribute_updates_create_the_item(eng: Engine) -> None:
    key = {"pk": {"S": "brand-new"}, "sk": {"N": "7"}}
    eng.execute(
        "UpdateItem",
        {
            "TableName": TABLE,
            "Key": key,
            "AttributeUpdates": {
                "c": {"Action": "ADD", "Value": {"N": "1"}},
                "d": {"Action": "DELETE"},
            },
        },
    )
    assert eng.execute("GetItem", {"TableName": TABLE, "Key": key})["Item"] == {
        **key,
        "c": {"N": "1"},
    }


def test_attribute_updates_return_values_updated(eng: Engine) -> None:
    result = eng.execute(
        "UpdateItem",
        {
            "TableName": TABLE,
            "Key": KEY,
            "AttributeUpdates": {
                "n": {"Action": "ADD", "Value": {"N": "1"}},
                "s": {"Action": "DELETE"},
            },
            "ReturnValues": "UPDATED_OLD",
        },
    )
    assert result["Attributes"] == {"n": {"N": "5"}, "s": {"S": "hello"}}
    result = eng.execute(
        "UpdateItem",
        {
            "TableName": TABLE,
            "Key": KEY,
            "AttributeUpdates": {"n": {"Action": "ADD", "Value": {"N": "1"}}},
            "ReturnValues": "UPDATED_NEW",
        },
    )
    assert result["Attributes"] == {"n": {"N": "7"}}


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        (
            {"a": {"Action": "PUT"}},
            INVALID + "Only DELETE action is allowed when no attribute value is specified",
        ),
        (
            {"a": {"Action": "ADD"}},
            INVALID + "Only DELETE action is allowed when no attribute value is specified",
        ),
        (
            {"a": {"Action": "DELETE", "Value": {"S": "x"}}},
            INVALID + "DELETE action with value is not supported for the type S",
        ),
        (
            {"a": {"Action": "ADD", "Value": {"S": "x"}}},
            INVALID + "ADD action is not supported for the type S",
        ),
        (
            {"a": {"Action": "ADD", "Value": {"M": {}}}},
            INVALID + "ADD action is not supported for the type M",
        ),
        (
            {"pk": {"Action": "PUT", "Value": {"S": "x"}}},
            INVALID + "Cannot update attribute pk. This attribute is part of the key",
        ),
        (
            {"sk": {"Action": "DELETE"}},
            INVALID + "Cannot update attribute sk. This attribute is part of the key",
        ),
        (
            {"a": {"Action": "APPEND", "Value": {"S": "x"}}},
            "1 validation error detected: Value 'APPEND' at 'attributeUpdates.a.member.action' "
            "failed to satisfy constraint: Member must satisfy enum value set: [ADD, PUT, DELETE]",
        ),
    ],
)
def test_attribute_updates_errors(eng: Engine, updates: dict[str, Any], message: str) -> None:
    assert (
        validation_message(eng, "UpdateItem", {"Key": KEY, "AttributeUpdates": updates}) == message
    )
    assert eng.execute("GetItem", {"TableName": TABLE, "Key": KEY})["Item"] == ITEM


@pytest.mark.parametrize(
    ("attribute", "action", "value"),
    [
        ("s", "ADD", {"N": "1"}),  # a number added to a string
        (
            "ss",
            "ADD",
            {"NS": ["2"]},
        ),  # "should return ValidationException if trying to add NS to SS"
        ("ss", "DELETE", {"NS": ["1"]}),  # "... trying to delete NS from SS"
        ("n", "DELETE", {"NS": ["1"]}),  # "... trying to delete NS from N"
        ("ns", "ADD", {"N": "2"}),  # "... trying to add N to NS"
        ("s", "ADD", {"L": [{"S": "x"}]}),  # a list appended to a string
    ],
)
def test_attribute_updates_type_clash_is_refused(
    eng: Engine, attribute: str, action: str, value: dict[str, Any]
) -> None:
    """A legacy ADD or DELETE on an attribute of another type is ``Type mismatch for attribute
    to update`` (not the UpdateExpression's "An operand ... has an incorrect data type"):
    dynalite's test/updateItem.js, run against DynamoDB (the quoted cases)."""
    updates = {attribute: {"Action": action, "Value": value}}
    message = validation_message(eng, "UpdateItem", {"Key": KEY, "AttributeUpdates": updates})
    assert message == "Type mismatch for attribute to update"
    assert eng.execute("GetItem", {"TableName": TABLE, "Key": KEY})["Item"] == ITEM


def test_attribute_updates_with_no_action_create_the_item(eng: Engine) -> None:
    """An UpdateItem with nothing to do on a missing item creates it with its key alone
    (dynalite's test/updateItem.js, "should just add item with key if no action", run against
    DynamoDB; the API reference: UpdateItem "adds a new item to the table if it does not
    already exist"); one that only deletes attributes creates nothing."""
    for updates in ({}, None):
        key = {"pk": {"S": f"fresh-{updates is None}"}, "sk": {"N": "1"}}
        request: dict[str, Any] = {"TableName": TABLE, "Key": key}
        if updates is not None:
            request["AttributeUpdates"] = updates
        assert eng.execute("UpdateItem", {**request, "ReturnValues": "ALL_NEW"}) == {
            "Attributes": key
        }
        assert eng.execute("GetItem", {"TableName": TABLE, "Key": key})["Item"] == key
    gone = {"pk": {"S": "only-deleted"}, "sk": {"N": "1"}}
    eng.execute(
        "UpdateItem",
        {"TableName": TABLE, "Key": gone, "AttributeUpdates": {"a": {"Action": "DELETE"}}},
    )
    assert "Item" not in eng.execute("GetItem", {"TableName": TABLE, "Key": gone})


# --- AttributesToGet -------------------------------------------------------------------------


def test_get_item_attributes_to_get(eng: Engine) -> None:
    eng.execute(
        "PutItem", {"TableName": TABLE, "Item": {**ITEM, "sk": {"N": "2"}, "a.b": {"S": "dotted"}}}
    )
    got = eng.execute(
        "GetItem", {"TableName": TABLE, "Key": KEY, "AttributesToGet": ["s", "m", "gone"]}
    )
    assert got["Item"] == {"s": ITEM["s"], "m": ITEM["m"]}
    twin = eng.execute(
        "GetItem", {"TableName": TABLE, "Key": KEY, "ProjectionExpression": "s, m, gone"}
    )
    assert got == twin
    # A dot is part of the attribute name, never a document path.
    dotted = eng.execute(
        "GetItem",
        {
            "TableName": TABLE,
            "Key": {"pk": ITEM["pk"], "sk": {"N": "2"}},
            "AttributesToGet": ["a.b", "m.k"],
        },
    )
    assert dotted["Item"] == {"a.b": {"S": "dotted"}}


@pytest.mark.parametrize("operation", ["GetItem", "Query", "Scan", "BatchGetItem"])
def test_attributes_to_get_duplicates(eng: Engine, operation: str) -> None:
    names = ["s", "n", "s"]
    params: dict[str, Any]
    if operation == "GetItem":
        params = {"Key": KEY, "AttributesToGet": names}
    elif operation == "Query":
        params = {"KeyConditions": {"pk": cond("EQ", {"S": "p"})}, "AttributesToGet": names}
    elif operation == "Scan":
        params = {"AttributesToGet": names}
    else:
        with pytest.raises(DynamoDBError) as info:
            eng.execute(
                "BatchGetItem", {"RequestItems": {TABLE: {"Keys": [KEY], "AttributesToGet": names}}}
            )
        assert info.value.message == INVALID + "Duplicate value in attribute name: s"
        return
    assert (
        validation_message(eng, operation, params)
        == INVALID + "Duplicate value in attribute name: s"
    )


def test_batch_get_item_attributes_to_get(eng: Engine) -> None:
    got = eng.execute(
        "BatchGetItem", {"RequestItems": {TABLE: {"Keys": [KEY], "AttributesToGet": ["n", "t"]}}}
    )
    assert got["Responses"][TABLE] == [{"n": ITEM["n"], "t": ITEM["t"]}]


def test_attributes_to_get_with_select(eng: Engine) -> None:
    keys = {"pk": cond("EQ", {"S": "p"})}
    got = eng.execute(
        "Query",
        {
            "TableName": TABLE,
            "KeyConditions": keys,
            "AttributesToGet": ["n"],
            "Select": "SPECIFIC_ATTRIBUTES",
        },
    )
    assert got["Items"] == [{"n": ITEM["n"]}]
    assert (
        validation_message(eng, "Scan", {"AttributesToGet": ["n"], "Select": "COUNT"})
        == "Cannot specify the AttributesToGet when choosing to get only the Count"
    )
    assert (
        validation_message(eng, "Scan", {"AttributesToGet": ["n"], "Select": "ALL_ATTRIBUTES"})
        == "Cannot specify the AttributesToGet when choosing to get ALL_ATTRIBUTES"
    )


# --- KeyConditions ---------------------------------------------------------------------------


@pytest.fixture
def rows(engine: Engine) -> Engine:
    create(engine)
    for sk in range(1, 8):
        engine.execute(
            "PutItem",
            {
                "TableName": TABLE,
                "Item": {"pk": {"S": "p"}, "sk": {"N": str(sk)}, "v": {"N": str(sk % 3)}},
            },
        )
    engine.execute(
        "PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "other"}, "sk": {"N": "1"}}}
    )
    return engine


@pytest.mark.parametrize(
    ("sort", "expression", "values", "expected"),
    [
        (None, "", {}, [1, 2, 3, 4, 5, 6, 7]),
        (cond("EQ", {"N": "3"}), "sk = :s0", {":s0": {"N": "3"}}, [3]),
        (cond("LT", {"N": "3"}), "sk < :s0", {":s0": {"N": "3"}}, [1, 2]),
        (cond("LE", {"N": "3"}), "sk <= :s0", {":s0": {"N": "3"}}, [1, 2, 3]),
        (cond("GT", {"N": "5"}), "sk > :s0", {":s0": {"N": "5"}}, [6, 7]),
        (cond("GE", {"N": "5"}), "sk >= :s0", {":s0": {"N": "5"}}, [5, 6, 7]),
        (
            cond("BETWEEN", {"N": "2"}, {"N": "4"}),
            "sk BETWEEN :s0 AND :s1",
            {":s0": {"N": "2"}, ":s1": {"N": "4"}},
            [2, 3, 4],
        ),
    ],
)
@pytest.mark.parametrize("forward", [True, False])
def test_key_conditions_match_key_condition_expression(
    rows: Engine,
    sort: dict[str, Any] | None,
    expression: str,
    values: dict[str, Any],
    expected: list[int],
    forward: bool,
) -> None:
    conditions: dict[str, Any] = {"pk": cond("EQ", {"S": "p"})}
    if sort is not None:
        conditions["sk"] = sort
    legacy = rows.execute(
        "Query",
        {"TableName": TABLE, "KeyConditions": conditions, "ScanIndexForward": forward, "Limit": 2},
    )
    key_expression = "pk = :p" + (f" AND {expression}" if expression else "")
    twin = rows.execute(
        "Query",
        {
            "TableName": TABLE,
            "KeyConditionExpression": key_expression,
            "ExpressionAttributeValues": {":p": {"S": "p"}, **values},
            "ScanIndexForward": forward,
            "Limit": 2,
        },
    )
    assert legacy == twin
    # Page through the legacy query: LastEvaluatedKey works with KeyConditions too.
    seen: list[int] = []
    start: dict[str, Any] | None = None
    while True:
        page_params: dict[str, Any] = {
            "TableName": TABLE,
            "KeyConditions": conditions,
            "ScanIndexForward": forward,
            "Limit": 2,
        }
        if start:
            page_params["ExclusiveStartKey"] = start
        page = rows.execute("Query", page_params)
        seen += [int(item["sk"]["N"]) for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    assert seen == (expected if forward else expected[::-1])


def test_key_conditions_begins_with(engine: Engine) -> None:
    engine.execute(
        "CreateTable",
        {
            "TableName": TABLE,
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    for sk in ("ab", "abc", "b", "a"):
        engine.execute("PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "p"}, "sk": {"S": sk}}})
    got = engine.execute(
        "Query",
        {
            "TableName": TABLE,
            "KeyConditions": {"pk": cond("EQ", {"S": "p"}), "sk": cond("BEGINS_WITH", {"S": "ab"})},
        },
    )
    assert [i["sk"]["S"] for i in got["Items"]] == ["ab", "abc"]


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ({}, "Conditions can be of length 1 or 2 only"),
        (
            {
                "pk": cond("EQ", {"S": "p"}),
                "sk": cond("EQ", {"N": "1"}),
                "v": cond("EQ", {"N": "1"}),
            },
            "Conditions can be of length 1 or 2 only",
        ),
        ({"sk": cond("EQ", {"N": "1"})}, "Query condition missed key schema element: pk"),
        (
            {"pk": cond("EQ", {"S": "p"}), "v": cond("EQ", {"N": "1"})},
            "Query condition missed key schema element: sk",
        ),
        ({"pk": cond("GT", {"S": "p"})}, "Query key condition not supported"),
        (
            {"pk": cond("EQ", {"S": "p"}), "sk": cond("NE", {"N": "1"})},
            "Attempted conditional constraint is not an indexable operation",
        ),
        (
            {"pk": cond("EQ", {"S": "p"}), "sk": cond("NOT_NULL")},
            "Attempted conditional constraint is not an indexable operation",
        ),
        (
            {"pk": cond("EQ")},
            INVALID + "Invalid number of argument(s) for the EQ ComparisonOperator",
        ),
        (
            {"pk": cond("EQ", {"S": "p"}), "sk": cond("BETWEEN", {"N": "1"})},
            INVALID + "Invalid number of argument(s) for the BETWEEN ComparisonOperator",
        ),
        (
            {"pk": cond("EQ", {"S": "p"}), "sk": cond("BETWEEN", {"N": "5"}, {"N": "1"})},
            "The BETWEEN condition was provided a range where the lower bound is greater than the "
            "upper bound",
        ),
        (
            {"pk": cond("EQ", {"N": "1"})},
            INVALID + "Condition parameter type does not match schema type",
        ),
        (
            {"pk": {"AttributeValueList": [{"S": "p"}]}},
            "1 validation error detected: Value null at 'keyConditions.pk.member.comparisonOperator' "
            "failed to satisfy constraint: Member must not be null",
        ),
    ],
)
def test_key_conditions_errors(rows: Engine, conditions: dict[str, Any], message: str) -> None:
    assert validation_message(rows, "Query", {"KeyConditions": conditions}) == message


# --- QueryFilter -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query_filter", "operator", "expression", "values"),
    [
        ({"v": cond("EQ", {"N": "1"})}, None, "v = :f0", {":f0": {"N": "1"}}),
        ({"v": cond("NE", {"N": "1"})}, None, "v <> :f0", {":f0": {"N": "1"}}),
        (
            {"v": cond("EQ", {"N": "1"}), "w": cond("NULL")},
            "AND",
            "v = :f0 AND attribute_not_exists(w)",
            {":f0": {"N": "1"}},
        ),
        (
            {"v": cond("EQ", {"N": "0"}), "w": cond("NOT_NULL")},
            "OR",
            "v = :f0 OR attribute_exists(w)",
            {":f0": {"N": "0"}},
        ),
        (
            {"v": cond("IN", {"N": "0"}, {"N": "2"})},
            None,
            "v IN (:f0, :f1)",
            {":f0": {"N": "0"}, ":f1": {"N": "2"}},
        ),
    ],
)
def test_query_filter_matches_filter_expression(
    rows: Engine,
    query_filter: dict[str, Any],
    operator: str | None,
    expression: str,
    values: dict[str, Any],
) -> None:
    params: dict[str, Any] = {
        "TableName": TABLE,
        "KeyConditions": {"pk": cond("EQ", {"S": "p"}), "sk": cond("LE", {"N": "6"})},
        "QueryFilter": query_filter,
        "Limit": 5,
    }
    if operator:
        params["ConditionalOperator"] = operator
    legacy = rows.execute("Query", params)
    twin = rows.execute(
        "Query",
        {
            "TableName": TABLE,
            "KeyConditionExpression": "pk = :p AND sk <= :s",
            "FilterExpression": expression,
            "ExpressionAttributeValues": {":p": {"S": "p"}, ":s": {"N": "6"}, **values},
            "Limit": 5,
        },
    )
    assert legacy == twin
    assert legacy["ScannedCount"] == 5
    assert legacy["Count"] < 5 or operator == "OR"


def test_query_filter_errors(rows: Engine) -> None:
    keys = {"pk": cond("EQ", {"S": "p"})}
    assert (
        validation_message(rows, "Query", {"KeyConditions": keys, "ConditionalOperator": "AND"})
        == "ConditionalOperator cannot be used without Filter or Expected"
    )
    assert (
        validation_message(
            rows,
            "Query",
            {
                "KeyConditions": keys,
                "ConditionalOperator": "OR",
                "QueryFilter": {"v": cond("NULL")},
            },
        )
        == "ConditionalOperator can only be used when Filter or Expected has two or more elements"
    )
    assert (
        validation_message(
            rows, "Query", {"KeyConditions": keys, "QueryFilter": {"v": cond("GT", {"BOOL": True})}}
        )
        == INVALID + "ComparisonOperator GT is not valid for BOOL AttributeValue type"
    )
    assert (
        validation_message(rows, "Scan", {"ScanFilter": {"v": {"ComparisonOperator": "EQ"}}})
        == INVALID + "Invalid number of argument(s) for the EQ ComparisonOperator"
    )
    assert validation_message(rows, "Scan", {"ScanFilter": {"v": {}}}) == (
        "1 validation error detected: Value null at 'scanFilter.v.member.comparisonOperator' "
        "failed to satisfy constraint: Member must not be null"
    )


def test_query_filter_on_key_attribute_is_refused(rows: Engine) -> None:
    message = validation_message(
        rows,
        "Query",
        {
            "KeyConditions": {"pk": cond("EQ", {"S": "p"})},
            "QueryFilter": {"sk": cond("GT", {"N": "1"})},
        },
    )
    assert message == (
        "QueryFilter can only contain non-primary key attributes: Primary key attribute: sk"
    )


def test_scan_filter_may_name_key_attributes(rows: Engine) -> None:
    got = rows.execute(
        "Scan", {"TableName": TABLE, "ScanFilter": {"pk": cond("EQ", {"S": "other"})}}
    )
    assert got["Items"] == [{"pk": {"S": "other"}, "sk": {"N": "1"}}]
    assert got["ScannedCount"] == 8


# --- through boto3 (in-process and over HTTP) ------------------------------------------------


def test_boto3_legacy_round_trip(ddb: Any, table_name: str) -> None:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    key = {"pk": {"S": "p"}, "sk": {"N": "1"}}
    ddb.put_item(
        TableName=table_name,
        Item={**key, "b": {"B": b"\x00\x01"}},
        Expected={"pk": {"Exists": False}},
    )
    with pytest.raises(ClientError) as info:
        ddb.put_item(TableName=table_name, Item=key, Expected={"pk": {"Exists": False}})
    assert info.value.response["Error"]["Code"] == "ConditionalCheckFailedException"

    attributes = ddb.update_item(
        TableName=table_name,
        Key=key,
        AttributeUpdates={
            "n": {"Action": "ADD", "Value": {"N": "2"}},
            "tags": {"Action": "ADD", "Value": {"SS": ["a", "b"]}},
        },
        Expected={
            "b": {"ComparisonOperator": "BEGINS_WITH", "AttributeValueList": [{"B": b"\x00"}]}
        },
        ReturnValues="UPDATED_NEW",
    )["Attributes"]
    assert attributes["n"] == {"N": "2"}
    assert sorted(attributes["tags"]["SS"]) == ["a", "b"]

    ddb.put_item(TableName=table_name, Item={"pk": {"S": "p"}, "sk": {"N": "2"}, "n": {"N": "9"}})
    result = ddb.query(
        TableName=table_name,
        KeyConditions={
            "pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "p"}]},
            "sk": {"ComparisonOperator": "BETWEEN", "AttributeValueList": [{"N": "1"}, {"N": "5"}]},
        },
        QueryFilter={"n": {"ComparisonOperator": "LT", "AttributeValueList": [{"N": "5"}]}},
        AttributesToGet=["sk", "b"],
    )
    assert result["Items"] == [{"sk": {"N": "1"}, "b": {"B": b"\x00\x01"}}]
    assert (result["Count"], result["ScannedCount"]) == (1, 2)

    scanned = ddb.scan(
        TableName=table_name,
        ScanFilter={
            "tags": {"ComparisonOperator": "CONTAINS", "AttributeValueList": [{"S": "a"}]},
            "n": {"ComparisonOperator": "GT", "AttributeValueList": [{"N": "5"}]},
        },
        ConditionalOperator="OR",
        AttributesToGet=["sk"],
    )
    assert sorted(i["sk"]["N"] for i in scanned["Items"]) == ["1", "2"]

    got = ddb.get_item(TableName=table_name, Key=key, AttributesToGet=["n"])
    assert got["Item"] == {"n": {"N": "2"}}

    with pytest.raises(ClientError) as info:
        ddb.put_item(TableName=table_name, Item=key, Expected={"a": {"Exists": True}})
    error_body = info.value.response["Error"]
    assert error_body["Code"] == "ValidationException"
    assert (
        error_body["Message"]
        == INVALID + "Value must be provided when Exists is true for Attribute: a"
    )

    with pytest.raises(ClientError) as info:
        ddb.update_item(
            TableName=table_name, Key=key, AttributeUpdates={"pk": {"Action": "DELETE"}}
        )
    assert info.value.response["Error"]["Message"] == (
        INVALID + "Cannot update attribute pk. This attribute is part of the key"
    )
