"""Idempotency-Key middleware for any ASGI 3 app (Starlette, FastAPI, Litestar, Quart...).

Pure ASGI, no framework import: it wraps ``receive`` to read the body once (bounded) for the
fingerprint and hands the app the same bytes, and wraps ``send`` to capture the response. A
captured response is stored *before* it is sent, so a client that saw it, and retries, gets the
replay. It calls the layer's :class:`~firstwrite.idempotency.AsyncIdempotency` (or a synchronous
``Idempotency`` run in a worker thread), so it never blocks the event loop::

    app.add_middleware(
        IdempotencyMiddleware,
        guard=AsyncIdempotency(config, client=client),
        config=HttpConfig(principal=lambda request: request.header("x-api-key")),
    )

The rules (which requests, keys, scopes, fingerprints, answers, what is stored) are in
:mod:`.core`, and the guard calls they lead to (claim, store, release, settle) in
:mod:`.guarding`, both shared with the WSGI middleware: this one moves bytes and awaits the
guard steps those decisions yield.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, TypeVar

from firstwrite.idempotency import UNSET, AsyncGuard, AsyncIdempotency, Claim, Guard, recovery
from firstwrite.idempotency import steps as guard_steps

from . import guarding
from .config import HttpConfig
from .context import CONTEXT_KEY, AsyncRequestIdempotency
from .core import (
    UNSTORED_HEADER,
    Core,
    Headers,
    HeldBody,
    Plan,
    Response,
    refuse_status_only_guard,
)
from .request import HttpRequest
from .streamed_replies import StreamedReply

__all__ = ["IdempotencyMiddleware"]

T = TypeVar("T")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]  # loose: frameworks type scope and messages as they like

# Extensions that bypass http.response.body (files sent by path, trailers): hidden from the app
# on guarded requests so that every response passes through the capture.
_HIDDEN_EXTENSIONS = (
    "http.response.pathsend",
    "http.response.zerocopysend",
    "http.response.trailers",
)


class IdempotencyMiddleware:
    """``IdempotencyMiddleware(app, guard=..., config=HttpConfig(...))``, or with Starlette
    ``app.add_middleware(IdempotencyMiddleware, guard=..., config=...)``. ``guard`` is an
    :class:`AsyncGuard` (awaited) or a :class:`Guard` (each call in a worker thread); without
    one, ``AsyncIdempotency()`` (the local engine file, no configuration). Without a config,
    ``HttpConfig()``. ``reconcile`` decides for a request whose first run marked recovery
    points and died (:mod:`firstwrite.idempotency.recovery`; default: the guard's hook)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        guard: Guard | AsyncGuard | None = None,
        config: HttpConfig | None = None,
        reconcile: recovery.AnyHook | None = None,
    ) -> None:
        self.app = app
        self.reconcile = reconcile
        self.config = config or HttpConfig()
        self.core = Core(self.config)
        self.guard: Guard | AsyncGuard = guard if guard is not None else AsyncIdempotency()
        self._disabled = self.guard.config.disabled  # FIRSTWRITE_IDEMPOTENCY_DISABLED
        refuse_status_only_guard(self.guard.config.replay)
        has_store = self.guard.config.result_store is not None
        self._held_limit = self.core.held_limit(has_store)
        self._spool_over = self.core.spool_over(has_store)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._disabled:
            await self.app(scope, receive, send)
            return
        core = self.core
        method, path = scope["method"], scope["path"]
        route = core.route_for(method, path)
        if route is None:
            await self.app(scope, receive, send)
            return
        raw_headers = scope.get("headers", ())
        header_value, declared = _headers(raw_headers, core.header_bytes, b"content-length")
        request = HttpRequest(
            method,
            path,
            scope.get("query_string", b"").decode("latin-1"),
            scope,
            ((n.decode("latin-1"), v.decode("latin-1")) for n, v in raw_headers),
        )
        plan = core.plan(route, header_value, request)
        if plan is None:
            await self.app(scope, receive, send)
            return
        if not isinstance(plan, Plan):
            await _respond(send, *plan)
            return
        limit = self.config.max_request_body
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _respond(send, *core.too_large(limit))
            return
        try:
            body = await _read_body(receive, limit)
        except _TooLarge:
            await _respond(send, *core.too_large(limit))
            return
        if body is None:
            return  # the client left before sending its body: nothing claimed, nothing to say
        payload = core.payload(plan, body) if core.has_payload(plan) else UNSET
        context = AsyncRequestIdempotency(core, plan, payload, self.guard, self.reconcile)
        if not plan.route.transactional:
            outcome = await self._claim(plan, payload, send)
            if outcome is None:
                return
            context.claim = outcome
        inner = dict(scope)
        inner[CONTEXT_KEY] = context
        extensions = scope.get("extensions")
        if extensions and any(name in extensions for name in _HIDDEN_EXTENSIONS):
            inner["extensions"] = {
                k: v for k, v in extensions.items() if k not in _HIDDEN_EXTENSIONS
            }
        await self._run(inner, _replaying(body, receive), send, context)

    async def _drive(self, steps: guard_steps.Steps[T]) -> T:
        """A decision of :mod:`.guarding`, its guard calls awaited (a synchronous guard's each
        in a worker thread)."""
        with recovery.reconciling_with(self.reconcile):
            return await guard_steps.adrive(steps, self.guard)

    async def _claim(self, plan: Plan, payload: Any, send: Send) -> Claim | None:
        """Claim the key; ``None`` when the request was answered instead (replay or error)."""
        outcome = await self._drive(guarding.claim(self.core, plan, payload))
        if isinstance(outcome, Claim):
            return outcome
        await _answer(send, outcome)
        return None

    async def _run(
        self, scope: Scope, receive: Receive, send: Send, context: AsyncRequestIdempotency
    ) -> None:
        capture = _Capture(send, self.core, self._held_limit, self._spool_over)
        try:
            await self._serve(scope, receive, send, context, capture)
        finally:
            capture.forget()

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        context: AsyncRequestIdempotency,
        capture: _Capture,
    ) -> None:
        core = self.core
        started = time.monotonic()
        try:
            with guard_steps.working(context.claim, self.guard):
                await self.app(scope, receive, capture.send)
        except BaseException as exc:
            if context.claim is not None:
                reason = f"handler raised {exc!r}"
                unstored = guarding.settle_unstored(core, context, None, reason)
                await asyncio.shield(self._drive(unstored))
            raise
        if context.answer is not None:  # claim_with found the key taken
            await _answer(send, context.answer)
            return
        status = capture.status
        if capture.passing:  # already on its way to the client, unstored
            await self._drive(
                guarding.settle_unstored(core, context, status, capture.unstored_reason)
            )
            return
        if status is None or not capture.complete:
            await self._drive(
                guarding.settle_unstored(core, context, status, "incomplete response")
            )
            await capture.flush()
            return
        answer, extra = await self._drive(
            guarding.finish(core, context, status, capture.headers, capture.body(), None, started)
        )
        if answer is not None:
            await _answer(send, answer)
            return
        await capture.flush(extra)


