"""DynamoDB's JSON 1.0 wire protocol, without the HTTP: decode a request, answer it, encode it.

Beside the front door (:mod:`.api`), shared by the three ways in, so a request is answered the
same way whichever way it came in: the HTTP server (:mod:`.server`) and the boto3 binding
(:mod:`.binding`) answer with :func:`wire_call`, which takes the ``X-Amz-Target`` and the body
and returns the HTTP status and the response body; :func:`response_headers` gives the headers
DynamoDB sends with it (content type, request id, CRC32); :func:`decode_body` undoes a body's
``Content-Encoding``; the direct client (:mod:`.direct`) takes its request ids from here.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import secrets
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import DynamoDBError
from .operations.account import SERVED_ADDRESS
from .values import to_wire

if TYPE_CHECKING:
    from .context import Host, Service

__all__ = [
    "CONTENT_TYPE",
    "JSON_CONTENT_TYPES",
    "MAX_BODY_BYTES",
    "TARGETS",
    "Answer",
    "BodyTooLarge",
    "Decode",
    "decode_body",
    "dumps",
    "loads",
    "new_request_id",
    "response_headers",
    "wire_call",
]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/x-amz-json-1.0"
# The content types DynamoDB reads a body as JSON with (bare, lower case).
JSON_CONTENT_TYPES = frozenset({b"application/x-amz-json-1.0", b"application/json"})
MAX_BODY_BYTES = 16 * 1024 * 1024  # DynamoDB's own request limit

TARGETS: dict[str, Service] = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "streams",
}


# --- request ids -----------------------------------------------------------------------------

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_id_prefix = ""
_id_counter = itertools.count()


def _reset_request_ids() -> None:
    global _id_prefix, _id_counter
    _id_prefix = "".join(secrets.choice(_ID_ALPHABET) for _ in range(20))
    _id_counter = itertools.count()


_reset_request_ids()
os.register_at_fork(after_in_child=_reset_request_ids)  # a child must not repeat the parent's


def new_request_id() -> str:
    """A unique DynamoDB-style request id: 52 characters of ``[A-Z0-9]``.

    A random per-process prefix and a counter: unique, and far cheaper than 52 random
    characters per call (which cost as much as a whole direct-client call).
    """
    return f"{_id_prefix}{next(_id_counter):032X}"


# --- content codings -------------------------------------------------------------------------

# DynamoDB reads request bodies compressed with ``gzip`` or ``deflate`` (the zlib format, RFC
# 9110), as the AWS SDKs' request compression sends them. As observed on the service (ScyllaDB's
# Alternator tests, test_compressed_request.py, run against AWS in 2025-11/12; PRs
# scylladb#27049, #27917, #28820):
#
# * a valid gzip body (several members one after another included) or deflate body is answered
#   as its decoded JSON; the signature covers the bytes sent (compressed);
# * an unknown coding, a body that is not valid data of its coding (an empty one included), or
#   two deflate streams one after another: HTTP 500 ``InternalServerError``, nothing applied;
# * a body that decodes past the request size limit is refused (DynamoDB fixed its
#   "decompression bomb" in 2026); the HTTP server answers it with the 413 of any body over the
#   limit.
#
# Two differences, on purpose. A body the engine cannot decode is bad input, so it gets a 400
# ``SerializationException`` naming what is wrong, not DynamoDB's 500: SDKs retry a 500, and
# would resend the same broken bytes up to their retry limit (bad input is a 4xx, never a 5xx).
# And DynamoDB ignores junk after a valid gzip member (a bug, per the same tests); the engine
# refuses it like any other broken body.

_GZIP = 16 + zlib.MAX_WBITS  # zlib's window bits for the gzip container
_DEFLATE = zlib.MAX_WBITS  # the zlib container: RFC 9110's "deflate"
_CHUNK = 64 * 1024


class BodyTooLarge(Exception):
    """A request body that decodes past the size limit (the HTTP server answers 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request bodies are limited to {limit} bytes, decoded")
        self.limit = limit


def _broken(why: str) -> DynamoDBError:
    return DynamoDBError("SerializationException", f"The request body could not be decoded: {why}")


def decode_body(body: bytes, codings: bytes, limit: int) -> bytes:
    """``body`` with its content codings (``gzip``, ``deflate``, ``identity``; a list is
    undone last to first) removed. Raises a SerializationException for anything it cannot
    decode and :class:`BodyTooLarge` when the result would pass ``limit`` bytes."""
    names = [c.strip().lower() for c in codings.split(b",")]
    for name in reversed(names):
        if name == b"identity":
            continue
        if name == b"gzip":
            body = _inflate(body, _GZIP, limit, members=True)
        elif name == b"deflate":
            body = _inflate(body, _DEFLATE, limit, members=False)
        else:
            raise _broken(f"unsupported Content-Encoding {name.decode('latin-1')!r}")
    return body


def _inflate(data: bytes, wbits: int, limit: int, *, members: bool) -> bytes:
    """Decode ``data`` (one stream, or for gzip one member after another), never holding
    more than ``limit`` + 1 decoded bytes."""
    out: list[bytes] = []
    size = 0
    rest = data
    try:
        while True:
            inflater = zlib.decompressobj(wbits)
            pending = rest
            while not inflater.eof:
                chunk = inflater.decompress(pending, min(_CHUNK, limit + 1 - size))
                pending = inflater.unconsumed_tail
                if not chunk and not pending:
                    break  # no progress: the data ended before the stream did
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge(limit)
                out.append(chunk)
            if not inflater.eof:
                raise _broken("the compressed data ends early")  # truncated, or empty
            rest = inflater.unused_data
            if not rest:
                return b"".join(out)
            if not members:
                raise _broken("data after the end of the deflate stream")  # as DynamoDB
    except zlib.error as exc:
        raise _broken(f"invalid compressed data ({exc})") from None


# --- bodies ----------------------------------------------------------------------------------


# Bodies from this size on are decoded with hooks that return to the interpreter at every
# object and number, so the thread decoding them lets the event loop run: the C decoder holds
# the GIL throughout (a 16 MiB body of tiny values: a quarter of a second or more).
YIELDING_DECODE_BYTES = 256 * 1024

# A \uD800-\uDFFF escape not preceded by an escaped backslash: half of a surrogate pair (or a
# lone half). Group 1 is set when a low half follows a high one.
_SURROGATE_ESCAPE = re.compile(
    r"(?<!\\)(?:\\\\)*\\u[dD]([89abAB][0-9a-fA-F]{2}(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|[c-fC-F][0-9a-fA-F]{2})"
)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def _int(text: str) -> int:
    return int(text)


def _float(text: str) -> float:
    return float(text)


# Python hooks: the decoder returns to the interpreter at every object and number, where a
# thread waiting for the GIL gets it.
_YIELDING = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=_int, parse_float=_float)


