"""The quick path's shortcut parse is botocore's parse, for every operation's outputs and errors.

Two boto3 clients, one answering through the shortcut (:mod:`firstwrite.engine.binding.parse`)
and one through botocore's parser alone, are answered by the same stub engine, which returns
an answer generated from botocore's model of the operation (its output shape, or one of its
errors with the error's modeled members). Every call must end the same on both: the same
response dict, or the same exception class, message and ``e.response``, compared with types
and key order. Engine-like answers must take the shortcut (else this test would prove
nothing); odd ones (tuples, ``str`` subclasses, NaN, unknown or ``None`` members, values JSON
cannot carry) may give up, and must then still end the same.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import math
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.model import OperationModel, Shape
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstwrite.engine.binding import steps as binding_steps
from firstwrite.engine.binding.parse import Shortcut, wire_answer
from firstwrite.engine.binding.steps import FINAL_ERRORS, install, parser_of
from firstwrite.engine.binding.sync import Responder, local_client
from firstwrite.engine.clock import Clock
from firstwrite.engine.direct.client import service_model
from firstwrite.engine.errors import DynamoDBError
from hypothesis_budget import examples

SERVICES = {"dynamodb": "DynamoDB_20120810", "dynamodbstreams": "DynamoDBStreams_20120810"}
# Codes botocore retries: the quick path hands them to the full path, where only the parser runs.
RETRIED = ("ThrottlingException", "ProvisionedThroughputExceededException", "InternalServerError")


class _Label(str):
    """A ``str`` subclass: JSON writes it as text, so the parser returns a plain ``str``."""


class _Number(enum.IntEnum):
    ONE = 1


# -- answers generated from botocore's shapes --------------------------------------------------


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind == "string":
        return st.text(max_size=6)
    if kind in ("integer", "long"):
        return st.integers(-(2**70), 2**70)
    if kind in ("double", "float"):
        return st.floats(allow_nan=False, allow_infinity=False) | st.integers(-99, 99)
    if kind == "boolean":
        return st.booleans()
    if kind == "blob":
        return st.binary(max_size=12)
    if kind == "timestamp":
        return st.floats(0, 4e9) | st.integers(0, 4_000_000_000)
    raise AssertionError(kind)


def _odd(kind: str) -> st.SearchStrategy[Any]:
    """Values the engine never sends, whose JSON round trip is not the identity (or fails)."""
    common = st.sampled_from(
        [None, (1, 2), {1, 2}, _Label("x"), _Number.ONE, math.nan, math.inf, object()]
    )
    if kind == "blob":
        return common | st.sampled_from([bytearray(b"\x01"), "AQ==", memoryview(b"\x02")])
    if kind in ("integer", "long", "double"):
        return common | st.sampled_from([True, 1.5, "7"])
    return common


@functools.cache  # one strategy per shape: building it afresh for each example was most of the cost
def answers(shape: Shape, *, odd: bool, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values an engine might answer for ``shape`` (``odd``: sometimes ones it never would)."""
    kind = shape.type_name
    if kind == "structure":
        members = dict(shape.members)
        if shape.name == "AttributeValue":  # the engine's: exactly one member set
            if depth >= 3:
                members = {k: v for k, v in members.items() if k not in ("M", "L")}
            one = st.sampled_from(sorted(members)).flatmap(
                lambda name: answers(members[name], odd=odd, depth=depth + 1).map(
                    lambda value: {name: value}
                )
            )
            return one | st.just({"S": "two", "N": "1"}) if odd else one
        optional = {
            member.serialization.get("name", name): answers(member, odd=odd, depth=depth + 1)
            for name, member in members.items()
            if depth < 4 or member.type_name not in ("structure", "list", "map")
        }
        structure = st.fixed_dictionaries({}, optional=optional)
        if odd:
            unknown = st.fixed_dictionaries({"NotInTheModel": st.integers()})
            structure = structure | unknown
        return structure
    if kind == "list":
        item = answers(shape.member, odd=odd, depth=depth + 1)
        if not odd:
            return st.lists(item, max_size=2)
        items = st.lists(item | st.none(), max_size=3)  # botocore keeps a null element
        return items | items | items.map(tuple)
    if kind == "map":
        values = answers(shape.value, odd=odd, depth=depth + 1)
        mapping = st.dictionaries(st.text(max_size=4), values, max_size=2)
        if odd:
            mapping = mapping | st.dictionaries(st.integers(0, 3), values, min_size=1, max_size=2)
        return mapping
    plain = _scalar(kind)
    # Rare enough that many answers hold one odd value among engine-like ones.
    return st.one_of(plain, plain, plain, plain, _odd(kind)) if odd else plain


