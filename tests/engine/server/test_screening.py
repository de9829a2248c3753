"""Screening big bodies (issue 15, hole 3): whatever the worker decides, the answer is the one the
engine gives the body itself.

Each case is answered twice by one engine: through the screening verdict (as the server does
with a big body) and from the decoded body; the two answers must be equal, byte for byte, and a
stand-in request must never write. The worker's function runs in this process here (the worker
process itself is tests/engine/server/test_big_requests.py's).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from firstwrite.engine.api import Engine
from firstwrite.engine.server.reduction import LIGHT_VALUES
from firstwrite.engine.server.screening import Screener, Verdict, key_names, screen
from firstwrite.engine.wire import wire_call

TARGET = "DynamoDB_20120810."
BIG = 409_600
PAD = {"S": "x" * 390_000}


def _create(engine: Engine, name: str, *, sort: bool = False, index: bool = False) -> None:
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}]
    request: dict[str, Any] = {"TableName": name, "BillingMode": "PAY_PER_REQUEST"}
    if sort:
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
        definitions.append({"AttributeName": "sk", "AttributeType": "N"})
    if index:
        definitions.append({"AttributeName": "g", "AttributeType": "S"})
        request["GlobalSecondaryIndexes"] = [
            {
                "IndexName": "by_g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ]
    request.update(KeySchema=schema, AttributeDefinitions=definitions)
    engine.execute("CreateTable", request)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with Engine() as engine:
        _create(engine, "one")
        _create(engine, "two", sort=True)
        _create(engine, "idx", index=True)
        yield engine


def _count(engine: Engine) -> int:
    return sum(
        engine.execute("Scan", {"TableName": name, "Select": "COUNT"})["Count"]
        for name in ("one", "two", "idx")
    )


def both_ways(engine: Engine, operation: str, body: bytes) -> tuple[str, tuple[int, bytes]]:
    """The verdict's kind and the answer, after checking that it is the body's own answer."""
    target = TARGET + operation
    verdict = screen(body, target, key_names(engine))
    if verdict.kind == "decode":
        return verdict.kind, wire_call(engine, target, body)
    before = _count(engine)
    screened = wire_call(engine, target, body, decode=verdict.decode)
    assert _count(engine) == before, "a screened request wrote"
    full = wire_call(engine, target, body)
    assert screened == full, (verdict.kind, screened, full)
    assert full[0] == 400, full
    return verdict.kind, full


def _message(answer: tuple[int, bytes]) -> str:
    body = json.loads(answer[1])
    return str(body.get("message", body.get("Message", "")))


def tiny(count: int) -> dict[str, Any]:
    return {"L": [{"N": "1"}] * count}


def test_the_hole_3_body_is_answered_from_a_stand_in(engine: Engine) -> None:
    """Issue 15's body, smaller: one list of tiny numbers, an item far over 400 KB."""
    item = {"pk": {"S": "h"}, "l": tiny(140_000)}
    body = json.dumps({"TableName": "one", "Item": item}).encode()
    kind, answer = both_ways(engine, "PutItem", body)
    assert kind == "request"
    assert _message(answer) == "Item size has exceeded the maximum allowed size"
    # With a sort key the engine first finds it missing: the stand-in does too.
    body = json.dumps({"TableName": "two", "Item": item}).encode()
    kind, answer = both_ways(engine, "PutItem", body)
    assert (kind, _message(answer)) == (
        "request",
        "One or more parameter values were invalid: Missing the key sk in the item",
    )
    # So does a key of the wrong type.
    wrong = {**item, "pk": {"N": "1"}}
    body = json.dumps({"TableName": "one", "Item": wrong}).encode()
    kind, answer = both_ways(engine, "PutItem", body)
    assert (kind, _message(answer)) == (
        "request",
        "One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N",
    )
    # Without the table the item's size is reported (it is checked before the table is
    # looked for); only the engine knows there is no table: it answers the stand-in.
    body = json.dumps({"TableName": "nope", "Item": item}).encode()
    kind, answer = both_ways(engine, "PutItem", body)
    assert (kind, _message(answer)) == (
        "request",
        "Item size has exceeded the maximum allowed size",
    )


