"""Reading request bodies on the event loop, big ones at a bounded pace.

Receiving big bodies as fast as loopback delivers them would take the event loop from every
other client (docs/engine.md, "What the server is hardened for"). Here:

* **A pace.** Big bodies (:data:`BIG_BODY_BYTES` and more, or of unknown size) are read at no
  more than :data:`RATE` bytes a second, all connections together (:class:`Pace`, a token
  bucket). Past it, the reader does not ask uvicorn for more, so uvicorn stops reading the
  socket (it holds at most about 64 KiB plus one read per connection) and TCP makes the client
  wait: nothing is buffered beyond that. A paced client still gets its answer, later.
* **A few readers at once.** At most :data:`READERS` big bodies are being read at any time;
  the others wait without being read at all.
* **One buffer.** A body of known size is read into one buffer of that size, never joined.
* **Draining.** A body refused whatever it holds (past the size limit, not JSON-typed) is read
  at the same pace and dropped, then answered: answering first would leave uvicorn reading it
  at full speed, and closing instead would lose the answer for clients that send the whole
  body before reading (most do). The body read timeout (:class:`~.connection.Limits`) bounds
  how long that takes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from .asgi import Message, Receive
from .lanes import ByteBudget

__all__ = ["BIG_BODY_BYTES", "BURST", "RATE", "READERS", "BodyReader", "Pace"]

# Bodies over this size are big: paced, and answered on the thread pool.
BIG_BODY_BYTES = 256 * 1024
# Big-body bytes a second, all connections together: a 16 MiB body takes a quarter of a second
# more to arrive, against the seconds it takes to decode; the event loop's share in receiving
# them stays a few percent.
RATE = 64 * 1024 * 1024
BURST = 1024 * 1024  # read at once before the pace applies (the bucket's depth)
READERS = 2  # big bodies read at once


class Pace:
    """A token bucket of bytes shared by every reader on one event loop.

    :meth:`spend` takes what was just read from the bucket and, while the bucket is in debt,
    sleeps until the rate has paid it back: readers queue behind each other's debt, so the
    total stays at ``rate`` bytes a second (after a first ``burst``) however many read.
    """

    def __init__(self, rate: float = RATE, burst: int = BURST) -> None:
        if not rate > 0 or burst < 0:
            raise ValueError(f"a pace needs a positive rate and a burst >= 0: {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._at: float | None = None
        self.spent = 0  # bytes, for tests and figures

    async def spend(self, size: int) -> None:
        now = asyncio.get_running_loop().time()
        if self._at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= size
        self.spent += size
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)


class BodyReader:
    """Reads request bodies for one server (see the module docstring)."""

    def __init__(self, limit: int, pace: Pace | None = None, readers: int = READERS) -> None:
        self.limit = limit
        self.pace = pace or Pace()
        self._readers = ByteBudget(readers)  # (of readers: one "byte" each, in arrival order)
        self.reading = 0  # big bodies being read now...
        self.most_reading = 0  # ...and at most so far (tests)

    async def read(
        self, receive: Receive, length: int | None, *, big: bool
    ) -> bytes | bytearray | None:
        """The body (``length``: its Content-Length, if given), or ``None`` once a body past
        the limit has been read to its end and dropped."""
        if not big:  # the common case, unpaced: no reader slot (its context costs a request)
            message = await receive()
            chunk: bytes = message.get("body", b"")
            if not message.get("more_body", False):
                return chunk if len(chunk) <= self.limit else None
            return await self._rest(receive, length, message, chunk, big)
        async with self._reader(big):
            message = await receive()
            chunk = message.get("body", b"")
            await self.pace.spend(len(chunk))
            if not message.get("more_body", False):
                return chunk if len(chunk) <= self.limit else None
            return await self._rest(receive, length, message, chunk, big)

    async def _rest(
        self,
        receive: Receive,
        length: int | None,
        message: Message,
        chunk: bytes,
        big: bool,
    ) -> bytes | bytearray | None:
        # The body past its first piece.
        if length is None or length > self.limit:
            return await self._gather(receive, chunk, big)
        # One buffer of the announced size, filled in place (uvicorn's framing never
        # delivers more than Content-Length; a client that disconnects, less).
        body = bytearray(length)
        size = len(chunk)
        body[:size] = chunk
        while message.get("more_body", False):
            message = await receive()
            chunk = message.get("body", b"")
            body[size : size + len(chunk)] = chunk
            size += len(chunk)
            if big:
                await self.pace.spend(len(chunk))
        del body[size:]
        return body

    async def drain(self, receive: Receive, *, big: bool) -> int:
        """Read the body to its end, dropping it; its size."""
        async with self._reader(big):
            size = 0
            more = True
            while more:
                message = await receive()
                chunk = message.get("body", b"")
                size += len(chunk)
                more = message.get("more_body", False)
                if big:
                    await self.pace.spend(len(chunk))
            return size

    async def _gather(self, receive: Receive, first: bytes, big: bool) -> bytes | None:
        # A chunked body (of unknown size): pieces joined at the end, dropped past the limit.
        chunks = [first]
        size = len(first)
        more = True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= self.limit:
                chunks.append(chunk)
            more = message.get("more_body", False)
            if big:
                await self.pace.spend(len(chunk))
        return b"".join(chunks) if size <= self.limit else None

    @contextlib.asynccontextmanager
    async def _reader(self, big: bool) -> AsyncIterator[None]:
        if not big:
            yield
            return
        granted = await self._readers.acquire(1)
        self.reading += 1
        self.most_reading = max(self.most_reading, self.reading)
        try:
            yield
        finally:
            self.reading -= 1
            self._readers.release(granted)