def errors(model: OperationModel, *, odd: bool) -> st.SearchStrategy[DynamoDBError]:
    """The operation's modeled errors with their members, and the codes every call may get."""
    service = model.service_model
    codes = sorted(
        {s.name for s in model.error_shapes}
        | set(FINAL_ERRORS)
        | set(RETRIED)
        | ({"com.example:Odd#Code", "NoSuchCode"} if odd else set())
    )

    def build(code: str) -> st.SearchStrategy[DynamoDBError]:
        shape = service.shape_for_error_code(code)
        extra = st.just({})
        if shape is not None:
            members = {
                name: answers(member, odd=odd)
                for name, member in shape.members.items()
                if name.lower() != "message"
            }
            extra = st.fixed_dictionaries({}, optional=members)
        message = st.text(max_size=8) | (st.sampled_from([_Label("m"), 3]) if odd else st.nothing())
        return st.builds(lambda m, x: DynamoDBError(code, m, **x), message, extra)

    return st.sampled_from(codes).flatmap(build)


# -- two clients, one stub engine --------------------------------------------------------------


class StubEngine:
    """An engine answering every call with ``answer`` (a response dict, or an error raised)."""

    default_region = "us-east-1"
    durability = "normal"
    interceptors: list[Any] = []

    def __init__(self) -> None:
        self.answer: Any = {}
        self.clock = Clock()  # the answers' Date: frozen, so that two answers compare equal
        self.clock.freeze(1_800_000_000.0)

    def execute(self, operation: str, request: Any, **_kwargs: Any) -> Any:
        if isinstance(self.answer, DynamoDBError):
            raise self.answer
        return self.answer


class CountingShortcut:
    """The real shortcut, counting the parses it answered."""

    def __init__(self, inner: Shortcut) -> None:
        self.inner = inner
        self.taken = 0

    def parse(self, response: Any, shape: Any, answer: Any, lowered: Any = None) -> Any:
        parsed = self.inner.parse(response, shape, answer, lowered)
        self.taken += parsed is not None
        return parsed


def _client(service: str, engine: StubEngine, *, shortcut: bool) -> tuple[Any, Any]:
    # No client-side validation, so that every operation can be called with no parameters;
    # no retries, so that a retried code is answered once (the full path, parser only).
    config = Config(parameter_validation=False, retries={"total_max_attempts": 1})
    client = local_client(service_name=service, config=config)
    responder = Responder(engine, "us-east-1", parser_of(client), client.meta.events.emit)
    if shortcut:
        assert responder._shortcut is not None, "botocore's JSON parser must get the shortcut"
        responder._shortcut = CountingShortcut(responder._shortcut)
    else:
        responder._shortcut = None
    install(client, responder)
    return client, responder


Clients = tuple[str, StubEngine, Any, Any, CountingShortcut]


def _clients(service: str) -> Clients:
    engine = StubEngine()
    fast, responder = _client(service, engine, shortcut=True)
    slow, _ = _client(service, engine, shortcut=False)
    return service, engine, fast, slow, responder._shortcut


@pytest.fixture(scope="module", params=sorted(SERVICES))
def clients(request: pytest.FixtureRequest) -> Clients:
    return _clients(request.param)


@pytest.fixture(scope="module")
def dynamodb_clients() -> Clients:
    return _clients("dynamodb")


