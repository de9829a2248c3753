"""Idempotency-Key middleware for any WSGI app (Flask, Django, Falcon, Pyramid...).

The same rules (:mod:`.core`) and guard calls (:mod:`.guarding`) as the ASGI middleware, made
on the synchronous :class:`~firstwrite.idempotency.Idempotency`::

    app.wsgi_app = WSGIIdempotencyMiddleware(app.wsgi_app, guard=Idempotency(config, client=c))

The body is read once (bounded) and handed to the app as a fresh ``wsgi.input``; the response
iterable is drained into memory up to the stored-response limit, stored, and only then started,
so a client that saw a response and retries gets its replay. Beyond the limit (or for a streaming
content type) the response streams through as it comes, unstored, and says so in a header.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

from firstwrite.idempotency import UNSET, AsyncGuard, Claim, Guard, Idempotency, recovery
from firstwrite.idempotency import steps as guard_steps
from firstwrite.shared.http_reply import standard_phrase

from . import guarding
from .config import HttpConfig
from .context import CONTEXT_KEY, RequestIdempotency
from .core import (
    UNSTORED_HEADER,
    Core,
    Headers,
    HeldBody,
    Plan,
    Replayed,
    refuse_status_only_guard,
)
from .request import HttpRequest, wsgi_pairs
from .streamed_replies import StreamedReply

__all__ = ["WSGIIdempotencyMiddleware"]

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

_READ_CHUNK = 64 * 1024


class WSGIIdempotencyMiddleware:
    """``WSGIIdempotencyMiddleware(app, guard=..., config=HttpConfig(...))``. Without a guard,
    ``Idempotency()`` (the local engine file, no configuration); without a config,
    ``HttpConfig()``. The guard must be a synchronous :class:`Guard` (``TypeError``
    otherwise). ``reconcile`` decides for a request whose first run marked recovery points and
    died (:mod:`firstwrite.idempotency.recovery`; default: the guard's hook)."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        guard: Guard | None = None,
        config: HttpConfig | None = None,
        reconcile: recovery.ReconcileHook | None = None,
    ) -> None:
        self.guard = _synchronous(guard if guard is not None else Idempotency())
        self.reconcile = recovery.check_blocking(reconcile)
        self.app = app
        self.config = config or HttpConfig()
        self.core = Core(self.config)
        refuse_status_only_guard(self.guard.config.replay)
        has_store = self.guard.config.result_store is not None
        self._held_limit = self.core.held_limit(has_store)
        self._spool_over = self.core.spool_over(has_store)
        self._environ_header = "HTTP_" + self.config.header.upper().replace("-", "_")
        self._disabled = self.guard.config.disabled  # FIRSTWRITE_IDEMPOTENCY_DISABLED

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if self._disabled:
            return self.app(environ, start_response)
        core = self.core
        method = environ.get("REQUEST_METHOD", "GET").upper()
        # PEP 3333 carries the path's bytes as latin-1; the app's routes are text.
        path = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace") or "/"
        route = core.route_for(method, path)
        if route is None:
            return self.app(environ, start_response)
        request = HttpRequest(
            method, path, environ.get("QUERY_STRING", ""), environ, _lazy_pairs(environ)
        )
        plan = core.plan(route, environ.get(self._environ_header), request)
        if plan is None:
            return self.app(environ, start_response)
        if not isinstance(plan, Plan):
            return _respond(start_response, plan)
        limit = self.config.max_request_body
        body = _read_body(environ, limit)
        if body is None:
            return _respond(start_response, core.too_large(limit))
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        payload = core.payload(plan, body) if core.has_payload(plan) else UNSET
        context = RequestIdempotency(core, plan, payload, self.guard, self.reconcile)
        environ[CONTEXT_KEY] = context
        if not plan.route.transactional:
            outcome = self._claim(plan, payload)
            if not isinstance(outcome, Claim):
                return _respond(start_response, outcome)
            context.claim = outcome
        return self._run(environ, start_response, context)

    def _claim(
        self, plan: Plan, payload: Any
    ) -> Claim | tuple[int, Headers, bytes] | StreamedReply:
        """The claim, or the answer instead (a replay or an error)."""
        with recovery.reconciling_with(self.reconcile):
            return guard_steps.drive(guarding.claim(self.core, plan, payload), self.guard)

    def _settle_unstored(
        self, context: RequestIdempotency, status: int | None, reason: str
    ) -> None:
        guard_steps.drive(guarding.settle_unstored(self.core, context, status, reason), self.guard)

    def _run(
        self, environ: dict[str, Any], start_response: StartResponse, context: RequestIdempotency
    ) -> Iterable[bytes]:
        core = self.core
        capture = _Capture(self._held_limit, self._spool_over)
        started = time.monotonic()
        result: Iterable[bytes] | None = None
        try:
            with guard_steps.working(context.claim, self.guard):
                result = self.app(environ, capture.start_response)
            iterator = iter(result)
            if not capture.streams(core):
                for chunk in iterator:
                    capture.add(chunk)
                    if capture.over:
                        break
                else:
                    capture.complete = True
        except BaseException as exc:
            _close(result)
            capture.forget()
            if context.claim is not None:
                self._settle_unstored(context, None, f"handler raised {exc!r}")
            raise
        if context.answer is not None:  # claim_with found the key taken
            _close(result)
            capture.forget()
            return _respond(start_response, context.answer)
        if not capture.complete:  # too large, or a streaming content type: pass it through
            start_response(
                capture.status_line,
                [*capture.headers, (UNSTORED_HEADER.decode(), capture.reason)],
                capture.exc_info,
            )
            return self._passing(result, iterator, capture, context)
        _close(result)
        if capture.status_line is None:
            capture.forget()
            if context.claim is not None:
                self._settle_unstored(context, None, "incomplete response")
            raise RuntimeError("the WSGI app returned without calling start_response")
        try:
            with recovery.reconciling_with(
                self.reconcile
            ):  # finish may claim (a transactional route)
                answer, extra = guard_steps.drive(
                    guarding.finish(
                        core,
                        context,
                        capture.status,
                        _to_bytes(capture.headers),
                        capture.body(),
                        capture.reason_phrase,
                        started,
                    ),
                    self.guard,
                )
        except BaseException:
            capture.forget()
            raise
        if answer is not None:
            capture.forget()
            return _respond(start_response, answer)
        headers = [*capture.headers, *_to_text(extra)]
        start_response(capture.status_line, headers, capture.exc_info)
        body = capture.body()
        if isinstance(body, bytes):
            return [body]
        return _sent_from(capture)

    def _passing(
        self,
        result: Iterable[bytes] | None,
        iterator: Iterator[bytes],
        capture: _Capture,
        context: RequestIdempotency,
    ) -> Iterator[bytes]:
        # A response that will never be stored gets its final answer ("not stored") now, before
        # its bytes reach the client: a retry sent the moment the body arrives must not find the
        # key still in progress. A release waits for the stream's end instead, so that no
        # duplicate runs while this one still streams.
        settled = context.claim is not None and guarding.keeps(self.core, context, capture.status)
        if settled:
            self._settle_unstored(context, capture.status, capture.reason)
        try:
            yield from capture.chunks()
            capture.forget()
            yield from iterator
        finally:
            capture.forget()
            _close(result)
            if context.claim is not None and not settled:
                self._settle_unstored(context, capture.status, capture.reason)