def test_many_top_level_attributes_keep_only_the_key_names(engine: Engine) -> None:
    item = {f"a{i}": {"N": "1"} for i in range(60_000)}
    item["pk"] = {"S": "k"}
    kind, answer = both_ways(
        engine, "PutItem", json.dumps({"TableName": "one", "Item": item}).encode()
    )
    assert (kind, _message(answer)) == (
        "request",
        "Item size has exceeded the maximum allowed size",
    )


def test_an_invalid_value_deep_in_a_big_item_is_found_by_the_worker(engine: Engine) -> None:
    values: list[Any] = [{"N": "1"}] * 50_000 + [{"M": {"x": {"L": [{"N": "1e999"}]}}}]
    item = {"pk": {"S": "k"}, "l": {"L": values}}
    kind, answer = both_ways(
        engine, "PutItem", json.dumps({"TableName": "one", "Item": item}).encode()
    )
    assert kind == "answer"
    assert "Number overflow" in _message(answer)


def test_a_body_that_is_not_json_or_not_an_object(engine: Engine) -> None:
    assert both_ways(engine, "PutItem", b"[" + b'{"N":"1"},' * 50_000 + b"x")[0] == "invalid"
    assert both_ways(engine, "PutItem", b"[" + b'{"N":"1"},' * 50_000 + b"1]")[0] == "answer"
    kind, answer = both_ways(engine, "NoSuchOperation", b'{"a":"' + b"x" * 300_000 + b'"}')
    assert kind == "answer" and b"UnknownOperationException" in answer[1]
    body = json.dumps({"TableName": "one", "Item": {"pk": {"S": "k"}, "l": tiny(1000)}}).encode()
    verdict = screen(body, None, key_names(engine))
    assert wire_call(engine, None, body) == wire_call(engine, None, body, decode=verdict.decode)


def test_valid_big_requests_are_decoded_by_the_server(engine: Engine) -> None:
    item = {"pk": {"S": "valid"}, "l": tiny(100_000)}
    kind, answer = both_ways(
        engine, "PutItem", json.dumps({"TableName": "one", "Item": item}).encode()
    )
    assert (kind, answer[0]) == ("decode", 200)
    got = engine.execute("GetItem", {"TableName": "one", "Key": {"pk": {"S": "valid"}}})
    assert len(got["Item"]["l"]["L"]) == 100_000


@pytest.mark.parametrize(
    "value",
    [
        [{"N": "1"}] * 50_000,  # a list where an AttributeValue belongs
        {"S": [{"N": "1"}] * 50_000},
        {"L": {f"k{i}": 1 for i in range(50_000)}},
        {"NS": [str(i) for i in range(50_000)] + ["x"]},
        {"L": [{"N": "1"}] * 50_000, "S": "two types"},
    ],
)
def test_a_huge_invalid_value_is_answered_by_the_worker(engine: Engine, value: Any) -> None:
    item = {"pk": {"S": "k"}, "v": value}
    kind, answer = both_ways(
        engine, "PutItem", json.dumps({"TableName": "one", "Item": item}).encode()
    )
    assert kind == "answer", answer


def test_a_huge_set_with_duplicates_cannot_be_shrunk(engine: Engine) -> None:
    numbers = [str(i) for i in range(5_000)] + ["7"]
    item = {"pk": {"S": "k"}, "s": {"NS": numbers}, "pad": {"S": "x" * BIG}}
    kind, answer = both_ways(
        engine, "PutItem", json.dumps({"TableName": "one", "Item": item}).encode()
    )
    assert kind == "decode" and b"contains duplicates" in answer[1]


def test_a_transaction_over_4_mb_is_refused_by_the_worker(engine: Engine) -> None:
    puts = [
        {"Put": {"TableName": "one", "Item": {"pk": {"S": f"t{i}"}, "l": tiny(300), "s": PAD}}}
        for i in range(11)
    ]
    body = json.dumps({"TransactItems": puts}).encode()
    kind, answer = both_ways(engine, "TransactWriteItems", body)
    assert (kind, _message(answer)) == ("answer", "Transaction size cannot exceed 4 MB")


