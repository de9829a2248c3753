"""Request bodies sent with ``Content-Encoding``: decoded as DynamoDB decodes them.

DynamoDB reads request bodies compressed with ``gzip`` or ``deflate`` (the zlib format, RFC
9110), as the AWS SDKs' request compression sends them. As observed on the service (ScyllaDB's
Alternator tests, test_compressed_request.py, run against AWS in 2025-11/12; PRs
scylladb#27049, #27917, #28820):

* a valid gzip body (several members one after another included) or deflate body is answered
  as its decoded JSON; the signature covers the bytes sent (compressed);
* an unknown coding, a body that is not valid data of its coding (an empty one included), or
  two deflate streams one after another: HTTP 500 ``InternalServerError``, nothing applied;
* a body that decodes past the request size limit is refused (DynamoDB fixed its "decompression
  bomb" in 2026); here it is the 413 of any body over the limit.

Two differences, on purpose. A body the engine cannot decode is bad input, so it gets a 400
``SerializationException`` naming what is wrong, not DynamoDB's 500: SDKs retry a 500, and would
resend the same broken bytes up to their retry limit (bad input is a 4xx, never a 5xx). And
DynamoDB ignores junk after a valid gzip member (a bug, per the same tests); the engine refuses
it like any other broken body.
"""

from __future__ import annotations

import zlib

from ..errors import DynamoDBError
from .asgi import Message, Problem, Scope, header
from .wire import dumps, response_headers

__all__ = ["decode_body", "decoded_body"]

_GZIP = 16 + zlib.MAX_WBITS  # zlib's window bits for the gzip container
_DEFLATE = zlib.MAX_WBITS  # the zlib container: RFC 9110's "deflate"
_CHUNK = 64 * 1024


def _broken(why: str) -> DynamoDBError:
    return DynamoDBError("SerializationException", f"The request body could not be decoded: {why}")


def decode_body(body: bytes, codings: bytes, limit: int) -> bytes:
    """``body`` with its content codings (``gzip``, ``deflate``, ``identity``; a list is
    undone last to first) removed. Raises a SerializationException for anything it cannot decode and
    a 413 :class:`~.asgi.Problem` when the result would pass ``limit`` bytes."""
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
                    raise Problem(
                        413,
                        "Payload Too Large",
                        f"Request bodies are limited to {limit} bytes, decoded",
                    )
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


def decoded_body(
    scope: Scope, body: bytes, limit: int
) -> tuple[bytes, None] | tuple[None, tuple[Message, bytes]]:
    """The HTTP server's part: ``(decoded body, None)``, or ``(None, (start, payload))``, the
    answer refusing it (a 400 SerializationException, or the 413 problem)."""
    codings = header(scope, b"content-encoding")
    if codings is None:
        return body, None
    try:
        return decode_body(body, codings, limit), None
    except Problem as refusal:
        status, headers, payload = refusal.encode()
    except DynamoDBError as error:
        payload = dumps(error.wire_body())
        status, headers = error.status, response_headers(payload)
    return None, ({"type": "http.response.start", "status": status, "headers": headers}, payload)
