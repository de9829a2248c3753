"""DynamoDB's JSON 1.0 wire protocol, without the HTTP: decode a request, answer it, encode it.

Shared by the HTTP server (:mod:`.server`) and the boto3 binding (:mod:`.binding`), so a request
is answered the same way whichever way it came in: :func:`wire_call` takes the ``X-Amz-Target``
and the body and returns the HTTP status and the response body; :func:`response_headers` gives
the headers DynamoDB sends with it (content type, request id, CRC32).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import DynamoDBError
from .values import to_wire

if TYPE_CHECKING:
    from .api import Engine, Service

__all__ = [
    "CONTENT_TYPE",
    "JSON_CONTENT_TYPES",
    "MAX_BODY_BYTES",
    "TARGETS",
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


# --- bodies ----------------------------------------------------------------------------------


def loads(body: bytes | str) -> Any:
    """The request body's JSON value (``ValueError`` if it is not JSON)."""
    if type(body) is bytes and body[:1] == b"{" and body[1:2] != b"\x00":
        # What json.loads does with such bytes (its encoding sniffing says UTF-8), minus the
        # sniffing.
        return json.loads(body.decode("utf-8", "surrogatepass"))
    return json.loads(body)


# One encoder for every response: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=to_wire)


def dumps(value: Any) -> bytes:
    """A response dict as DynamoDB's compact JSON (``B`` values as base64)."""
    if type(value) is dict and not value:
        return b"{}"  # the commonest response (PutItem, DeleteItem, UpdateItem without returns)
    return _ENCODER.encode(value).encode()


# DynamoDB answers unparseable JSON with a bare __type (no message member).
SERIALIZATION_BODY = b'{"__type":"com.amazon.coral.service#SerializationException"}'
UNKNOWN_OPERATION_BODY = b'{"__type":"com.amazon.coral.service#UnknownOperationException"}'
INTERNAL_BODY = dumps(DynamoDBError("InternalServerError", "Internal server error").wire_body())


def wire_call(
    engine: Engine,
    target: str | None,
    body: bytes | str | None,
    region: str | None = None,
    authorize: Callable[[], str] | None = None,
) -> tuple[int, bytes]:
    """Answer one DynamoDB JSON 1.0 request: ``(HTTP status, response body)``.

    Checks run in DynamoDB's order: the JSON body, then the target, then ``authorize`` (which
    returns the region of a verified signature or raises), then the engine. Anything the
    engine did not anticipate becomes DynamoDB's 500 ``InternalServerError``.
    """
    try:
        try:
            request = loads(body) if body else {}
        except ValueError:
            return 400, SERIALIZATION_BODY
        prefix, _, operation = (target or "").partition(".")
        service = TARGETS.get(prefix)
        if service is None or not operation:
            return 400, UNKNOWN_OPERATION_BODY
        if authorize is not None:
            region = authorize()
        result = engine.execute(operation, request, region=region, wire=True, service=service)
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
