"""The quick path's parse: botocore's parsed response, built from the engine's own answer.

The quick path (:func:`~.steps.quick_steps`) answers with the engine's wire answer, which
botocore's parser would turn back from JSON into the dict the engine returned (twice for a
modeled error). :class:`Shortcut` builds the same dict from the engine's answer: one converter
per botocore shape, compiled once, applying ``BaseJSONParser``'s rules (members in the model's
order, ``None`` and unknown members dropped, lists kept sparse, blobs and timestamps through the
parser's own functions, ``ResponseMetadata`` from the same headers).

It is taken only where its result is provably the parser's: values whose JSON round trip is the
identity, an answer the ``before-parse`` hooks left as it was, botocore's (or aiobotocore's) own
JSON parser. Anything else gives up and the client's parser runs on the body as before. Every
container is built anew: nothing the caller gets is shared with the engine.
``tests/engine/binding/test_binding_parse.py`` checks the equivalence, errors included, for every
operation's output and error shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from botocore.model import Shape
from botocore.parsers import JSONParser, ResponseParser
from botocore.utils import lowercase_dict

from ..errors import DynamoDBError
from ..values import to_wire
from ..wire import wire_call

if TYPE_CHECKING:
    from ..api import Engine

__all__ = ["Answer", "Shortcut", "wire_answer"]

Outcome: TypeAlias = "dict[str, Any] | DynamoDBError | None"
Convert = Callable[[Any], Any]


@dataclass(slots=True, frozen=True)
class Answer:
    """One engine call over the wire protocol: the status and body sent, and what the engine
    itself answered (its response dict or its error; ``None`` when the engine never ran, e.g.
    an unreadable body)."""

    status: int
    payload: bytes
    outcome: Outcome


class _Kept:
    """The engine as ``wire_call`` sees it, keeping the engine's answer for the shortcut."""

    __slots__ = ("engine", "outcome")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.outcome: Outcome = None

    def execute(self, operation: str, request: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            result = self.engine.execute(operation, request, **kwargs)
        except DynamoDBError as error:
            self.outcome = error
            raise
        self.outcome = result
        return result


def wire_answer(
    engine: Engine,
    target: str | None,
    body: bytes | str | None,
    region: str,
    request: dict[str, Any] | None = None,
) -> Answer:
    """``wire_call``'s answer, with the engine's own answer kept beside it.

    ``request``: the body's JSON value, known already (see
    :func:`.serialize.parameters_of`), read in place of decoding the body."""
    kept = _Kept(engine)
    decode = None if request is None else _Known(request)
    status, payload = wire_call(cast("Engine", kept), target, body, region, decode=decode)
    outcome = kept.outcome
    if isinstance(outcome, DynamoDBError):
        # The error's traceback holds the engine's frames, one of which holds ``kept``, which
        # holds the error: a cycle only the garbage collector frees. Only its body is read.
        outcome.__traceback__ = None
    return Answer(status, payload, outcome)


class _Known:
    """A ``wire_call`` decoder that returns the body's JSON value, known beforehand."""

    __slots__ = ("request",)

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request

    def __call__(self, _body: Any) -> dict[str, Any]:
        return self.request


class _GiveUp(Exception):
    """A value whose JSON round trip is not the identity: let the parser decide."""


def _give_up(_value: Any = None) -> Any:
    raise _GiveUp


def _scalar(value: Any) -> Any:
    """What the parser's default handler returns for ``value`` after its JSON round trip."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool:
        return value  # NaN and the infinities too: JSON writes and reads them back as they are
    raise _GiveUp


class Shortcut:
    """One parser's results for engine answers, without the JSON (see the module docs).

    Only for the exact JSON parsers whose rules it mirrors: :meth:`for_parser` says ``None``
    for any other.
    """

    def __init__(self, parser: ResponseParser) -> None:
        self._timestamp = parser._timestamp_parser
        blob = parser._blob_parser
        default_blob = getattr(blob, "__func__", None) is ResponseParser._default_blob_parser
        self._blob: Convert = _blob_bytes if default_blob else _custom_blob(blob)
        self._converters: dict[str, Convert | None] = {}

    @staticmethod
    def for_parser(parser: Any) -> Shortcut | None:
        return Shortcut(parser) if type(parser) in _PARSERS else None

    def parse(
        self,
        response: dict[str, Any],
        shape: Shape | None,
        answer: Answer,
        lowered: dict[str, str] | None = None,
    ) -> Any:
        """``parser.parse(response, shape)``, or ``None`` where that is not provably it.

        ``lowered``: ``lowercase_dict(response["headers"])`` when the caller knows it (the
        headers are the ones the response was made with), read in place of the headers."""
        status = response["status_code"]
        headers = response["headers"] if lowered is None else lowered
        if response["body"] is not answer.payload or status != answer.status:
            return None  # a before-parse hook changed the answer
        outcome = answer.outcome
        try:
            if status < 301:
                if type(outcome) is not dict:
                    return None
                if shape is None:
                    parsed: dict[str, Any] = {}
                else:
                    if shape.serialization.get("eventstream") or getattr(
                        shape, "event_stream_name", None
                    ):
                        return None
                    convert = self._converter(shape)
                    if convert is None:
                        return None
                    parsed = convert(outcome)
                self._request_id(parsed, headers)
            else:
                if not isinstance(outcome, DynamoDBError) or status >= 500:
                    return None  # 5xx: the parser's generic-error checks apply
                body = outcome.wire_body()
                if shape is not None and shape.metadata.get("exception", False):
                    convert = self._converter(shape)
                    return None if convert is None else convert(body)  # no metadata added
                parsed = self._error(body, headers)
        except _GiveUp:
            return None
        metadata = parsed.get("ResponseMetadata", {})
        metadata["HTTPStatusCode"] = status
        metadata["HTTPHeaders"] = lowercase_dict(headers) if lowered is None else dict(lowered)
        parsed["ResponseMetadata"] = metadata
        algorithm = response.get("context", {}).get("checksum", {}).get("response_algorithm")
        if algorithm:
            metadata["ChecksumAlgorithm"] = algorithm
        return parsed

    # -- BaseJSONParser's error parse and metadata ----------------------------------------------

    @staticmethod
    def _request_id(parsed: dict[str, Any], headers: Any) -> None:
        if "x-amzn-requestid" in headers:
            parsed.setdefault("ResponseMetadata", {})["RequestId"] = headers["x-amzn-requestid"]

    def _error(self, body: dict[str, Any], headers: Any) -> dict[str, Any]:
        if "x-amzn-query-error" in headers:
            raise _GiveUp
        message = _scalar(body.get("message", body.get("Message", "")))
        code = body.get("__type")
        if type(code) is not str:
            raise _GiveUp
        if ":" in code:
            code = code.split(":", 1)[0]
        if "#" in code:
            code = code.rsplit("#", 1)[1]
        error: dict[str, Any] = {"Error": {"Message": message, "Code": code}}
        error["ResponseMetadata"] = {}
        self._request_id(error, headers)
        return error

    # -- converters, one per shape ---------------------------------------------------------------

    def _converter(self, shape: Shape) -> Convert | None:
        name = shape.name
        if name not in self._converters:
            try:
                self._converters[name] = self._compile(shape, {})
            except _GiveUp:
                self._converters[name] = None
        return self._converters[name]

    def _compile(self, shape: Shape, memo: dict[str, list[Convert]]) -> Convert:
        kind = shape.type_name
        if kind in ("string", "integer", "long", "double", "float", "boolean"):
            return _scalar
        if kind == "blob":
            return self._blob
        if kind == "timestamp":
            return self._timestamp_of
        if kind not in ("structure", "list", "map"):
            raise _GiveUp
        seen = memo.get(shape.name)
        if seen is not None:  # a recursive shape (AttributeValue): bound once compiled
            return lambda value: seen[0](value)
        cell: list[Convert] = [_give_up]
        memo[shape.name] = cell
        if kind == "structure":
            if shape.is_document_type or shape.is_tagged_union:
                raise _GiveUp
            members = {
                member.serialization.get("name", name): (index, name, self._compile(member, memo))
                for index, (name, member) in enumerate(shape.members.items())
            }
            cell[0] = _structure(members)
        elif kind == "list":
            cell[0] = _listing(self._compile(shape.member, memo))
        else:
            if shape.key.type_name != "string":
                raise _GiveUp
            cell[0] = _mapping(self._compile(shape.value, memo))
        return cell[0]

    def _timestamp_of(self, value: Any) -> Any:
        return self._timestamp(_scalar(value))


_PARSERS: set[type] = {JSONParser}
try:  # aiobotocore's (async parse, the same rules for a JSON body)
    from aiobotocore.parsers import AioJSONParser

    _PARSERS.add(AioJSONParser)
except ImportError:  # pragma: no cover - the async extra is not installed
    pass


def _blob_bytes(value: Any) -> bytes:
    # The engine's bytes, base64 on the wire, decoded by the default blob parser.
    kind = type(value)
    if kind is bytes:
        return cast(bytes, value)
    if kind is bytearray or kind is memoryview:
        return bytes(value)
    raise _GiveUp


def _custom_blob(blob: Callable[[Any], Any]) -> Convert:
    def convert(value: Any) -> Any:
        return blob(to_wire(_blob_bytes(value)))

    return convert


def _structure(members: dict[str, tuple[int, str, Convert]]) -> Convert:
    """``_handle_structure``: members in the model's order, ``None`` and unknown ones dropped."""
    lookup = members.get

    def convert(value: Any) -> Any:
        if type(value) is not dict:
            raise _GiveUp
        found = []
        for key, raw in value.items():
            if type(key) is not str:
                raise _GiveUp
            member = lookup(key)
            if member is not None and raw is not None:
                found.append((member[0], member[1], member[2], raw))
        if len(found) > 1:
            found.sort(key=_first)
        return {name: fn(raw) for _index, name, fn, raw in found}

    return convert


def _first(entry: tuple[int, str, Convert, Any]) -> int:
    return entry[0]


def _listing(item: Convert) -> Convert:
    """``_handle_list``: every element converted, ``None`` kept (lists are parsed sparse)."""

    def convert(value: Any) -> Any:
        if type(value) is not list:
            raise _GiveUp
        return [None if v is None else item(v) for v in value]

    return convert


def _mapping(item: Convert) -> Convert:
    """``_handle_map`` with string keys (the only keys DynamoDB's maps have)."""

    def convert(value: Any) -> Any:
        if type(value) is not dict:
            raise _GiveUp
        out = {}
        for key, raw in value.items():
            if type(key) is not str or raw is None:
                raise _GiveUp
            out[key] = item(raw)
        return out

    return convert