def _sent_from(capture: _Capture) -> Iterator[bytes]:
    """A spooled response's body for the server, read from its file piece by piece; the file
    is closed when the server closes the iterable (PEP 3333) or it ends."""
    try:
        yield from capture.chunks()
    finally:
        capture.forget()


def _synchronous(guard: Guard | AsyncGuard) -> Guard:
    """``guard``, checked: an :class:`AsyncGuard` (``is_async``) cannot serve a WSGI app."""
    if guard.is_async:
        raise TypeError("a WSGI app needs a synchronous guard (Idempotency), not an async one")
    return guard


def _lazy_pairs(environ: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield from wsgi_pairs(environ)


def _read_body(environ: dict[str, Any], limit: int) -> bytes | None:
    """The request body, or ``None`` when it is over ``limit`` bytes. Without a
    ``CONTENT_LENGTH``, the body is read to its end only if the server says the input is
    terminated (PEP 3333: otherwise reading past the length may block)."""
    stream = environ.get("wsgi.input")
    text = environ.get("CONTENT_LENGTH") or ""
    if stream is None:
        return b""
    if text.strip():
        try:
            length = int(text)
        except ValueError:
            length = 0
        if length > limit:
            return None
        return _read(stream, length)
    if not environ.get("wsgi.input_terminated"):
        return b""
    data = _read(stream, limit + 1)
    return None if len(data) > limit else data


def _read(stream: Any, length: int) -> bytes:
    chunks: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = stream.read(min(remaining, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _respond(
    start_response: StartResponse, answer: tuple[int, Headers, bytes] | StreamedReply
) -> Iterable[bytes]:
    """Send an answer; a replay keeps the first answer's reason phrase, and one from the
    result store is the iterable of its chunks."""
    if isinstance(answer, StreamedReply):
        start_response(
            f"{answer.status} {answer.reason or standard_phrase(answer.status)}", answer.headers
        )
        return answer.chunks
    status, headers, body = answer
    reason = answer.reason if isinstance(answer, Replayed) else None
    start_response(
        f"{status} {reason or standard_phrase(status)}",
        [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers],
    )
    return [body]


def _to_bytes(headers: list[tuple[str, str]]) -> Headers:
    return [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]


def _to_text(headers: Headers) -> list[tuple[str, str]]:
    return [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]


def _close(result: Iterable[bytes] | None) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()


class _Capture(HeldBody):
    """The app's ``start_response`` and ``write``, and the body it yields, held up to
    ``limit`` bytes (in a temporary file past ``spool_over``)."""

    def __init__(self, limit: int, spool_over: int | None) -> None:
        super().__init__(limit, spool_over)
        self.status_line: str | None = None
        self.headers: list[tuple[str, str]] = []
        self.exc_info: ExcInfo | None = None
        self.over = False
        self.reason = "size-exceeded"

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], object]:
        if exc_info is not None and self.status_line is not None and self.over:
            raise exc_info[1].with_traceback(exc_info[2])  # PEP 3333: headers already sent
        self.status_line = status
        self.headers = list(headers)
        self.exc_info = exc_info
        return self.add

    @property
    def status(self) -> int:
        assert self.status_line is not None
        return int(self.status_line.split(" ", 1)[0])

    @property
    def reason_phrase(self) -> str | None:
        """The status line's reason phrase as the app wrote it (``CREATED`` from Flask)."""
        assert self.status_line is not None
        return self.status_line.partition(" ")[2] or None

    def add(self, chunk: bytes) -> None:
        if self.hold(chunk):
            self.over = True

    def streams(self, core: Core) -> bool:
        """Whether the response should pass through at once (known before its body): a
        streaming content type, or a declared length over the limit."""
        if self.status_line is None:
            return False
        raw = _to_bytes(self.headers)
        if core.streams(raw):
            self.reason = "streaming"
            return True
        for name, value in self.headers:
            if name.lower() == "content-length" and value.strip().isdigit():
                return int(value) > self._limit
        return False
