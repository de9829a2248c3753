"""The PutItem hot path's fast paths agree with the general code they shortcut."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Context, Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firstwrite.engine.api import Engine
from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.expressions import compile_expressions
from firstwrite.engine.operations.items import _PUT
from firstwrite.engine.validation import check
from firstwrite.engine.values import (
    format_number,
    item_size,
    normalize_number,
    parse_item,
    parse_item_sized,
    parse_number,
    value_size,
)


def _reference_number_size(text: str) -> int:
    """DynamoDB's number size, computed the general way (Decimal) as a reference."""
    value = Decimal(text)
    if not value:
        return 1
    sign, digits, _ = value.normalize(Context(prec=50)).as_tuple()
    count = len(digits)
    even_bonus = 1 if (count % 2 == 0 and value.adjusted() % 2 == 0) else 0
    return 1 + (count + 1) // 2 + even_bonus + (1 if sign else 0)


integer_texts = st.builds(
    lambda sign, zeros, digits, tail: sign + zeros + digits + tail,
    st.sampled_from(["", "-", "+"]),
    st.sampled_from(["", "0", "00"]),
    st.from_regex(r"[0-9]{1,40}", fullmatch=True),
    st.sampled_from(["", "0", "000", ".0", "e2"]),
)


@given(integer_texts)
def test_integer_fast_path_normalises_like_decimal(text: str) -> None:
    try:
        expected = format_number(parse_number(text))
    except DynamoDBError as error:
        with pytest.raises(DynamoDBError) as caught:
            normalize_number(text)
        assert caught.value.message == error.message
        return
    assert normalize_number(text) == expected
    assert value_size({"N": expected}) == _reference_number_size(expected)


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.one_of(
            st.builds(lambda s: {"S": s}, st.text(max_size=10)),
            st.builds(lambda n: {"N": n}, integer_texts),
            st.builds(lambda n: {"N": str(n)}, st.decimals(allow_nan=False, places=3)),
            st.builds(lambda b: {"B": b}, st.binary(max_size=5)),
            st.just({"BOOL": True}),
            st.builds(lambda ss: {"SS": ss}, st.lists(st.text(), min_size=1, unique=True)),
        ),
        max_size=4,
    )
)
def test_one_walk_size_equals_item_size(raw: dict[str, dict[str, object]]) -> None:
    try:
        parsed = parse_item(raw)
    except DynamoDBError as error:
        with pytest.raises(DynamoDBError) as caught:
            parse_item_sized(raw)
        assert caught.value.message == error.message
        return
    item, size = parse_item_sized(raw)
    assert item == parsed
    assert size == item_size(parsed)
    assert all(value_size(v) >= 1 for v in parsed.values() if "N" in v)


def test_non_ascii_strings_count_utf8_bytes() -> None:
    item, size = parse_item_sized({"é": {"S": "日本"}})
    assert item == {"é": {"S": "日本"}}
    assert size == 2 + 6


def test_cached_compilation_lists_unused_values_in_each_request_order() -> None:
    condition = "attribute_exists(pk)"
    values = {":a": {"S": "x"}, ":b": {"N": "1"}}
    for order in (values, dict(reversed(list(values.items()))), values):
        with pytest.raises(DynamoDBError) as caught:
            compile_expressions(condition=condition, values=order)
        keys = ", ".join(order)
        assert caught.value.message == (
            f"Value provided in ExpressionAttributeValues unused in expressions: keys: {{{keys}}}"
        )


def test_cached_compilation_binds_each_request_values() -> None:
    condition = "n = :v"
    first = compile_expressions(condition=condition, values={":v": {"N": "1"}})
    second = compile_expressions(condition=condition, values={":v": {"N": "2"}})
    assert first.condition is not None and second.condition is not None
    assert first.condition.values == {":v": {"N": "1"}}
    assert second.condition.values == {":v": {"N": "2"}}