def loads(body: bytes | bytearray | str, *, yielding: bool = True) -> Any:
    """The request body's JSON value, or ``ValueError`` for a body DynamoDB cannot read.

    Refused: invalid JSON, text that is not UTF-8/16/32 (a lone surrogate, encoded or as a
    ``\\uD800`` escape, included: no Unicode encoding can carry one), and JSON nested deeper than
    the decoder's recursion allows (about a thousand levels; DynamoDB's items nest 32 at most).
    ``yielding=False``: a big body is decoded in one C call all the same (the same value).
    """
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    try:
        # Strict decoding: no encoded surrogates, no invalid bytes. A body starting with "{" is
        # UTF-8 (what json.detect_encoding would say, without its cost).
        utf8 = raw[:1] == b"{" and raw[1:2] != b"\x00"
        text = raw.decode("utf-8" if utf8 else json.detect_encoding(raw))
        if ("\\ud" in text or "\\uD" in text) and _lone_surrogate_escape(text):
            raise ValueError("a lone surrogate escape")
        if not yielding or len(raw) < YIELDING_DECODE_BYTES:
            return json.loads(text)
        return _YIELDING.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _lone_surrogate_escape(text: str) -> bool:
    for match in _SURROGATE_ESCAPE.finditer(text):
        if match.group(1)[:1] in "cdefCDEF" or match.group(2) is None:
            return True
    return False


# One encoder for every response: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=to_wire)


# Members that can carry many items (Query, Scan, BatchGetItem, TransactGetItems, GetRecords):
# encoded an element at a time, as the C encoder holds the GIL for the whole value it is given
# (every other thread waits for the whole of a 16 MB BatchGetItem answer; see docs/engine.md).
_COLLECTIONS = frozenset({"Items", "Responses", "Records", "UnprocessedKeys", "UnprocessedItems"})


