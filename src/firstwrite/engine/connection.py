"""One HTTP/1.1 connection as the server runs it: uvicorn's httptools protocol, tuned.

uvicorn writes a response's head and its body separately, and uvloop sends each write at once:
two ``send(2)`` calls and two TCP segments per DynamoDB answer, which measured as half the
server's time under load. :class:`CoalescingTransport` buffers the writes of one event-loop turn
and sends them together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

__all__ = ["CoalescingTransport", "protocol_class"]


class CoalescingTransport:
    """A transport that sends all the writes of one event-loop turn as one.

    Buffering until the end of the turn keeps the order and halves the sends; nothing waits
    longer than the current turn.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Iterator[bytes]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending = []
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()  # what was written before close() still goes out, as with a transport
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def protocol_class() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol on a :class:`CoalescingTransport` (None without httptools)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is a dependency
        return None

    class CoalescingHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            coalescing = CoalescingTransport(transport, self.loop)
            super().connection_made(coalescing)  # type: ignore[arg-type]

    return CoalescingHttpToolsProtocol