def test_a_verdict_leaves_no_cycle_behind(engine: Engine) -> None:
    """Garbage in a reference cycle waits for the collector: one that reached the body (through
    the frames of an error's traceback, say) kept it, 16 MiB in the worker, while the next body
    was decoded (the worker's peak went from 384 to 409 MiB over eight of issue 15's bodies)."""
    body = json.dumps({"TableName": "two", "Item": {"pk": {"S": "h"}, "l": tiny(5_000)}}).encode()
    body = body[:-2] + b', "pad": {"S": "' + b"x" * BIG + b'"}}}'
    screen(body, TARGET + "PutItem", key_names(engine))  # the scratch engine's first use
    gc.collect()
    gc.disable()
    try:
        assert screen(body, TARGET + "PutItem", key_names(engine)).kind == "request"
        assert gc.collect() == 0
    finally:
        gc.enable()


class _InProcess(Screener):
    """The screener, with the worker's function run in this process."""

    def __init__(self, after: Any = None) -> None:
        super().__init__()
        self.after = after

    def _exchange(self, body: bytes, target: str | None, keys: frozenset[str]) -> Verdict:
        verdict = screen(body, target, keys)
        if self.after is not None:
            self.after()
        return verdict


def test_a_key_name_that_appears_meanwhile_sends_the_body_to_the_decoder() -> None:
    with Engine() as engine:
        _create(engine, "one")
        item = {"pk": {"S": "k"}, "other": {"S": "x"}, "l": tiny(300), "pad": {"S": "x" * BIG}}
        body = json.dumps({"TableName": "late", "Item": item}).encode()
        decoded: list[bool] = []

        def answer(decode: Any) -> tuple[int, bytes]:
            decoded.append(decode is None)
            return wire_call(engine, TARGET + "PutItem", body, decode=decode)

        def create() -> None:  # a table keyed on an attribute the stand-in dropped
            engine.execute(
                "CreateTable",
                {
                    "TableName": "late",
                    "KeySchema": [{"AttributeName": "other", "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": "other", "AttributeType": "S"}],
                    "BillingMode": "PAY_PER_REQUEST",
                },
            )

        screener = _InProcess(after=create)
        status, payload = screener.answer(engine, body, (TARGET + "PutItem").encode(), answer)
        assert decoded == [False, True]
        assert (status, json.loads(payload)["message"]) == (
            400,
            "Item size has exceeded the maximum allowed size",
        )


# --- any body: the same answer both ways -----------------------------------------------------

BAD_VALUES = [
    {"N": "x1"},
    {"N": "\u0661"},
    {"N": "1" * 39},
    {"NULL": False},
    {"S": 5},
    {"SS": []},
    {"NS": ["1", "1"]},
    {"S": "a", "N": "1"},
    {},
    {"Q": [1, 2]},
    {"B": "!!"},
    None,
    [1],
    {"L": {"a": 1}},
    {"M": [1]},
    {"BOOL": "yes"},
    {"SS": ["a", 1]},
    {"L": [{"N": "1"}], "S": None},
    {"L": [{"N": "bad"}], "S": None, "X": [1, 2, 3]},
]


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"N": "1"}
    for _ in range(depth):
        value = {"L": [value]}
    return value


@st.composite
def heavy_values(draw: st.DrawFn) -> dict[str, Any]:
    """A list (or map) of more than LIGHT_VALUES tiny values, maybe with one bad one."""
    count = draw(st.integers(LIGHT_VALUES + 1, LIGHT_VALUES * 3))
    elements: list[Any] = [{"N": "1"}] * count
    if draw(st.integers(0, 2)) == 0:
        bad = draw(
            st.sampled_from(
                [
                    *BAD_VALUES,
                    _deep(40),
                    {"NS": [str(i) for i in range(400)] + ["3"]},
                    {"NS": [str(i) for i in range(400)] + ["three"]},
                    [{"N": "1"}] * 300,
                    {"B": [{"N": "1"}] * 300},
                ]
            )
        )
        elements[draw(st.integers(0, count - 1))] = bad
    if draw(st.booleans()):
        return {"M": {f"k{i}": value for i, value in enumerate(elements)}}
    if draw(st.booleans()):
        return {"L": [{"M": {"in": {"L": elements}}}]}
    return {"L": elements}


