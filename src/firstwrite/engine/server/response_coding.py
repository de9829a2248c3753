"""Compressed answers: gzip or deflate when the client's ``Accept-Encoding`` asks, as DynamoDB.

DynamoDB compresses an answer larger than :data:`THRESHOLD` bytes with gzip or deflate (zlib
format) when the request's ``Accept-Encoding`` accepts one (ScyllaDB's
test_compressed_response.py records DynamoDB's choices: :func:`chosen_coding` follows them);
smaller answers, and every answer to a request without the header, go out as they are.
Botocore and the other SDKs send ``Accept-Encoding: identity`` (or nothing) unless told
otherwise, so only clients that ask, such as browsers, see compressed answers.

The ``x-amz-crc32`` header of a compressed answer is the CRC32 of the bytes sent (the
compressed ones), as the SDKs check it: botocore reads the body undecoded, and the AWS SDK for
Java computes DynamoDB's CRC32 "from compressed data" by default.
"""

from __future__ import annotations

import functools
import math
import zlib

from .asgi import Message

__all__ = ["THRESHOLD", "chosen_coding", "encoded"]

THRESHOLD = 4096  # answers larger than this many bytes are compressed (DynamoDB's 4 KB)
LEVEL = 6  # zlib's default trade-off (ScyllaDB's Alternator default too)
_CODINGS = (b"gzip", b"deflate")  # DynamoDB's preference when both are equally acceptable
_REPLACED = frozenset({b"content-length", b"x-amz-crc32"})


@functools.lru_cache(maxsize=256)  # clients send the same header with every request
def chosen_coding(accept: bytes) -> bytes | None:
    """The coding (``b"gzip"``, ``b"deflate"``) for an answer to a request whose first
    ``Accept-Encoding`` header is ``accept``, or None (send it as it is).

    DynamoDB's reading, as recorded: entries are comma-separated, names case-insensitive and
    trimmed; an entry's quality is its first parameter containing ``q=`` (an unparsable value
    counts as 1, values are clamped to [0, 1], 0 refuses); a coding named twice takes its best
    quality; ``*`` gives its quality to the codings not named; ``identity`` and other codings
    are ignored. The best quality wins; on a tie, a named coding before one reached by ``*``,
    then the one named first, then gzip.
    """
    named: dict[bytes, tuple[float, int]] = {}  # coding -> (quality, position)
    wildcard: float | None = None
    entries = accept.split(b",")
    for position, entry in enumerate(entries):
        name, *parameters = entry.split(b";")
        name = name.strip().lower()
        quality = 1.0
        for parameter in parameters:
            at = parameter.lower().find(b"q=")
            if at >= 0:
                quality = _quality(parameter[at + 2 :])
                break
        if name == b"*":
            wildcard = quality if wildcard is None else max(wildcard, quality)
        elif name in _CODINGS:
            known = named.get(name)
            if known is None or quality > known[0]:
                named[name] = (quality, position)
    best: tuple[float, int] | None = None
    chosen = None
    for rank, coding in enumerate(_CODINGS):
        offer = named.get(coding)
        if offer is None and wildcard is not None:
            offer = (wildcard, len(entries) + rank)  # after every named coding
        if offer is None or offer[0] <= 0:
            continue
        if best is None or offer[0] > best[0] or (offer[0] == best[0] and offer[1] < best[1]):
            best, chosen = offer, coding
    return chosen


def _quality(text: bytes) -> float:
    try:
        quality = float(text)
    except ValueError:
        return 1.0
    if math.isnan(quality):
        return 1.0
    return min(1.0, max(0.0, quality))


def encoded(start: Message, payload: bytes, coding: bytes) -> tuple[Message, bytes]:
    """The answer ``(start, payload)`` compressed with ``coding``: its length and CRC32 those
    of the compressed bytes, with ``Content-Encoding``."""
    if coding == b"gzip":
        body = zlib.compress(payload, LEVEL, wbits=31)
    else:
        body = zlib.compress(payload, LEVEL)
    headers = [pair for pair in start["headers"] if pair[0] not in _REPLACED]
    headers += [
        (b"content-encoding", coding),
        (b"content-length", b"%d" % len(body)),
        (b"x-amz-crc32", b"%d" % zlib.crc32(body)),
    ]
    return {**start, "headers": headers}, body
