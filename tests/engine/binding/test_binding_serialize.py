"""The quick path's JSON requests are exactly botocore's serializer's.

For every operation of ``dynamodb`` and ``dynamodbstreams``, well-formed and malformed
parameters (the strategies of ``test_binding_validate``): wherever the as-is check accepts
them, they are valid for botocore's validator and :class:`JsonRequests` builds the very
request ``JSONSerializer`` builds (same keys in the same order, same headers, same body bytes).
A bound client's requests are then botocore's, blobs and all.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from botocore.serialize import JSONSerializer
from botocore.validate import ParamValidator
from hypothesis import given
from hypothesis import strategies as st
from test_binding_validate import COMMON, OPERATIONS, draw_as_is, values

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.serialize import JsonRequests
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.binding.validate import QuickValidation, compile_check
from firstwrite.engine.direct.client import service_model


def _request_of(serializer: Any, params: Any, model: Any) -> list[tuple[str, Any]]:
    return list(serializer.serialize_to_request(params, model).items())


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
@COMMON
@given(data=st.data())
def test_an_as_is_request_is_botocores(service: str, name: str, data: st.DataObject) -> None:
    model = service_model(service).operation_model(name)
    shape = model.input_shape
    requests = JsonRequests()
    if shape is None:
        assert _request_of(JSONSerializer(), {}, model) == list(requests.request({}, model).items())  # type: ignore[union-attr]
        return
    params = draw_as_is(shape, data)
    if params is None:
        return
    assert not ParamValidator().validate(params, shape).has_errors()
    mine = requests.request(params, model)
    assert mine is not None
    assert list(mine.items()) == _request_of(JSONSerializer(), params, model)


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
@COMMON
@given(data=st.data())
def test_the_as_is_check_accepts_parameters_without_blobs_or_floats(
    service: str, name: str, data: st.DataObject
) -> None:
    # Otherwise it would prove nothing and save nothing.
    shape = service_model(service).operation_model(name).input_shape
    if shape is None:
        return
    params = data.draw(values(shape, odd=False))
    if not compile_check(shape)(params) or _has(params, (bytes, bytearray, float)):
        return
    if _has_blob_string(shape, params):
        return
    assert compile_check(shape, as_is=True)(params), params


def _has(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, kinds):
        return True
    if isinstance(value, dict):
        return any(_has(v, kinds) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has(v, kinds) for v in value)
    return False


def _has_blob_string(shape: Any, value: Any) -> bool:
    """A blob given as ``str`` (base64-encoded by botocore, so never as it is)."""
    kind = shape.type_name
    if kind in ("blob", "float", "double", "timestamp"):
        return True
    if kind == "structure" and isinstance(value, dict):
        return any(_has_blob_string(shape.members[k], v) for k, v in value.items())
    if kind == "list":
        return any(_has_blob_string(shape.member, v) for v in value)
    if kind == "map":
        return any(_has_blob_string(shape.value, v) for v in value.values())
    return False


def test_a_bound_client_sends_botocores_body_blobs_included() -> None:
    engine = Engine()
    client = local_client(engine)
    assert isinstance(client._serializer, QuickValidation)
    client.create_table(
        TableName="things",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    bodies: list[bytes] = []

    def look(params: dict[str, Any], **_kwargs: Any) -> None:
        bodies.append(params["body"])

    client.meta.events.register_first("before-call.dynamodb.PutItem", look)
    plain = {"pk": {"S": "a"}, "n": {"N": "1"}, "l": {"L": [{"BOOL": True}, {"NULL": True}]}}
    blob = {"pk": {"S": "b"}, "b": {"B": b"\x00\xff"}, "bs": {"BS": [b"x"]}}
    client.put_item(TableName="things", Item=plain)
    client.put_item(TableName="things", Item=blob)
    serializer = JSONSerializer()
    model = client.meta.service_model.operation_model("PutItem")
    for sent, item in zip(bodies, (plain, blob), strict=True):
        want = serializer.serialize_to_request({"TableName": "things", "Item": item}, model)
        assert sent == want["body"]
    assert base64.b64encode(b"\x00\xff").decode() in bodies[1].decode()
    got = client.get_item(TableName="things", Key={"pk": {"S": "b"}})["Item"]
    assert got["b"] == {"B": b"\x00\xff"}