class _TooLarge(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body (``None``: the client disconnected); :class:`_TooLarge` past
    ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.disconnect":
            return None
        if kind != "http.request":
            continue
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise _TooLarge
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the app: the body read already, then the real channel (disconnects)."""
    delivered = False

    async def inner() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return inner


def _headers(
    headers: Sequence[tuple[bytes, bytes]] | Any, first: bytes, second: bytes
) -> tuple[str | None, str | None]:
    """Two headers' values (``first`` and ``second`` in lower case; repeated headers joined
    with ", "; ``None`` when absent), in one pass."""
    found: list[str | None] = [None, None]
    wanted = (first, second)
    for key, value in headers:
        if key in wanted or (key := key.lower()) in wanted:
            slot = 0 if key == first else 1
            text = value.decode("latin-1")
            seen = found[slot]
            found[slot] = text if seen is None else f"{seen}, {text}"
    return found[0], found[1]


async def _answer(send: Send, answer: Response | StreamedReply) -> None:
    """Send an answer: ``(status, headers, body)``, or a :class:`StreamedReply` whose
    chunks are read in a worker thread (the store's reads block) and sent as they come."""
    if isinstance(answer, StreamedReply):
        await _respond_streamed(send, answer)
    else:
        await _respond(send, *answer)


async def _respond(send: Send, status: int, headers: Headers, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _respond_streamed(send: Send, reply: StreamedReply) -> None:
    headers = [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in reply.headers]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    chunks = reply.chunks
    while True:
        chunk = await asyncio.to_thread(next, chunks, None)
        if chunk is None:
            break
        if chunk:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Capture(HeldBody):
    """The app's ``send``: holds the response until it is complete and stored, up to ``limit``
    bytes (in a temporary file past ``spool_over``); beyond that (or for a streaming content
    type) passes it through as it comes, with ``Idempotency-Replay-Unavailable`` saying it will
    not be replayed."""

    def __init__(self, send: Send, core: Core, limit: int, spool_over: int | None) -> None:
        super().__init__(limit, spool_over)
        self._send = send
        self._core = core
        self.status: int | None = None
        self.headers: Headers = []
        self._start: Message | None = None
        self.passing = False
        self.unstored_reason = ""

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self._start = message
            self.status = int(message["status"])
            self.headers = [(bytes(n), bytes(v)) for n, v in message.get("headers", ())]
            declared, media = _headers(self.headers, b"content-length", b"content-type")
            if media is not None and self._core.streams_media(media):
                await self._pass_through("streaming")
            elif declared is not None and declared.isdigit() and int(declared) > self._limit:
                await self._pass_through("size-exceeded")
            return
        if kind != "http.response.body":
            await self._send(message)
            return
        more = bool(message.get("more_body", False))
        if self.passing:
            await self._send(message)
        else:
            if self.hold(bytes(message.get("body", b""))):
                await self._pass_through("size-exceeded", more_body=more)
        if not more:
            self.complete = True

    async def _pass_through(self, reason: str, *, more_body: bool | None = None) -> None:
        """Send what is held (marked unstored) and everything after it as it comes."""
        self.passing = True
        self.unstored_reason = reason
        await self._send_start([(UNSTORED_HEADER, reason.encode())])
        if more_body is not None:
            await self._send_held(more_body)
            self.forget()

    async def _send_start(self, extra: Headers) -> None:
        assert self._start is not None
        start = self._start
        if extra:
            start = {**start, "headers": [*self.headers, *extra]}
        await self._send(start)

    async def flush(self, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Send the held response (status and headers as the app gave them, plus ``extra``)."""
        if self._start is None:
            return
        await self._send_start(list(extra))
        await self._send_held(not self.complete)

    async def _send_held(self, more_body: bool) -> None:
        """Send what is held: one message, or (spooled) one per piece read from the file."""
        if not self.spooled:
            body = self.body()
            await self._send({"type": "http.response.body", "body": body, "more_body": more_body})
            return
        for piece in self.chunks():
            await self._send({"type": "http.response.body", "body": piece, "more_body": True})
        await self._send({"type": "http.response.body", "body": b"", "more_body": more_body})