def dumps(value: Any) -> bytes:
    """A response dict as DynamoDB's compact JSON (``B`` values as base64)."""
    if type(value) is dict:
        if not value:
            return b"{}"  # the commonest response (PutItem, DeleteItem, UpdateItem, no returns)
        if not _COLLECTIONS.isdisjoint(value):
            encode = _ENCODER.encode
            members = [
                encode(k) + ":" + (_encode_collection(v) if k in _COLLECTIONS else encode(v))
                for k, v in value.items()
            ]
            return ("{" + ",".join(members) + "}").encode()
    return _ENCODER.encode(value).encode()


def _encode_collection(value: Any) -> str:
    """``_ENCODER.encode(value)``, one C call per item of its lists (per table, per item)."""
    if type(value) is list:
        return "[" + ",".join(map(_ENCODER.encode, value)) + "]"
    if type(value) is dict:
        encode = _ENCODER.encode
        return (
            "{" + ",".join(encode(k) + ":" + _encode_collection(v) for k, v in value.items()) + "}"
        )
    return _ENCODER.encode(value)


# DynamoDB answers unparseable JSON with a bare __type (no message member).
SERIALIZATION_BODY = b'{"__type":"com.amazon.coral.service#SerializationException"}'
UNKNOWN_OPERATION_BODY = b'{"__type":"com.amazon.coral.service#UnknownOperationException"}'
INTERNAL_BODY = dumps(DynamoDBError("InternalServerError", "Internal server error").wire_body())


# How wire_call reads a body (loads by default): a request, or an Answer.
Decode = Callable[[bytes | bytearray | str], Any]


@dataclass(frozen=True)
class Answer:
    """What a ``decode`` function of :func:`wire_call` returns for a request whose answer is
    already known (:mod:`.server.screening`): it is given once the target and signature are
    checked."""

    status: int
    payload: bytes


def note_served_address(address: str | None) -> None:
    """Answer DescribeEndpoints, in this thread or task, with ``address`` (the ``Host`` a call
    reached); ``None``: DynamoDB's regional endpoint name."""
    SERVED_ADDRESS.set(address)


def wire_call(
    engine: Host,
    target: str | None,
    body: bytes | bytearray | str | None,
    region: str | None = None,
    authorize: Callable[[], str] | None = None,
    decode: Decode | None = None,
    caller: str | None = None,
) -> tuple[int, bytes]:
    """Answer one DynamoDB JSON 1.0 request: ``(HTTP status, response body)``.

    Checks run in DynamoDB's order: the JSON body, then the target, then ``authorize`` (which
    returns the region of a verified signature or raises), then the engine. Anything the
    engine did not anticipate becomes DynamoDB's 500 ``InternalServerError``. ``decode``
    (default :func:`loads`) turns the body into the request, or an :class:`Answer`.
    ``caller``: the access key ``authorize`` verifies (resource policies apply to it).
    """
    try:
        try:
            request = (decode or loads)(body) if body else {}
        except ValueError:
            return 400, SERIALIZATION_BODY
        prefix, _, operation = (target or "").partition(".")
        service = TARGETS.get(prefix)
        if service is None or not operation:
            return 400, UNKNOWN_OPERATION_BODY
        if authorize is not None:
            region = authorize()
        if type(request) is Answer:
            return request.status, request.payload
        result = engine.execute(
            operation, request, region=region, wire=True, service=service, caller=caller
        )
        return 200, dumps(result)
    except DynamoDBError as error:
        return error.status, dumps(error.wire_body())
    except Exception:
        log.exception("engine failed on %s", target)
        return 500, INTERNAL_BODY


_CONTENT_TYPE_HEADER = (b"content-type", CONTENT_TYPE.encode())


def response_headers(payload: bytes) -> list[tuple[bytes, bytes]]:
    """The headers DynamoDB answers ``payload`` with: type, length, request id, CRC32."""
    return [
        _CONTENT_TYPE_HEADER,
        (b"content-length", b"%d" % len(payload)),
        (b"x-amzn-requestid", new_request_id().encode()),
        (b"x-amz-crc32", b"%d" % zlib.crc32(payload)),
    ]
