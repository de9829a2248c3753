"""The quick path's compiled validation says *valid* only where botocore's validator does.

For every operation of ``dynamodb`` and ``dynamodbstreams``, parameters are generated from
botocore's model of its input: well-formed ones (required members, lengths and numbers at the
model's minimum or above), and malformed ones (wrong, subclassed or ``None`` values, unknown and
missing members, short strings, tuples, ``Decimal``, datetimes, file-like blobs). The compiled
check must never accept what ``ParamValidator`` reports an error for, and must accept the
well-formed parameters (else the quick validation would prove nothing and save nothing).
A bound client then refuses bad parameters with botocore's very ``ParamValidationError``.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import io
from typing import Any

import pytest
from botocore.exceptions import ParamValidationError
from botocore.model import Shape
from botocore.validate import ParamValidationDecorator, ParamValidator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import bind, local_client, unbind
from firstwrite.engine.binding.validate import QuickValidation, _Unknown, compile_check
from firstwrite.engine.direct.client import service_model
from hypothesis_budget import examples

OPERATIONS = [
    (service, name)
    for service in ("dynamodb", "dynamodbstreams")
    for name in service_model(service).operation_names
]
DEPTH = 3  # recursive shapes (AttributeValue) are cut here


class _Text(str):
    """A ``str`` subclass: valid for botocore, left to it by the check."""


def _junk() -> st.SearchStrategy[Any]:
    return st.sampled_from(
        [
            None,
            0,
            -1,
            True,
            1.5,
            float("nan"),
            decimal.Decimal("1"),
            "",
            "x",
            _Text("abc"),
            b"x",
            bytearray(b"x"),
            io.BytesIO(b"x"),
            datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            "2026-01-01T00:00:00Z",
            (),
            [],
            {},
            {"unknown": 1},
            [None],
        ]
    )


def _minimum(shape: Shape) -> int:
    return int(shape.metadata.get("min", 0))


@functools.cache  # one strategy per shape: building it afresh for each example was most of the cost
def values(shape: Shape, odd: bool, depth: int = 0) -> st.SearchStrategy[Any]:
    """Parameters for ``shape``: well-formed, or (``odd``) sometimes malformed anywhere."""
    good = _well_formed(shape, odd, depth)
    return st.one_of(good, _junk()) if odd else good


def _well_formed(shape: Shape, odd: bool, depth: int) -> st.SearchStrategy[Any]:
    kind = shape.type_name
    low = _minimum(shape)
    if kind == "string":
        enum = shape.metadata.get("enum")
        if enum and not odd:
            return st.sampled_from(enum)
        return st.text(min_size=max(0, low - 1) if odd else low, max_size=low + 4)
    if kind in ("integer", "long"):
        return st.integers(min_value=low - 1 if odd else low, max_value=low + 100)
    if kind in ("float", "double"):
        return st.one_of(
            st.floats(min_value=low, allow_nan=False, width=64), st.integers(low, low + 100)
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "blob":
        return st.one_of(st.binary(max_size=4), st.text(max_size=4))
    if kind == "timestamp":
        return st.datetimes(timezones=st.just(datetime.UTC))
    if kind == "list":
        size = 0 if depth >= DEPTH else 3
        item = values(shape.member, odd, depth + 1)
        lists = st.lists(item, min_size=low, max_size=max(size, low))
        return st.one_of(lists, lists.map(tuple)) if odd else lists
    if kind == "map":
        size = 0 if depth >= DEPTH else 3
        keys = _well_formed(shape.key, odd, depth + 1)
        if odd:  # map keys must be hashable
            keys = st.one_of(keys, st.sampled_from([None, 0, True, 1.5, b"x", "", _Text("k")]))
        return st.dictionaries(keys, values(shape.value, odd, depth + 1), max_size=size)
    assert kind == "structure", kind
    members = shape.members
    required = set(shape.metadata.get("required", ()))
    if shape.is_tagged_union and not odd:
        names = [n for n in members if depth < DEPTH or members[n].type_name not in _NESTED]
        return st.sampled_from(names).flatmap(
            lambda name: st.fixed_dictionaries({name: values(members[name], odd, depth + 1)})
        )
    optional = {
        name: values(member, odd, depth + 1)
        for name, member in members.items()
        if name not in required
        and (depth < DEPTH or member.type_name not in _NESTED)
        and (odd or member.type_name != "timestamp")  # left to botocore: no saving to check
    }
    must = {name: values(members[name], odd, depth + 1) for name in required}
    structures = st.fixed_dictionaries(must, optional=optional)
    if odd:  # a required member dropped, or an unknown one added
        structures = st.one_of(
            structures,
            structures.map(lambda d: dict(list(d.items())[1:])),
            structures.map(lambda d: {**d, "Unknown": "x"}),
        )
    return structures


_NESTED = frozenset({"structure", "list", "map"})


def draw_as_is(shape: Shape, data: st.DataObject) -> Any:
    """Parameters for ``shape`` (good or odd) that the quick path's as-is check accepts, or
    ``None`` (a shape the check cannot compile, or parameters it refuses)."""
    try:
        as_is = compile_check(shape, as_is=True)
    except _Unknown:
        return None
    params = data.draw(values(shape, odd=data.draw(st.booleans())))
    return params if as_is(params) else None


COMMON = settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _input(service: str, name: str) -> Shape | None:
    return service_model(service).operation_model(name).input_shape


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
@COMMON
@given(data=st.data())
def test_the_check_never_accepts_what_botocore_refuses(
    service: str, name: str, data: st.DataObject
) -> None:
    shape = _input(service, name)
    if shape is None:
        return
    try:
        check = compile_check(shape)
    except _Unknown:
        return  # left to botocore's validator whole
    params = data.draw(values(shape, odd=data.draw(st.booleans())))
    if check(params):
        report = ParamValidator().validate(params, shape)
        assert not report.has_errors(), report.generate_report()


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
@COMMON
@given(data=st.data())
def test_the_check_accepts_well_formed_parameters(
    service: str, name: str, data: st.DataObject
) -> None:
    shape = _input(service, name)
    if shape is None:
        return
    if any(shape.members[m].type_name == "timestamp" for m in shape.required_members):
        return  # timestamps are always botocore's to check
    params = data.draw(values(shape, odd=False))
    assert not ParamValidator().validate(params, shape).has_errors()
    assert compile_check(shape)(params), params


def test_every_operation_compiles() -> None:
    # No DynamoDB input is left to botocore whole (documents, jsonvalue headers).
    for service, name in OPERATIONS:
        shape = _input(service, name)
        if shape is not None:
            compile_check(shape)


def test_a_bound_client_refuses_bad_parameters_as_botocore_does() -> None:
    engine = Engine()
    quick = local_client(engine)
    full = bind(local_client(engine), engine, full_stack=True)
    assert isinstance(quick._serializer, QuickValidation)
    assert type(full._serializer) is ParamValidationDecorator  # botocore's whole path
    bad = [
        {"TableName": "t1", "Item": {"pk": {"S": 1}}},
        {"TableName": "t1", "Item": {"pk": {"S": _Text("a")}}, "Unknown": 1},
        {"Item": {"pk": {"S": "a"}}},
        {"TableName": "", "Item": {"pk": {"N": True}}},
    ]
    for params in bad:
        messages = []
        for client in (quick, full):
            with pytest.raises(ParamValidationError) as info:
                client.put_item(**params)
            messages.append(str(info.value))
        assert messages[0] == messages[1]
    unbind(quick)
    assert type(quick._serializer) is ParamValidationDecorator
    engine.close()


def test_a_callers_own_validation_setting_is_kept() -> None:
    from botocore.config import Config

    engine = Engine()
    unvalidated = local_client(engine, config=Config(parameter_validation=False))
    assert not isinstance(unvalidated._serializer, (QuickValidation, ParamValidationDecorator))
    with pytest.raises(Exception) as info:  # the engine refuses it instead, as AWS would
        unvalidated.put_item(TableName="t1", Item={"pk": {"S": 1}})
    assert not isinstance(info.value, ParamValidationError)
    engine.close()
