"""The quick path hands the engine a request's parameters in place of its body's JSON, and the
engine's answers are the same either way.

:func:`~firstwrite.engine.binding.serialize.parameters_of` gives the parameters of a body built
as it is (:mod:`firstwrite.engine.binding.serialize`). That is sound because such parameters are
their body's JSON value, with the same types all the way down, for every operation's input
shape; and it is only taken for the very body built from them, without a surrogate escape.
Here: that lemma for every operation and random parameters; then the same random calls (good
and bad items, conditions, updates, queries) on two engines, one answered from the parameters
and one from the body, end the same (responses and errors); and the cases that must read the
body (a hook replaced it, a lone surrogate, tuples) do read it.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ParamValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_binding_validate import COMMON, OPERATIONS, draw_as_is

from firstwrite.engine import wire
from firstwrite.engine.api import Engine
from firstwrite.engine.binding import steps as binding_steps
from firstwrite.engine.binding.serialize import _BUILT, JsonRequests, parameters_of
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.direct.client import service_model
from hypothesis_budget import examples


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types and key order all the way down."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
@COMMON
@given(data=st.data())
def test_as_is_parameters_are_their_bodys_json(
    service: str, name: str, data: st.DataObject
) -> None:
    model = service_model(service).operation_model(name)
    shape = model.input_shape
    if shape is None:
        return
    params = draw_as_is(shape, data)
    if params is None:
        return
    request = JsonRequests().request(params, model)
    assert request is not None
    body = request["body"]
    handed = parameters_of(body, model)
    assert handed is params or (handed is None and b"\\ud" in body)  # an escape: left alone
    assert _same(wire.loads(body), params)  # (hypothesis's text holds no lone surrogate)


def test_a_surrogate_escape_is_never_handed_over() -> None:
    model = service_model("dynamodb").operation_model("GetItem")
    for text in ("\ud800", "a\udfff", "\U0001f600"):  # a lone half, a pair as an escape
        params = {"TableName": "things", "Key": {"pk": {"S": text}}}
        body = JsonRequests().request(params, model)["body"]  # type: ignore[index]
        assert parameters_of(body, model) is None


def test_only_the_body_built_last_for_that_operation_is_handed_over() -> None:
    service = service_model("dynamodb")
    get, put = service.operation_model("GetItem"), service.operation_model("PutItem")
    params = {"TableName": "things", "Key": {"pk": {"S": "a"}}}
    body = JsonRequests().request(params, get)["body"]  # type: ignore[index]
    assert parameters_of(bytes(bytearray(body)), get) is None  # equal, not the same object
    assert _BUILT.get() is None  # forgotten either way
    JsonRequests().request(params, get)
    assert parameters_of(body, get) is None  # built again: another body object
    body = JsonRequests().request(params, get)["body"]  # type: ignore[index]
    assert parameters_of(body, put) is None
    body = JsonRequests().request(params, get)["body"]  # type: ignore[index]
    assert parameters_of(body, get) is params
    assert parameters_of(body, get) is None  # handed over once


# -- the engine's answers, from the parameters and from the body -------------------------------


# The table every test here writes to: ``pk`` (S) and ``sk`` (N).
_THINGS: dict[str, Any] = {
    "TableName": "things",
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "N"},
    ],
    "BillingMode": "PAY_PER_REQUEST",
}


def _create(client: Any) -> None:
    client.create_table(**_THINGS)


@pytest.fixture
def pair() -> Iterator[tuple[Any, Any]]:
    """A client answered from the parameters, and one from the body, on two engines."""
    direct, decoded = Engine(), Engine()
    clients = local_client(direct), local_client(decoded)
    for client in clients:
        _create(client)
    yield clients
    direct.close()
    decoded.close()


_texts = st.text(max_size=5) | st.sampled_from(["", "é", "\U0001f600", "\ud800", "a\\ud800"])
_numbers = st.sampled_from(["0", "1", "-1", "42", "1e3", "0.5", "x", "", "1" * 40, "01", " 1"])


def _value(depth: int = 0) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.builds(lambda s: {"S": s}, _texts),
        st.builds(lambda n: {"N": n}, _numbers),
        st.builds(lambda b: {"BOOL": b}, st.booleans()),
        st.builds(lambda b: {"NULL": b}, st.booleans()),
        st.builds(lambda s: {"SS": s}, st.lists(_texts, max_size=3)),
        st.builds(lambda s: {"NS": s}, st.lists(_numbers, max_size=3)),
        st.just({}),  # no type: DynamoDB's own error
        st.just({"S": "a", "N": "1"}),
    )
    if depth >= 2:
        return scalars
    inner = _value(depth + 1)
    return st.one_of(
        scalars,
        st.builds(lambda v: {"L": v}, st.lists(inner, max_size=3)),
        st.builds(lambda v: {"M": v}, st.dictionaries(_texts, inner, max_size=3)),
    )


_keys = st.fixed_dictionaries(
    {"pk": st.builds(lambda s: {"S": s}, st.sampled_from(["a", "b", ""])), "sk": _value(2)}
)


def _calls() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    attributes = st.dictionaries(st.sampled_from(["x", "y", "z", ""]), _value(), max_size=3)
    put = st.builds(
        lambda key, rest, guard, returns: (
            "put_item",
            {
                "TableName": "things",
                "Item": {**key, **rest},
                **({"ConditionExpression": "attribute_not_exists(pk)"} if guard else {}),
                **({"ReturnValues": "ALL_OLD"} if returns else {}),
                **({"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if guard else {}),
            },
        ),
        _keys,
        attributes,
        st.booleans(),
        st.booleans(),
    )
    update = st.builds(
        lambda key, value, expected: (
            "update_item",
            {
                "TableName": "things",
                "Key": key,
                "UpdateExpression": "SET #x = :v",
                "ConditionExpression": "attribute_not_exists(#x) OR #x <> :e",
                "ExpressionAttributeNames": {"#x": "x"},
                "ExpressionAttributeValues": {":v": value, ":e": expected},
                "ReturnValues": "ALL_NEW",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        _keys,
        _value(),
        _value(1),
    )
    get = st.builds(lambda key: ("get_item", {"TableName": "things", "Key": key}), _keys)
    delete = st.builds(
        lambda key: ("delete_item", {"TableName": "things", "Key": key, "ReturnValues": "ALL_OLD"}),
        _keys,
    )
    query = st.builds(
        lambda pk: (
            "query",
            {
                "TableName": "things",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": pk},
            },
        ),
        _value(2),
    )
    return st.one_of(put, update, get, delete, query)


def _outcome(client: Any, method: str, params: dict[str, Any]) -> Any:
    try:
        response = getattr(client, method)(**params)
    except ParamValidationError as error:  # botocore's, before any engine
        return "ParamValidationError", str(error)
    except ClientError as error:
        answer = dict(error.response)
        answer.pop("ResponseMetadata")
        return type(error).__name__, str(error), answer
    response = dict(response)
    response.pop("ResponseMetadata")
    return response


class _Counted:
    """``wire.loads``, counted."""

    def __init__(self) -> None:
        self.calls = 0
        self.loads = wire.loads

    def __call__(self, body: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.loads(body, **kwargs)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(calls=st.lists(_calls(), min_size=1, max_size=8))
def test_the_engine_answers_the_parameters_as_it_answers_the_body(
    pair: tuple[Any, Any], calls: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    direct, decoded = pair
    counted = _Counted()
    monkeypatch.setattr(wire, "loads", counted)
    handed = 0
    for method, params in calls:
        before, sent = counted.calls, copy.deepcopy(params)
        got = _outcome(direct, method, params)
        handed += counted.calls == before
        # The engine reads the caller's own dicts now: it must never change them.
        assert _same(params, sent), (method, params, sent)
        with monkeypatch.context() as off:
            off.setattr(binding_steps, "parameters_of", lambda _body, _model: None)
            before = counted.calls
            want = _outcome(decoded, method, params)
            assert counted.calls == before + 1  # this one read its body
        assert _same(got, want), (method, params, got, want)
    # Calls with no surrogate escape were answered from their parameters (else this would
    # prove nothing); the others, and any botocore refused, read their bodies.
    plain = [p for _m, p in calls if b"\\ud" not in json.dumps(p).encode()]
    assert handed >= 1 or not plain


def test_a_hook_that_replaces_the_body_is_answered_from_the_new_body() -> None:
    engine = Engine()
    client = local_client(engine)
    _create(client)
    client.create_table(
        TableName="others",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )

    def elsewhere(params: dict[str, Any], **_kwargs: Any) -> None:
        params["body"] = params["body"].replace(b'"things"', b'"others"')

    client.meta.events.register_first("before-call.dynamodb.PutItem", elsewhere)
    client.put_item(TableName="things", Item={"pk": {"S": "a"}, "sk": {"N": "1"}})
    assert client.scan(TableName="things")["Count"] == 0
    assert client.scan(TableName="others")["Items"] == [{"pk": {"S": "a"}, "sk": {"N": "1"}}]


def test_plain_calls_skip_the_decoder_and_odd_ones_read_their_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = Engine()
    client = local_client(engine)
    _create(client)
    counted = _Counted()
    monkeypatch.setattr(wire, "loads", counted)
    item = {"pk": {"S": "a"}, "sk": {"N": "1"}, "l": {"L": [{"S": "x"}]}}
    client.put_item(TableName="things", Item=item)
    assert counted.calls == 0
    assert _BUILT.get() is None  # nothing is held once the call is answered
    tupled = {**item, "l": {"L": ({"S": "y"},)}}  # a tuple: JSON reads it back as a list
    client.put_item(TableName="things", Item=tupled)
    assert counted.calls == 1
    got = client.get_item(TableName="things", Key={"pk": {"S": "a"}, "sk": {"N": "1"}})
    assert got["Item"]["l"] == {"L": [{"S": "y"}]}
    with pytest.raises(ClientError) as refused:  # as over HTTP: the body cannot be read
        client.put_item(TableName="things", Item={**item, "s": {"S": "\ud800"}})
    assert refused.value.response["Error"]["Code"] == "SerializationException"
    assert counted.calls == 2  # the get was answered from its parameters, the put read its body


def test_an_aiobotocore_client_hands_over_its_parameters_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from firstwrite.engine.binding.aio import local_aio_client

    counted = _Counted()
    monkeypatch.setattr(wire, "loads", counted)
    item = {"pk": {"S": "a"}, "sk": {"N": "1"}}

    async def run() -> tuple[Any, Any, int]:
        async with local_aio_client() as client:
            await client.create_table(**_THINGS)
            before = counted.calls
            # Two tasks at once: each hands the engine its own parameters.
            await asyncio.gather(
                client.put_item(TableName="things", Item=item),
                client.put_item(TableName="things", Item={**item, "sk": {"N": "2"}}),
            )
            handed = counted.calls - before
            got = await client.query(
                TableName="things",
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": "a"}},
            )
            try:
                await client.put_item(TableName="things", Item={**item, "x": {"S": "\ud800"}})
            except ClientError as error:
                return got["Items"], error.response["Error"]["Code"], handed
            raise AssertionError("a lone surrogate went through")

    items, code, handed = asyncio.run(run())
    assert handed == 0
    assert items == [item, {**item, "sk": {"N": "2"}}]
    assert code == "SerializationException"


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"S": "x"}
    for _ in range(levels):
        value = {"M": {"a": value}} if levels % 2 else {"L": [value]}
    return value


@pytest.mark.parametrize("levels", [30, 31, 32, 33, 300, 301])
def test_deep_items_end_the_same_from_the_parameters_and_from_the_body(
    pair: tuple[Any, Any], levels: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct, decoded = pair
    params = {
        "TableName": "things",
        "Item": {"pk": {"S": "a"}, "sk": {"N": "1"}, "v": _nested(levels)},
    }
    got = _outcome(direct, "put_item", params)
    monkeypatch.setattr(binding_steps, "parameters_of", lambda _body, _model: None)
    assert _same(got, _outcome(decoded, "put_item", params))
    assert _same(
        _outcome(direct, "scan", {"TableName": "things"}),
        _outcome(decoded, "scan", {"TableName": "things"}),
    )
