"""Results held in a file rather than in memory: a few leading bytes, then a file's bytes.

A :class:`SpooledResult` is what the HTTP middleware completes a claim with when the response
it captured went to a temporary file (past ``HttpConfig.spool_threshold``). The layer stores
it as raw bytes (tag ``0x02``, not compressed) and a result store that can stream
(:class:`~firstwrite.idempotency.result_store.StreamingResultStore`) writes its object from
the file in chunks, so the result is never whole in memory. Where the whole value is needed
(a cipher seals it in one piece; a store that cannot stream; a result small enough for the
record) :meth:`SpooledResult.read` reads it.

The file is read with ``os.pread`` (never its position), so readers do not disturb each other
or its writer; the file belongs to whoever made it (the middleware closes it).
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from typing import BinaryIO

CHUNK = 1 << 20


class SpooledResult:
    """``head`` followed by the first ``body_size`` bytes of ``file`` (a real file: it needs
    a ``fileno``)."""

    __slots__ = ("body_size", "file", "head")

    def __init__(self, head: bytes, file: BinaryIO, body_size: int) -> None:
        self.head = head
        self.file = file
        self.body_size = body_size

    def __len__(self) -> int:
        return len(self.head) + self.body_size

    def __repr__(self) -> str:
        return f"<SpooledResult: {len(self)} bytes, {self.body_size} in a file>"

    def with_head(self, prefix: bytes) -> SpooledResult:
        """The same bytes with ``prefix`` before them."""
        return SpooledResult(prefix + self.head, self.file, self.body_size)

    def chunks(self, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """The bytes, ``head`` first, then the file's in pieces of at most ``chunk_size``."""
        if self.head:
            yield self.head
        yield from self.body_chunks(chunk_size)

    def body_chunks(self, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """The file's bytes alone, in pieces of at most ``chunk_size``."""
        fd = self.file.fileno()
        offset = 0
        while offset < self.body_size:
            piece = os.pread(fd, min(chunk_size, self.body_size - offset), offset)
            if not piece:
                raise OSError(f"the spooled result's file ended at {offset} of {self.body_size}")
            offset += len(piece)
            yield piece

    def read(self) -> bytes:
        """All of it, in memory."""
        return b"".join(self.chunks())

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for piece in self.chunks():
            digest.update(piece)
        return digest.hexdigest()

    def reader(self) -> SpooledReader:
        """A seekable, read-only file object over the bytes (an upload's ``Body``)."""
        return SpooledReader(self)


class SpooledReader(io.RawIOBase):
    """A :class:`SpooledResult` as a seekable binary file (no ``fileno``: its bytes are not
    one file's, so a client must not ``fstat`` it for their length; ``len()`` gives what is
    left to read)."""

    def __init__(self, source: SpooledResult) -> None:
        super().__init__()
        self._source = source
        self._size = len(source)
        self._position = 0

    def __len__(self) -> int:
        return max(0, self._size - self._position)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._position = base + offset
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self._size - self._position)
        if wanted <= 0:
            return 0
        head = self._source.head
        done = 0
        if self._position < len(head):
            part = head[self._position : self._position + wanted]
            view[: len(part)] = part
            done = len(part)
        if done < wanted:
            offset = self._position + done - len(head)
            piece = os.pread(self._source.file.fileno(), wanted - done, offset)
            view[done : done + len(piece)] = piece
            done += len(piece)
        self._position += done
        return done
