"""One HTTP/1.1 connection as the server runs it: uvicorn's httptools protocol, tuned and bounded.

* **Coalesced writes.** uvicorn writes a response's head and its body separately, and uvloop
  sends each write at once: two ``send(2)`` calls and two TCP segments per DynamoDB answer.
  :class:`CoalescingTransport` buffers the writes of one event-loop turn and sends them together
  (what that saves: docs/engine.md, "How the HTTP server runs engine calls").
* **Read timeouts.** A request's headers must arrive within ``header_timeout`` of its first byte
  (or of the connection, for its first request), and its body within ``body_timeout`` of the
  headers; otherwise the server answers 408 and closes. A client trickling one byte a second
  holds a connection for seconds, not forever (one timer per connection, re-armed lazily, so a
  request costs no timer of its own). Idle keep-alive connections are closed by uvicorn after
  ``keep_alive_timeout``.
* **A connection limit.** Beyond ``max_connections`` open connections, a new one is answered
  503 (an ``application/problem+json`` body, ``Connection: close``) and closed at once, so the
  process keeps file descriptors for the engine's own work (SQLite files, the TTL sweeper).
* **Back-pressure.** While the client is not reading its responses (the socket's send buffer is
  full) or has too many pipelined requests queued, the server stops reading from it: unread
  responses cannot pile up in memory.
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .asgi import problem_bytes

__all__ = ["CoalescingTransport", "Limits", "protocol_class"]

# File descriptors kept for the engine when the connection limit is derived from the process's
# limit: its SQLite connections (one per thread that touches the database, three descriptors
# each in WAL mode), the listening socket, logs.
_RESERVED_PER_THREAD = 3
_RESERVED_BASE = 64


@dataclass(frozen=True)
class Limits:
    """How long a client may take, and how many may connect at once."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive_timeout: float = 75.0
    max_connections: int | None = None  # None: from the process's file descriptor limit
    max_pipelined: int = 16

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)!r}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {self.max_connections}")
        if self.max_pipelined < 1:
            raise ValueError(f"max_pipelined must be at least 1, not {self.max_pipelined}")

    def connections(self, threads: int) -> int:
        """The connection limit: as set, or what the file descriptor limit leaves after keeping
        enough for ``threads`` engine threads."""
        if self.max_connections is not None:
            return self.max_connections
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return 10_000
        reserved = _RESERVED_BASE + _RESERVED_PER_THREAD * threads
        return max(16, min(10_000, soft - reserved))


def raise_file_limit() -> None:
    """Raise this process's soft file descriptor limit to its hard limit (as Go programs do)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # e.g. a hard limit the platform refuses: keep the soft one
            pass


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


def protocol_class(limits: Limits, max_connections: int) -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with the behaviour in the module docstring (None without
    httptools)."""
    try:
        from uvicorn.protocols.http.flow_control import FlowControl
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is a dependency
        return None

    header_timeout, body_timeout = limits.header_timeout, limits.body_timeout
    refusal = problem_bytes(
        503,
        "Service Unavailable",
        f"the server has {max_connections} connections open, its limit: try again shortly",
        close=True,
    )

    class BoundedFlow(FlowControl):
        """Reading resumes only while the client reads its answers and queues few requests."""

        def __init__(self, transport: asyncio.Transport, protocol: Any) -> None:
            super().__init__(transport)
            self._protocol = protocol

        def resume_reading(self) -> None:
            # Called twice a request (uvicorn's receive() and end of response): not paused is
            # the common case, answered first.
            if not self.read_paused:
                return
            if self.write_paused or len(self._protocol.pipeline) >= limits.max_pipelined:
                return
            self.read_paused = False
            self._transport.resume_reading()

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        # One timer per connection, re-armed lazily: a request moves the deadline (an
        # attribute), and the timer, when it fires early, sleeps again until the deadline. A
        # timer per request phase (a libuv timer started and stopped three times a request)
        # cost several microseconds of every request.
        _timer: asyncio.TimerHandle | None = None
        _deadline: float | None = None  # None: nothing to wait for (between requests)
        _due = 0.0  # when the timer fires
        _waiting_for = "headers"
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= max_connections:
                self._refused = True
                transport.write(refusal)
                transport.close()
                return
            super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
            self.flow = BoundedFlow(self.transport, self)
            self._arm("headers", header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._deadline = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm("headers", header_timeout)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._arm("body", body_timeout)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._deadline = None

        def pause_writing(self) -> None:
            super().pause_writing()
            self.flow.pause_reading()  # the client is not reading: stop taking requests

        def resume_writing(self) -> None:
            super().resume_writing()
            if self.cycle is None or self.cycle.response_complete or self.cycle.more_body:
                self.flow.resume_reading()

        def _arm(self, what: str, seconds: float) -> None:
            deadline = self.loop.time() + seconds
            self._deadline = deadline
            self._waiting_for = what
            timer = self._timer
            if timer is None or deadline < self._due:
                if timer is not None:
                    timer.cancel()
                self._due = deadline
                self._timer = self.loop.call_at(deadline, self._check)
            # else: the timer, due no later, finds the deadline moved and sleeps until then

        def _check(self) -> None:
            self._timer = None
            deadline = self._deadline
            if deadline is None:
                return  # between requests: the next one arms a timer again
            if deadline - self.loop.time() > 0.001:  # (libuv rounds a timer to the ms)
                self._due = deadline
                self._timer = self.loop.call_at(deadline, self._check)
                return
            self._deadline = None
            what = self._waiting_for
            self._timed_out(what, header_timeout if what == "headers" else body_timeout)

        def _timed_out(self, what: str, seconds: float) -> None:
            if self.transport is None or self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is None or cycle.response_complete or not cycle.response_started:
                detail = f"the request's {what} did not arrive within {seconds:g} s"
                self.transport.write(problem_bytes(408, "Request Timeout", detail, close=True))
            if cycle is not None and not cycle.response_complete:
                # As connection_lost will: the app's receive() says http.disconnect, and its
                # late answer is dropped rather than written after ours.
                cycle.disconnected = True
                cycle.message_event.set()
            self.transport.close()

    return BoundedHttpToolsProtocol