def test_cached_compilation_keeps_error_order_across_expressions() -> None:
    # The update's value check fails before the condition's syntax error, cached or not.
    for _ in range(2):
        with pytest.raises(DynamoDBError) as caught:
            compile_expressions(
                update="SET a = :v + :v", condition="a = = b", values={":v": {"S": "x"}}
            )
        assert "Invalid UpdateExpression" in caught.value.message


def test_validation_fast_path_still_reports_every_problem() -> None:
    good = {"TableName": "bench", "Item": {"pk": {"S": "a"}}}
    for _ in range(2):
        check(good, _PUT)
        with pytest.raises(DynamoDBError) as caught:
            check({**good, "TableName": "x!", "ReturnValues": "ALL"}, _PUT)
        assert caught.value.message.startswith("3 validation errors detected")
        with pytest.raises(DynamoDBError) as caught:
            check({"Item": {}}, _PUT)
        assert "tableName" in caught.value.message


@pytest.fixture
def engine() -> Iterator[Engine]:
    with Engine() as engine:
        engine.execute(
            "CreateTable",
            {
                "TableName": "pairs",
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "N"},
                ],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )
        yield engine


def _put(engine: Engine, item: dict[str, Any], condition: str, **extra: Any) -> dict[str, Any]:
    request = {"TableName": "pairs", "Item": item, "ConditionExpression": condition, **extra}
    return engine.execute("PutItem", request)


