"""The quick path's parameter validation: botocore's verdict on a request, compiled per shape.

botocore validates every call's parameters (``ParamValidator``) before it serialises them, by a
walk that re-reads the model at every value: on a bound client that walk costs about as much as
the engine's own work on a small PutItem. :class:`QuickValidation` stands in for the client's
``ParamValidationDecorator`` and first asks a check compiled once per input shape, which says
*valid* only where botocore's validator provably reports nothing: a ``dict`` with the required
members and no unknown ones, exactly one member of a tagged union, values of exactly the types
botocore accepts (``str``, ``int`` but not ``bool``, ``float``, ``bytes``...), string and list
lengths and numbers at or above the model's ``min``. Anything else (a wrong or subclassed type,
``None``, a ``Decimal``, a timestamp, a file-like blob, a document) is left to botocore's own
validator, which raises its ``ParamValidationError`` with its own report, exactly as before.
A shape the checks do not know is always left to it.

So every call is accepted or refused exactly as botocore would; only the cost of saying *valid*
changes. ``tests/engine/binding/test_binding_validate.py`` checks, for every operation's input shape and
for random well-formed and malformed parameters, that the check never says *valid* where
botocore's validator reports an error, and that it does say so for well-formed requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.model import OperationModel, Shape
from botocore.utils import is_json_value_header
from botocore.validate import ParamValidationDecorator, ParamValidator

from .serialize import JsonRequests

__all__ = ["QuickValidation", "compile_check"]

Check = Callable[[Any], bool]

# The exact Python types botocore's validator accepts for each scalar type (never a subclass:
# bool is an int, and left to botocore, as are Decimal and file-like blobs).
_EXACT: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "long": frozenset({int}),
    "float": frozenset({float, int}),
    "double": frozenset({float, int}),
    "boolean": frozenset({bool}),
    "blob": frozenset({bytes, bytearray, str}),
}
_SIZED = frozenset({"string"})  # scalars whose ``min`` is a length; numbers compare the value
# The scalars botocore's JSON serializer writes as they are (``_default_serialize``); a blob is
# base64-encoded, a float may become "NaN", a timestamp is converted.
_AS_IS = frozenset({"string", "integer", "long", "boolean"})


class _Unknown(Exception):
    """A shape the checks do not mirror: botocore's validator decides every value of it."""


def _never(_value: Any) -> bool:
    return False


def _minimum(shape: Shape) -> float | None:
    """What ``range_check`` compares against: ``min``, or 1 for a host label, or nothing."""
    if "min" in shape.metadata:
        return float(shape.metadata["min"])
    if shape.serialization.get("hostLabel"):
        return 1.0
    return None


def compile_check(shape: Shape, *, as_is: bool = False) -> Check:
    """A function of a value that is ``True`` only where ``ParamValidator().validate(value,
    shape)`` reports no error (``False`` says nothing: botocore's validator decides). Raises
    :class:`_Unknown` for a shape it does not mirror.

    ``as_is``: ``True`` only where, besides, botocore's JSON serializer would write the value
    as it is (no blob, float or timestamp in it, no member renamed, lists and not tuples), so
    that its JSON is the request body and reads back as the value itself (see
    :mod:`.serialize`)."""
    return _compile(shape, {}, as_is)


def _compile(
    shape: Shape, memo: dict[tuple[str, str, str], list[Check]], as_is: bool = False
) -> Check:
    if is_json_value_header(shape):
        raise _Unknown(shape.name)
    kind = shape.type_name
    if as_is and kind in _EXACT and kind not in _AS_IS:
        return _never
    if kind in _EXACT:
        return _scalar(_EXACT[kind], _minimum(shape), kind in _SIZED)
    if kind == "timestamp":
        return _never  # datetimes or strings that parse as one: botocore decides
    if kind not in ("structure", "list", "map") or (kind == "structure" and shape.is_document_type):
        raise _Unknown(shape.name)
    # A shape with the same name and traits has the same check (member traits are merged into
    # a member's shape, so the traits are part of the key).
    key = (shape.name, repr(shape.metadata), repr(shape.serialization))
    seen = memo.get(key)
    if seen is not None:  # a recursive shape (AttributeValue): bound once compiled
        return lambda value: seen[0](value)
    cell: list[Check] = [_never]
    memo[key] = cell
    if kind == "structure":
        if as_is and any("name" in m.serialization for m in shape.members.values()):
            raise _Unknown(shape.name)  # a renamed member: serialised under another name
        members = {name: _compile(member, memo, as_is) for name, member in shape.members.items()}
        required = tuple(shape.metadata.get("required", ()))
        cell[0] = _structure(members, required, bool(shape.is_tagged_union))
    elif kind == "list":
        # as is: a list only, which JSON reads back as it is (a tuple comes back a list)
        cell[0] = _listing(_compile(shape.member, memo, as_is), _minimum(shape), tuples=not as_is)
    else:
        cell[0] = _mapping(_compile(shape.key, memo, as_is), _compile(shape.value, memo, as_is))
    return cell[0]