@st.composite
def items(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {}
    pk = draw(
        st.sampled_from([{"S": "k"}, {"N": "1"}, {"S": ""}, {"S": "p" * 2049}, {"L": []}, None])
    )
    if pk is not None:
        item["pk"] = pk
    sk = draw(st.sampled_from([{"N": "2"}, {"S": "2"}, None]))
    if sk is not None:
        item["sk"] = sk
    g = draw(st.sampled_from([{"S": "g"}, {"N": "1"}, {"S": ""}, {"SS": ["a"]}, None]))
    if g is not None:
        item["g"] = g
    for i in range(draw(st.sampled_from([0, 1, 1, 2]))):
        item[f"h{i}"] = draw(heavy_values())
    if draw(st.integers(0, 3)) > 0:
        item["pad"] = {"S": "x" * draw(st.sampled_from([100, BIG, BIG, 4 * BIG]))}
    if draw(st.integers(0, 9)) == 0:
        item["n" * 65_536] = {"S": "long name"}
    if draw(st.integers(0, 19)) == 0:
        item[""] = {"S": "empty name"}
    if draw(st.integers(0, 9)) == 0:
        item[draw(st.sampled_from(["\x00firstwrite-pad", "\x00firstwrite-pad-"]))] = {"N": "1"}
    return item


TABLES = st.sampled_from(["one", "two", "idx", "absent"])
EXTRAS = st.sampled_from(
    [
        {},
        {},
        {"ReturnValues": "ALL_OLD"},
        {"ReturnValues": "UPDATED_NEW"},
        {"ConditionExpression": "attribute_not_exists(pk)"},
        {"ConditionExpression": "a = "},
        {"ConditionExpression": "a = :v", "ExpressionAttributeValues": {":v": {"N": "1"}}},
        {"ExpressionAttributeValues": {":unused": {"N": "1"}}},
    ]
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    operation = draw(st.sampled_from(["PutItem", "BatchWriteItem", "TransactWriteItems"]))
    if operation == "PutItem":
        return operation, {"TableName": draw(TABLES), "Item": draw(items()), **draw(EXTRAS)}
    if operation == "BatchWriteItem":
        tables: dict[str, list[Any]] = {}
        for _ in range(draw(st.integers(1, 4))):
            entry: dict[str, Any]
            if draw(st.integers(0, 3)) == 0:
                entry = {"DeleteRequest": {"Key": {"pk": {"S": "k"}}}}
            else:
                entry = {"PutRequest": {"Item": draw(items())}}
            tables.setdefault(draw(TABLES), []).append(entry)
        return operation, {"RequestItems": tables}
    actions: list[Any] = []
    for _ in range(draw(st.integers(1, 4))):
        table = draw(TABLES)
        if draw(st.integers(0, 3)) == 0:
            check = {"TableName": table, "Key": {"pk": {"S": "k"}}}
            actions.append(
                {"ConditionCheck": {**check, "ConditionExpression": "attribute_exists(pk)"}}
            )
        else:
            actions.append({"Put": {"TableName": table, "Item": draw(items()), **draw(EXTRAS)}})
    request: dict[str, Any] = {"TransactItems": actions}
    if draw(st.booleans()):
        request["ClientRequestToken"] = "token"
    return operation, request


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(request=requests())
def test_any_write_gets_the_same_answer_both_ways(
    engine: Engine, request: tuple[str, dict[str, Any]]
) -> None:
    operation, body = request
    kind, answer = both_ways(engine, operation, json.dumps(body).encode())
    event(f"{kind}: {json.loads(answer[1]).get('__type', 'ok').rpartition('#')[2]}")
