"""Replaying a stored response from a result store in chunks, never whole in memory.

A response over the record's inline limit is kept in the guard's result store
(:mod:`firstwrite.idempotency.result_placement`); its object holds the response's stored form
(:mod:`firstwrite.shared.http_reply`: a metadata line, then the body) as raw or zlib-compressed
bytes. :func:`streamed` reads it as the store gives it (the size checked before the first
chunk, the SHA-256 after the last: a body whose digest fails is cut short, never completed),
decompresses as it goes, and yields the body after the metadata line. A sealed object is
opened whole (AES-GCM authenticates the whole message) and is not streamed.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import firstwrite.shared.http_reply as http_reply
from firstwrite.idempotency import Replay, SerializationError

_RAW = 2
_ZRAW = 3
CHUNK = 256 * 1024


@dataclass
class StreamedReply:
    """A replayed response whose body comes in chunks: ``length`` is its size when known
    (a raw object), else ``None`` (a compressed one: sent without ``Content-Length``)."""

    status: int
    reason: str | None
    headers: list[tuple[str, str]]
    chunks: Iterator[bytes]
    length: int | None


def streamed(replay: Replay) -> StreamedReply | None:
    """``replay``'s response streamed from its store, or ``None`` when it is not an unsealed
    response in a result store (then :meth:`~firstwrite.idempotency.Replay.value` reads it)."""
    placement, raw = replay.placement, replay.raw_result
    if placement is None or not isinstance(raw, bytes) or replay.status.value != "COMPLETED":
        return None
    found = placement.stream(raw, replay.record_id, CHUNK)
    if found is None:
        return None
    size, chunks = found
    first = next(chunks, b"")
    if not first or first[0] not in (_RAW, _ZRAW):
        raise SerializationError(f"record {replay.record_id} does not hold an HTTP response")
    body = _decompressed(first[1:], chunks) if first[0] == _ZRAW else _chained(first[1:], chunks)
    head = b""
    for piece in body:
        head += piece
        if b"\n" in head:
            break
    meta, sep, rest = head.partition(b"\n")
    try:
        reply = http_reply.decode(meta + sep)
    except ValueError as exc:
        raise SerializationError(str(exc)) from exc
    length = size - 1 - len(meta) - 1 if first[0] == _RAW else None
    return StreamedReply(reply.status, reply.reason, reply.headers, _chained(rest, body), length)


def _chained(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _decompressed(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    """The inflated bytes of zlib ``first`` + ``rest``, at most :data:`CHUNK` bytes a piece
    (a small compressed chunk can hold a very large body)."""
    inflate = zlib.decompressobj()
    try:
        for chunk in _chained(first, rest):
            data = chunk
            while data:
                out = inflate.decompress(data, CHUNK)
                if out:
                    yield out
                data = inflate.unconsumed_tail
        tail = inflate.flush()
        if tail:
            yield tail
    except zlib.error as exc:
        raise SerializationError(f"stored result is corrupt: {exc}") from exc
