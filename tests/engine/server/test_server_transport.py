"""The HTTP server's write coalescing: one send per event-loop turn, order and close kept."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from firstwrite.engine.server.connection import CoalescingTransport


async def _pair() -> tuple[Any, socket.socket, list[bytes]]:
    """A real transport on one end of a socket pair, its writes recorded as they reach it."""
    ours, peer = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    sent: list[bytes] = []
    real_write = transport.write

    def write(data: bytes) -> None:
        sent.append(bytes(data))
        real_write(data)

    transport.write = write  # type: ignore[method-assign]
    peer.setblocking(False)
    return transport, peer, sent


async def _receive(peer: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    while len(data) < size:
        chunk = await loop.sock_recv(peer, size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_writes_of_one_turn_go_out_as_one_in_order() -> None:
    async def scenario() -> None:
        transport, peer, sent = await _pair()
        coalescing = CoalescingTransport(transport, asyncio.get_running_loop())
        coalescing.write(b"HTTP/1.1 200 OK\r\n\r\n")
        coalescing.write(bytearray(b"{}"))  # copied: the caller may reuse its buffer
        assert sent == []  # nothing sent before the turn ends
        await asyncio.sleep(0)
        assert sent == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
        coalescing.writelines([b"second", b"-turn"])
        await asyncio.sleep(0)
        assert sent[1:] == [b"second-turn"]
        assert await _receive(peer, 32) == b"HTTP/1.1 200 OK\r\n\r\n{}second-turn"
        transport.close()
        peer.close()

    asyncio.run(scenario())


def test_close_sends_what_was_written_first() -> None:
    async def scenario() -> None:
        transport, peer, _ = await _pair()
        coalescing = CoalescingTransport(transport, asyncio.get_running_loop())
        coalescing.write(b"last words")
        coalescing.close()
        assert coalescing.is_closing()  # everything else is the real transport's
        assert await _receive(peer, 64) == b"last words"  # then EOF
        await asyncio.sleep(0)  # the scheduled flush finds nothing left to send
        peer.close()

    asyncio.run(scenario())


def test_abort_drops_what_was_not_sent() -> None:
    async def scenario() -> None:
        transport, peer, sent = await _pair()
        coalescing = CoalescingTransport(transport, asyncio.get_running_loop())
        coalescing.write(b"never")
        coalescing.abort()
        await asyncio.sleep(0)
        assert sent == []
        peer.close()

    asyncio.run(scenario())