@pytest.mark.parametrize("key", ["pk", "sk"])
def test_insert_if_absent_on_a_key_attribute(engine: Engine, key: str) -> None:
    first = {"pk": {"S": "a"}, "sk": {"N": "1"}, "v": {"S": "first"}}
    assert _put(engine, first, f"attribute_not_exists({key})") == {}
    # Another sort key under the same partition key is another item: absent, so stored.
    other = {"pk": {"S": "a"}, "sk": {"N": "2"}, "v": {"S": "other"}}
    assert _put(engine, other, f"attribute_not_exists({key})") == {}
    second = {**first, "v": {"S": "second"}}
    with pytest.raises(DynamoDBError) as caught:
        _put(engine, second, f"attribute_not_exists({key})")
    assert caught.value.code == "ConditionalCheckFailedException"
    assert "Item" not in caught.value.wire_body()
    with pytest.raises(DynamoDBError) as caught:
        _put(
            engine,
            second,
            f"attribute_not_exists({key})",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert caught.value.wire_body()["Item"] == first
    stored = engine.execute(
        "GetItem", {"TableName": "pairs", "Key": {"pk": {"S": "a"}, "sk": {"N": "1"}}}
    )
    assert stored["Item"] == first


def test_absent_non_key_attribute_is_evaluated_on_the_stored_item(engine: Engine) -> None:
    _put(engine, {"pk": {"S": "b"}, "sk": {"N": "1"}}, "attribute_not_exists(pk)")
    replaced = {"pk": {"S": "b"}, "sk": {"N": "1"}, "v": {"S": "new"}}
    response = _put(engine, replaced, "attribute_not_exists(v)", ReturnValues="ALL_OLD")
    assert response == {"Attributes": {"pk": {"S": "b"}, "sk": {"N": "1"}}}
    with pytest.raises(DynamoDBError):
        _put(engine, replaced, "attribute_not_exists(v)")


def test_insert_if_absent_reports_capacity_and_feeds_streams(engine: Engine) -> None:
    engine.execute(
        "UpdateTable",
        {
            "TableName": "pairs",
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        },
    )
    item = {"pk": {"S": "c"}, "sk": {"N": "1"}}
    response = _put(engine, item, "attribute_not_exists(pk)", ReturnConsumedCapacity="TOTAL")
    assert response["ConsumedCapacity"]["CapacityUnits"] == 1.0
    arn = engine.execute("DescribeTable", {"TableName": "pairs"})["Table"]["LatestStreamArn"]
    shard = engine.execute("DescribeStream", {"StreamArn": arn}, service="streams")
    shard_id = shard["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = engine.execute(
        "GetShardIterator",
        {"StreamArn": arn, "ShardId": shard_id, "ShardIteratorType": "TRIM_HORIZON"},
        service="streams",
    )["ShardIterator"]
    records = engine.execute("GetRecords", {"ShardIterator": iterator}, service="streams")
    assert [r["eventName"] for r in records["Records"]] == ["INSERT"]
    assert "OldImage" not in records["Records"][0]["dynamodb"]


# attribute_not_exists(<key>) OR ...: the idempotency claim's shape. An insert that lands needs
# no read; an item already there is judged by the whole condition.
CLAIM = "attribute_not_exists(pk) OR (#v < :limit)"
CLAIM_ARGS = {"ExpressionAttributeNames": {"#v": "v"}}


def _claim(engine: Engine, v: str, limit: str, condition: str = CLAIM, **extra: Any) -> Any:
    item = {"pk": {"S": "claim"}, "sk": {"N": "1"}, "v": {"N": v}}
    values = {":limit": {"N": limit}}
    return _put(engine, item, condition, ExpressionAttributeValues=values, **CLAIM_ARGS, **extra)


@pytest.mark.parametrize("stream", [False, True])
def test_absent_or_condition_inserts_then_judges_the_stored_item(
    engine: Engine, stream: bool
) -> None:
    if stream:  # a watched table: the same decisions inside a write transaction
        engine.execute(
            "UpdateTable",
            {
                "TableName": "pairs",
                "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
            },
        )
    assert _claim(engine, "1", "0", ReturnValues="ALL_OLD") == {}  # absent: stored
    # Present, v=1 < 5: the rest of the condition holds, the item is replaced.
    replaced = _claim(engine, "2", "5", ReturnValues="ALL_OLD")
    assert replaced["Attributes"]["v"] == {"N": "1"}
    # Present, v=2 < 0 is false: refused, with the stored item.
    for _ in range(3):  # again and again: the failed-condition hint must not change answers
        with pytest.raises(DynamoDBError) as caught:
            _claim(engine, "3", "0", ReturnValuesOnConditionCheckFailure="ALL_OLD")
        assert caught.value.code == "ConditionalCheckFailedException"
        assert caught.value.wire_body()["Item"]["v"] == {"N": "2"}
    assert _claim(engine, "4", "3", ReturnValues="ALL_OLD")["Attributes"]["v"] == {"N": "2"}
    key = {"pk": {"S": "claim"}, "sk": {"N": "1"}}
    stored = engine.execute("GetItem", {"TableName": "pairs", "Key": key})["Item"]
    assert stored["v"] == {"N": "4"}


def test_absent_or_on_a_non_key_attribute_never_skips_the_read(engine: Engine) -> None:
    _put(
        engine,
        {"pk": {"S": "claim"}, "sk": {"N": "1"}, "v": {"N": "9"}},
        "attribute_not_exists(pk)",
    )
    # v is stored and 9 < 0 is false: an insert-first path would be wrong to skip the read.
    with pytest.raises(DynamoDBError):
        _claim(engine, "1", "0", condition="attribute_not_exists(v) OR (#v < :limit)")


@pytest.mark.parametrize(
    ("text", "absent_or"),
    [
        ("attribute_not_exists(pk)", "pk"),
        ("attribute_not_exists(pk) OR a = :x", "pk"),
        ("a = :x OR attribute_not_exists(pk)", "pk"),
        ("(a = :x OR (attribute_not_exists(pk))) OR b = :x", "pk"),
        ("attribute_not_exists(pk) AND a = :x", None),
        ("NOT attribute_not_exists(pk) OR a = :x", None),
        ("attribute_not_exists(pk.x) OR a = :x", None),
    ],
)
def test_absent_or_is_found_only_where_absence_alone_decides(
    text: str, absent_or: str | None
) -> None:
    from firstwrite.engine.expressions.compiled import compile_expressions

    compiled = compile_expressions(
        condition=text, values={":x": {"S": "x"}} if ":x" in text else None
    )
    assert compiled.condition is not None
    assert compiled.condition.absent_or == absent_or