def _scalar(types: frozenset[type], minimum: float | None, sized: bool) -> Check:
    if minimum is None:
        return lambda value: type(value) in types
    if sized:
        return lambda value: type(value) in types and not len(value) < minimum
    return lambda value: type(value) in types and not value < minimum


def _structure(members: dict[str, Check], required: tuple[str, ...], union: bool) -> Check:
    lookup = members.get

    def check(value: Any) -> bool:
        if type(value) is not dict or (union and len(value) != 1):
            return False
        for name in required:
            if name not in value:
                return False
        for name, member in value.items():
            member_check = lookup(name) if type(name) is str else None
            if member_check is None or not member_check(member):
                return False
        return True

    return check


def _listing(item: Check, minimum: float | None, *, tuples: bool = True) -> Check:
    def check(value: Any) -> bool:
        kind = type(value)
        if kind is not list and (kind is not tuple or not tuples):
            return False
        if minimum is not None and len(value) < minimum:
            return False
        for element in value:  # noqa: SIM110 - a loop: all() over a generator is slower here
            if not item(element):
                return False
        return True

    return check


def _mapping(key: Check, item: Check) -> Check:
    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name, element in value.items():  # noqa: SIM110 - as above
            if not (key(name) and item(element)):
                return False
        return True

    return check


class QuickValidation:
    """A client's ``ParamValidationDecorator`` with its validator's verdict compiled per input
    shape (see the module docs); :meth:`wrap` installs it only over botocore's own validator."""

    def __init__(self, decorated: ParamValidationDecorator) -> None:
        self.decorated = decorated
        self._serializer = decorated._serializer
        self._json = JsonRequests.for_serializer(self._serializer)
        # input shape name -> (its check, its as-is check); None: left to botocore
        self._checks: dict[str, tuple[Check | None, Check | None]] = {}

    @staticmethod
    def wrap(serializer: Any) -> Any:
        """``serializer`` with quick validation, if it is botocore's validating decorator around
        botocore's own validator; anything else (validation off, a validator of the caller's
        own, already wrapped) is returned as it is."""
        if type(serializer) is not ParamValidationDecorator:
            return serializer
        if type(serializer._param_validator) is not ParamValidator:
            return serializer
        return QuickValidation(serializer)

    def _compiled(self, shape: Shape) -> tuple[Check | None, Check | None]:
        checks = self._checks.get(shape.name)
        if checks is None:
            try:
                check: Check | None = compile_check(shape)
            except _Unknown:
                check = None
            try:
                as_is = (
                    None
                    if check is None or self._json is None
                    else compile_check(shape, as_is=True)
                )
            except _Unknown:
                as_is = None
            checks = self._checks[shape.name] = (check, as_is)
        return checks

    def serialize_to_request(
        self, parameters: Any, operation_model: OperationModel
    ) -> dict[str, Any]:
        shape = operation_model.input_shape
        if shape is not None:
            check, as_is = self._compiled(shape)
            if as_is is not None and as_is(parameters):
                # valid, and written as it is: its JSON is the body (see .binding_serialize)
                assert self._json is not None
                request = self._json.request(parameters, operation_model)
                if request is not None:
                    return request
            elif check is None or not check(parameters):
                # botocore's own validator: the same acceptance, its own report when refused
                result: dict[str, Any] = self.decorated.serialize_to_request(
                    parameters, operation_model
                )
                return result
        serialized: dict[str, Any] = self._serializer.serialize_to_request(
            parameters, operation_model
        )
        return serialized
