"""engine/wire.py's content codings, as every way in reads them: a body decoded (gzip with
several members, deflate, a list undone last to first), refused with a SerializationException
when it cannot be, and with :class:`BodyTooLarge` (the HTTP server's 413) past the limit. The
server's answers to the same bodies are in tests/engine/server/test_request_bodies.py."""

from __future__ import annotations

import gzip
import zlib

import pytest

from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.wire import BodyTooLarge, decode_body

BODY = b'{"TableName":"t","Item":{"pk":{"S":"a"}}}'


def test_bodies_are_decoded_as_their_codings_say() -> None:
    assert decode_body(gzip.compress(BODY), b"gzip", 1024) == BODY
    assert decode_body(gzip.compress(BODY[:10]) + gzip.compress(BODY[10:]), b"GZIP", 1024) == BODY
    assert decode_body(zlib.compress(BODY), b"deflate", 1024) == BODY
    assert decode_body(BODY, b"identity", 1024) == BODY
    twice = gzip.compress(zlib.compress(BODY))
    assert decode_body(twice, b"deflate, gzip", 1024) == BODY  # the last coding applied first


@pytest.mark.parametrize(
    ("body", "coding", "why"),
    [
        (BODY, b"br", "unsupported Content-Encoding 'br'"),
        (gzip.compress(BODY, mtime=0)[:-5], b"gzip", "the compressed data ends early"),
        (b"", b"gzip", "the compressed data ends early"),
        (zlib.compress(BODY) * 2, b"deflate", "data after the end of the deflate stream"),
        (b"not compressed at all", b"deflate", "invalid compressed data"),
    ],
)
def test_a_body_that_cannot_be_decoded_is_a_serialization_exception(
    body: bytes, coding: bytes, why: str
) -> None:
    with pytest.raises(DynamoDBError) as caught:
        decode_body(body, coding, 1024)
    assert caught.value.code == "SerializationException"
    assert str(caught.value).startswith(f"The request body could not be decoded: {why}")


def test_a_body_that_decodes_past_the_limit_is_too_large() -> None:
    big = gzip.compress(b" " * 10_000)
    assert decode_body(big, b"gzip", 10_000) == b" " * 10_000  # the limit itself fits
    with pytest.raises(BodyTooLarge) as caught:
        decode_body(big, b"gzip", 9_999)
    assert caught.value.limit == 9_999
    assert str(caught.value) == "Request bodies are limited to 9999 bytes, decoded"
