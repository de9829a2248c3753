"""One HTTP/1.1 connection as the server runs it: uvicorn's httptools protocol, tuned and bounded.

* **Coalesced writes**: the writes of one event-loop turn go out as one (:class:`CoalescingTransport`).
* **Read timeouts**: a request's headers within ``header_timeout`` of its first byte, its body
  within ``body_timeout`` of the headers, else 408 and close (one lazily re-armed timer per
  connection); idle keep-alive connections close after ``keep_alive_timeout``.
* **A connection limit**: beyond ``max_connections``, a new connection gets 503 and is closed.
* **Back-pressure**: no reading from a client that leaves its answers unread or pipelines a lot.
* **Head limits**: a request's line and headers take at most ``max_header_bytes``, counted as
  they arrive (the parser would buffer a header whole), and ``max_headers`` fields (each is a
  call into Python), else 431 and close, the rest of the read left unparsed; past
  ``max_line_bytes`` or ``max_field_bytes`` (DynamoDB's, on the engine's server), 400 and close.
* **No tiny chunks**: past a chunked body's first ``free_chunks`` chunks, its chunks must
  average ``min_chunk_bytes`` (each chunk is a call into Python; the body pace counts bytes
  only), else 400 and close, the rest of the read left unparsed.
* **No body read after its answer**: a request answered before its body arrived closes its
  connection once the answer, saying ``Connection: close``, is written (not read and dropped).
* **Nothing kept after close**: a connection's objects drop their references to each other when
  it closes, so its memory is freed then, not at the next full garbage collection.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import formatdate
from itertools import chain
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
    max_header_bytes: int = 64 * 1024  # a request's line and headers (as common servers allow)
    max_headers: int = 100  # header fields in a request (Apache's and Tomcat's default)
    max_line_bytes: int | None = None  # a request's line alone (None: only max_header_bytes)
    max_field_bytes: int | None = None  # its header fields together, names and values
    free_chunks: int = 64  # chunks of a chunked body that may be of any size...
    min_chunk_bytes: int = 1024  # ...past which they must average this many bytes

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)!r}")
        for name in ("max_connections", "max_line_bytes", "max_field_bytes"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        for name in (
            "max_pipelined",
            "max_header_bytes",
            "max_headers",
            "free_chunks",
            "min_chunk_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")

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


class _Stop(Exception):
    """Raised from a parser callback to stop parsing a connection just refused."""


def _line_bytes(protocol: Any) -> int:
    """The length of the request line a parsing protocol has read: method, URL, version."""
    return len(protocol.parser.get_method()) + len(protocol.url) + len(b"  HTTP/1.1\r\n")


def _field_bytes(fields: list[tuple[bytes, bytes]]) -> int:
    """The size of a request's header fields: names, values, and 4 bytes each for ``: `` and
    CRLF (counted once the head is complete, in C: a count per field cost every request)."""
    return 4 * len(fields) + sum(map(len, chain.from_iterable(fields)))


def protocol_class(
    limits: Limits, max_connections: int, clock: Callable[[], float] = time.time
) -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with the behaviour in the module docstring (None without
    httptools); answers are dated from ``clock`` (the engine's: see :func:`_fresh_date`)."""
    try:
        import httptools
        from uvicorn.protocols.http.flow_control import FlowControl
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
    except ImportError:  # pragma: no cover - httptools is a dependency
        return None

    header_timeout, body_timeout = limits.header_timeout, limits.body_timeout
    max_header_bytes, max_headers = limits.max_header_bytes, limits.max_headers
    free_chunks, min_chunk_bytes = limits.free_chunks, limits.min_chunk_bytes
    # (No limit of their own: the head limit bounds them, and the fields are not counted.)
    max_line_bytes = limits.max_line_bytes or max_header_bytes
    count_fields = limits.max_field_bytes is not None
    max_field_bytes = limits.max_field_bytes or max_header_bytes
    too_long = problem_bytes(
        431,
        "Request Header Fields Too Large",
        f"a request's line and headers are limited to {max_header_bytes} bytes",
        close=True,
    )
    too_many = problem_bytes(
        431,
        "Request Header Fields Too Large",
        f"a request may have at most {max_headers} header fields",
        close=True,
    )
    long_line = problem_bytes(
        400,
        "Bad Request",
        f"a request's line is limited to {max_line_bytes} bytes",
        close=True,
    )
    long_fields = problem_bytes(
        400,
        "Bad Request",
        f"a request's header fields are limited to {max_field_bytes} bytes together",
        close=True,
    )
    too_chunky = problem_bytes(
        400,
        "Bad Request",
        f"a chunked body's chunks must average at least {min_chunk_bytes} bytes past its first "
        f"{free_chunks}: send the body in bigger chunks, or with a Content-Length",
        close=True,
    )
    refusal = problem_bytes(
        503,
        "Service Unavailable",
        f"the server has {max_connections} connections open, its limit: try again shortly",
        close=True,
    )

    class AnnouncingCycle(RequestResponseCycle):
        """uvicorn's request cycle whose answer, begun before its request's body arrived, says
        ``Connection: close`` (the connection closes after it: on_response_complete), so that
        no client sends another request on it and meets a reset."""

        async def send(self, message: Any) -> None:
            if message["type"] == "http.response.start" and self.more_body:
                self.keep_alive = False  # uvicorn then writes "connection: close"
            await super().send(message)

    class BoundedFlow(FlowControl):
        """Reading resumes only while the client reads its answers and queues few requests."""

        def __init__(self, transport: asyncio.Transport, pipeline: Any) -> None:
            super().__init__(transport)
            self._pipeline = pipeline  # the protocol's queue (not the protocol: no cycle)

        def resume_reading(self) -> None:
            # Called twice a request (uvicorn's receive() and end of response): not paused is
            # the common case, answered first.
            if not self.read_paused:
                return
            if self.write_paused or len(self._pipeline) >= limits.max_pipelined:
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
        _in_head = True  # reading a request's line and headers (or waiting for the next one)
        _head_bytes = 0
        _chunks = 0
        _body_bytes = 0
        _free_bytes = 0  # body bytes in the chunks that may be of any size
        _app_task: asyncio.Task[None] | None = None  # the app's task for the latest request

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= max_connections:
                self._refused = True
                transport.write(refusal)
                transport.close()
                return
            super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
            self.flow = BoundedFlow(self.transport, self.pipeline)
            self._arm("headers", header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._deadline = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            super().connection_lost(exc)
            # Nothing of this connection may keep the rest alive: the request cycle points back
            # here (its on_response), the pipeline holds cycles that hold the flow, a keep-alive
            # timer holds this protocol for its 75 s. (The running request, if any, keeps its
            # own cycle until it ends.)
            keep_alive = self.timeout_keep_alive_task
            if keep_alive is not None:
                keep_alive.cancel()
                self.timeout_keep_alive_task = None
            self.pipeline.clear()
            self._app_task = None
            self.cycle = None  # type: ignore[assignment]
            self.scope = None  # type: ignore[assignment]
            self.headers = None  # type: ignore[assignment]

        def data_received(self, data: bytes) -> None:
            # A request's head is counted as it arrives, before the parser buffers it: fed to
            # the parser no further than the limit, then refused.
            while self._in_head:
                room = max_header_bytes - self._head_bytes
                if room <= 0:
                    self._refuse(too_long)
                    return
                if len(data) > room:
                    piece, data = data[:room], data[room:]
                else:
                    piece, data = data, b""
                self._head_bytes += len(piece)
                self._feed(piece)
                if not data or self.parser is None or self.transport.is_closing():
                    return
            self._feed(data)

        def _feed(self, data: bytes) -> None:
            # uvicorn's data_received, but a parse stopped by a refusal (a callback raising
            # _Stop) is not reported as a malformed request.
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                if self.transport.is_closing():
                    return  # refused already: the rest of the read is dropped unparsed
                msg = "Invalid HTTP request received."
                self.logger.warning(msg)
                self.send_400_response(msg)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._chunks = self._body_bytes = 0
            self._arm("headers", header_timeout)

        def on_header(self, name: bytes, value: bytes) -> None:
            if len(self.headers) >= max_headers:  # the fields before this one
                self._refuse(too_many)
                raise _Stop  # the parser stops here: the rest of the read is not parsed
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            if len(self.url) > max_line_bytes - 32 and _line_bytes(self) > max_line_bytes:
                self._refuse(long_line)
                raise _Stop
            if count_fields and _field_bytes(self.headers) > max_field_bytes:
                self._refuse(long_fields)
                raise _Stop
            self._in_head = False
            _fresh_date(self.server_state, clock)
            super().on_headers_complete()
            self._arm("body", body_timeout)

        def on_chunk_header(self) -> None:
            # (Called as a chunk starts: the bytes counted are those of the chunks before it.)
            chunks = self._chunks = self._chunks + 1
            if chunks == free_chunks + 1:
                self._free_bytes = self._body_bytes
            elif (
                chunks > free_chunks + 1
                and self._body_bytes - self._free_bytes
                < (chunks - free_chunks - 1) * min_chunk_bytes
            ):
                self._refuse(too_chunky)
                raise _Stop  # the parser stops here: the rest of the read is not parsed

        def on_body(self, body: bytes) -> None:
            self._body_bytes += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._head_bytes = True, 0  # the next request's head
            self._deadline = None

        def on_response_complete(self) -> None:
            # Answered before its body arrived (the parser is in a body, and its request, the
            # latest parsed, is the one answered; a pipelined request's answer may leave a later
            # request's body arriving): the connection closes once the answer is written,
            # instead of reading the rest of a body nobody will use. uvicorn's method then
            # counts the request and, the transport closing, stops there.
            cycle = self.cycle
            if (
                not self._in_head
                and cycle is not None
                and cycle.response_complete
                and not self.transport.is_closing()
            ):
                self.transport.close()
            super().on_response_complete()

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            # uvicorn's, keeping the task: a request refused before its app began is not run.
            # (uvicorn makes the cycle itself, deep in on_headers_complete: made ours here.)
            cycle.__class__ = AnnouncingCycle
            context = contextvars.Context() if self.config.reset_contextvars else None
            task = self.loop.create_task(cycle.run_asgi(app), context=context)
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)
            self._app_task = task

        def _refuse(self, answer: bytes) -> None:
            """Answer ``answer`` (a whole response, ``Connection: close``) and close, as a read
            timeout does: the app's request, if one is running, sees a disconnect; if its app
            has not begun (refused in the read that completed its head), it never runs: the
            refusal is the answer, and rendering a page nobody will read cost the event loop
            more than the refusal."""
            if self.transport is None or self.transport.is_closing():
                return
            task = self._app_task
            if task is not None:
                coro = task.get_coro()
                if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == "CORO_CREATED":
                    task.cancel()
            cycle = self.cycle
            if cycle is None or cycle.response_complete or not cycle.response_started:
                self.transport.write(answer)
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
            self.transport.close()

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
            # As connection_lost will: the app's receive() says http.disconnect, and its late
            # answer is dropped rather than written after ours.
            detail = f"the request's {what} did not arrive within {seconds:g} s"
            self._refuse(problem_bytes(408, "Request Timeout", detail, close=True))

    return BoundedHttpToolsProtocol


def _fresh_date(state: Any, clock: Callable[[], float]) -> None:
    """The ``Date`` of the answers to come is ``clock``'s second, as DynamoDB stamps it: the
    engine's clock is DynamoDB's, so a client that reads the server's time from it (the
    layer's clock-skew estimate) reads the engine's, frozen or moved. uvicorn renews the header
    from the wall clock once a second from its main loop: a header list that is not the one
    set here, or a new second, is set again."""
    second = int(clock())
    dated = getattr(state, "firstwrite_date", None)  # (second, the list set): kept, not its id
    if dated is not None and dated[0] == second and dated[1] is state.default_headers:
        return
    others = [(name, value) for name, value in state.default_headers if name != b"date"]
    headers = [(b"date", formatdate(second, usegmt=True).encode()), *others]
    state.default_headers = headers
    state.firstwrite_date = (second, headers)