def _typed(value: Any) -> Any:
    """``value`` with every type and key order made part of equality (NaN equal to itself)."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


_EMPTY = {"string": "x", "list": [], "map": {}, "structure": {}, "integer": 1, "long": 1}


def _params(model: OperationModel) -> dict[str, Any]:
    """The operation's required members, each the least value of its type (the stub engine
    reads none of them; botocore's endpoint resolution reads some, e.g. RequestItems' keys)."""
    shape = model.input_shape
    if shape is None:
        return {}
    return {name: _EMPTY.get(shape.members[name].type_name, "x") for name in shape.required_members}


def _call(client: Any, operation: str) -> Any:
    params = _params(client.meta.service_model.operation_model(operation))
    try:
        return ("ok", _typed(client._make_api_call(operation, params)))
    except ClientError as error:
        return (type(error), str(error), error.operation_name, _typed(error.response))
    except Exception as error:  # an odd answer the parser itself fails on: fail alike
        return (type(error), str(error))


def _check(clients: Clients, operation: str, answer: Any, *, odd: bool) -> None:
    _service, engine, fast, slow, counter = clients
    engine.answer = answer
    taken = counter.taken
    got, want = _call(fast, operation), _call(slow, operation)
    assert got == want
    if odd:
        return
    # An engine-like answer takes the shortcut: one parse for a success, two for a final error.
    if isinstance(answer, DynamoDBError):
        # The error's parse, unless a 5xx (botocore's generic-error checks); then its modeled
        # members' parse, for the codes that stay on the quick path.
        expected = 0
        if answer.status < 500:
            expected = 1 + (answer.code in FINAL_ERRORS and _modeled(fast, answer))
        assert counter.taken - taken == expected
        assert want[0] != "ok"
    else:
        assert counter.taken - taken == 1
        assert want[0] == "ok"


def _modeled(client: Any, error: DynamoDBError) -> bool:
    return client.meta.service_model.shape_for_error_code(error.code) is not None


@pytest.fixture(autouse=True)
def _fixed_request_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    # The two clients' answers are compared whole: the same request id in both.
    monkeypatch.setattr(binding_steps, "new_request_id", lambda: "REQUEST-ID")


def _operations(service: str) -> list[str]:
    return sorted(service_model(service).operation_names)


COMMON = settings(
    max_examples=examples(250),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@COMMON
@given(data=st.data(), odd=st.booleans())
def test_every_output_parses_the_same(clients: Clients, data: st.DataObject, odd: bool) -> None:
    service = clients[0]
    operation = data.draw(st.sampled_from(_operations(service)))
    shape = service_model(service).operation_model(operation).output_shape
    answer = data.draw(answers(shape, odd=odd)) if shape is not None else {}
    _check(clients, operation, answer, odd=odd)


@COMMON
@given(data=st.data(), odd=st.booleans())
def test_every_error_parses_and_raises_the_same(
    clients: Clients, data: st.DataObject, odd: bool
) -> None:
    service = clients[0]
    operation = data.draw(st.sampled_from(_operations(service)))
    model = service_model(service).operation_model(operation)
    _check(clients, operation, data.draw(errors(model, odd=odd)), odd=odd)


ITEM = {
    "blob": {"B": bytes(range(40))},
    "doc": {"L": [{"NULL": True}, {"M": {"x": {"BS": [b"1", b"22"]}, "n": {"NS": ["1", "2"]}}}]},
    "flag": {"BOOL": False},
}
CANCELLED = DynamoDBError(
    "TransactionCanceledException",
    "Transaction cancelled, please refer cancellation reasons for specific reasons "
    "[ConditionalCheckFailed, None]",
    CancellationReasons=[
        {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
            "Item": ITEM,
        },
        {"Code": "None"},
    ],
)
# (operation, answer, engine-like): the cases the generated answers reach only by chance.
CASES: list[tuple[str, Any, bool]] = [
    ("GetItem", {"Item": ITEM, "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}}, True),
    (
        "Query",  # members in another order than the model's: the parser's order wins
        {"LastEvaluatedKey": {"k": {"N": "1"}}, "Count": 1, "Items": [ITEM], "ScannedCount": 2},
        True,
    ),
    ("DescribeTable", {"Table": {"TableName": "t", "CreationDateTime": 1750000000.25}}, True),
    ("DescribeTable", {"Table": {"TableName": "t", "CreationDateTime": 1750000000}}, True),
    ("PutItem", DynamoDBError("ConditionalCheckFailedException", "failed", Item=ITEM), True),
    ("TransactWriteItems", CANCELLED, True),
    ("PutItem", DynamoDBError("UnknownOperationException"), True),  # no message member
    ("PutItem", DynamoDBError("ValidationException", "v\ud800 \u2603"), True),
    ("PutItem", DynamoDBError("com.example:Odd#Code", "odd"), False),
    ("GetItem", {"Item": {1: {"S": "int key"}}}, False),
    ("GetItem", {"Item": {"a": {"S": "two", "N": "1"}}}, False),
    ("ListTables", {"TableNames": ["a", None]}, False),
    ("ListTables", {"TableNames": ("a",)}, False),
    ("ListTables", {"TableNames": [object()]}, False),  # JSON cannot carry it: a 500
    ("ListTables", {"TableNames": [_Label("subclass")]}, False),
    ("GetItem", {"Item": {"a": {"B": "AQ=="}}}, False),
    ("GetItem", {"Item": {"a": {"B": bytearray(b"\x01")}}}, False),
]


@pytest.mark.parametrize(("operation", "answer", "engine_like"), CASES)
def test_edge_cases_parse_the_same(
    dynamodb_clients: Clients, operation: str, answer: Any, engine_like: bool
) -> None:
    _check(dynamodb_clients, operation, answer, odd=not engine_like)


def test_a_before_parse_hook_that_changes_the_answer_is_parsed_from_what_it_left() -> None:
    engine = StubEngine()
    client, responder = _client("dynamodb", engine, shortcut=True)
    engine.answer = {"TableNames": ["engine"]}

    def rewrite(response_dict: dict[str, Any], **_kwargs: Any) -> None:
        response_dict["body"] = b'{"TableNames":["hook"]}'

    client.meta.events.register("before-parse.dynamodb.ListTables", rewrite)
    assert client.list_tables()["TableNames"] == ["hook"]
    assert responder._shortcut.taken == 0


def test_a_before_parse_hook_that_changes_the_headers_is_parsed_from_what_it_left() -> None:
    # The headers are known lowercased only while no before-parse hook ran.
    _service, engine, fast, slow, counter = _clients("dynamodb")

    def retag(response_dict: dict[str, Any], **_kwargs: Any) -> None:
        response_dict["headers"]["X-Hooked"] = "yes"
        response_dict["headers"]["x-amzn-RequestId"] = "HOOKED"

    for client in (fast, slow):
        client.meta.events.register("before-parse.dynamodb.PutItem", retag)
    for answer in ({}, DynamoDBError("ConditionalCheckFailedException", "no")):
        engine.answer = answer
        taken = counter.taken
        got, want = _call(fast, "PutItem"), _call(slow, "PutItem")
        assert got == want
        assert counter.taken > taken
        assert "'x-hooked', ('str', 'yes')" in repr(got)
        assert "'RequestId', ('str', 'HOOKED')" in repr(got)


def test_only_botocores_json_parsers_get_the_shortcut() -> None:
    from botocore.parsers import RestJSONParser, create_parser

    assert Shortcut.for_parser(create_parser("json")) is not None
    assert Shortcut.for_parser(RestJSONParser()) is None
    assert Shortcut.for_parser(SimpleNamespace()) is None


def test_a_custom_blob_and_timestamp_parser_are_honoured() -> None:
    from botocore.parsers import ResponseParserFactory

    factory = ResponseParserFactory()
    factory.set_parser_defaults(timestamp_parser=lambda v: ("ts", v), blob_parser=lambda v: v)
    engine = StubEngine()
    outcomes = []
    for shortcut in (True, False):
        client, _ = _client("dynamodbstreams", engine, shortcut=shortcut)
        responder = Responder(
            engine, "us-east-1", factory.create_parser("json"), client.meta.events.emit
        )
        if not shortcut:
            responder._shortcut = None
        install(client, responder)
        engine.answer = {
            "Records": [
                {"dynamodb": {"ApproximateCreationDateTime": 1.5, "Keys": {"b": {"B": b"\x01"}}}}
            ]
        }
        outcomes.append(client.get_records(ShardIterator="x"))
    fast, slow = outcomes
    assert _typed(fast) == _typed(slow)
    record = fast["Records"][0]["dynamodb"]
    assert record["ApproximateCreationDateTime"] == ("ts", 1.5)
    assert record["Keys"]["b"]["B"] == "AQ=="  # the custom blob parser got the base64 text


@pytest.mark.parametrize(("operation", "answer", "engine_like"), CASES)
def test_aiobotocores_parser_gets_what_the_shortcut_builds(
    operation: str, answer: Any, engine_like: bool
) -> None:
    from aiobotocore.parsers import AioJSONParser

    engine = StubEngine()
    engine.answer = answer
    reply = wire_answer(engine, f"DynamoDB_20120810.{operation}", b"{}", "us-east-1")
    headers = binding_steps.response_headers(reply.payload, "Mon, 07 Dec 2026 13:52:13 GMT")
    http = binding_steps.respond("https://local", reply.status, reply.payload, headers)
    response = {
        "headers": http.headers,
        "status_code": reply.status,
        "body": reply.payload,
        "context": {"operation_name": operation},
    }
    model = service_model("dynamodb").operation_model(operation)
    shapes = [model.output_shape]
    if isinstance(answer, DynamoDBError):
        shapes.append(model.service_model.shape_for_error_code(answer.code))
    parser = AioJSONParser()
    shortcut = Shortcut.for_parser(parser)
    assert shortcut is not None
    for shape in shapes:
        fast = shortcut.parse(response, shape, reply)
        if engine_like:
            assert fast is not None
        if fast is not None:
            assert _typed(fast) == _typed(asyncio.run(parser.parse(response, shape)))
