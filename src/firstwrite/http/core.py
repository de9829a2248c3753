"""The decisions both middlewares share, with no I/O.

Which requests are guarded, the key, the record's scope, the fingerprint, what a layer outcome or error answers, whether a response is
stored, the stored form of a response, and the Retry-After estimate.

The ASGI and WSGI middlewares (:mod:`.asgi`, :mod:`.wsgi`) only move bytes and call the guard
in the order these functions say; every rule lives here once.
"""

from __future__ import annotations

import collections
import enum
import hashlib
import json
import logging
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple, cast
from urllib.parse import quote

import firstwrite.shared.http_reply as http_reply
from firstwrite.idempotency import (
    DeadlineExceededError,
    InProgressError,
    Reconciled,
    Replay,
    ReplayedFailureError,
    SerializationError,
    SpooledResult,
)

from .config import HttpConfig, RetryAfterContext
from .key import InvalidKey, parse_key
from .problems import Problem, ProblemResponse, render, render_error
from .request import HttpRequest
from .routes import INHERIT, Fingerprint, Route
from .streamed_replies import StreamedReply, streamed

log = logging.getLogger("firstwrite.http")

Headers = list[tuple[bytes, bytes]]
Response = tuple[int, Headers, bytes]

UNSTORED_HEADER = b"idempotency-replay-unavailable"  # on a first response that was not stored
STATUS_ONLY = b"status-only"  # its value on a status-only route's responses: no body replayed
SPOOL_CHUNK = 1 << 20  # a spooled body is sent to the client in pieces of this size
# Headers that describe a body: not kept for a status-only replay, which has none.
_BODY_HEADERS = frozenset(
    {b"content-type", b"content-encoding", b"content-language", b"content-disposition", b"etag"}
)
# What quote() leaves alone: a principal made only of these is its own quoted form.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]+", re.ASCII)
_UNAVAILABLE_DETAIL = "the request was not run: its key could not be checked; retry"
MAX_SCOPE_LENGTH = 512  # longer scopes are hashed: DynamoDB keys hold 2,048 bytes


@dataclass(frozen=True, slots=True)
class Resolved:
    """The effective settings of a guarded route."""

    label: str
    require_key: bool
    fingerprint: Fingerprint
    lease: float | None
    wait: float | None
    budget: float | None
    transactional: bool
    status_only: bool = False  # replay="status-only": keep the status and headers, no body


class Plan(NamedTuple):
    """A request the middleware guards: its route, key, view and record scope, and when the
    middleware took it up (``time.monotonic()``: the start of its budget)."""

    route: Resolved
    key: str
    request: HttpRequest
    scope: str
    started: float = 0.0

    def budget_left(self) -> float | None:
        """What is left of the route's budget (``None``: the guard's own, per call)."""
        budget = self.route.budget
        return None if budget is None else budget - (time.monotonic() - self.started)


class Verdict(enum.Enum):
    STORE = "store"  # complete the key with the response
    RELEASE = "release"  # fail the key as retryable: the next request with it runs


class Core:
    """One middleware's rules over one :class:`HttpConfig` (plus its observed durations)."""

    def __init__(self, config: HttpConfig) -> None:
        self.config = config
        self.header = config.header.lower()
        self.header_bytes = self.header.encode("latin-1")
        self.durations = Durations()
        self._replay_header_bytes = frozenset(
            name.encode("latin-1") for name in config.replay_headers
        )
        default_route = Route(
            "/*", methods=config.methods, require_key=config.require_key, lease=config.lease
        )
        self._routes = (*config.routes, default_route)
        self._resolved: dict[Route, Resolved] = {
            route: self._resolve(route) for route in self._routes if not route.exclude
        }

    def _resolve(self, route: Route) -> Resolved:
        cfg = self.config
        return Resolved(
            label=route.label,
            require_key=route.require_key,
            fingerprint=cfg.fingerprint if route.fingerprint is INHERIT else route.fingerprint,
            lease=cfg.lease if route.lease is None else route.lease,
            wait=cfg.wait if route.wait is None else route.wait,
            budget=cfg.budget if route.budget is None else route.budget,
            transactional=route.transactional,
            status_only=(route.replay or cfg.replay) == "status-only",
        )

    # -- which requests ----------------------------------------------------------------------

    def route_for(self, method: str, path: str) -> Resolved | None:
        """The guarded route of a request, or ``None`` (left alone). The first route whose
        pattern and method match decides; a path matching a route with other methods falls
        through to the next one, ending with the default (``config.methods``, any path)."""
        for route in self._routes:
            if route.matches(method, path):
                return None if route.exclude else self._resolved[route]
        return None

    def plan(
        self, route: Resolved, header_value: str | None, request: HttpRequest
    ) -> Plan | ProblemResponse | None:
        """The guarded request, a problem to answer at once, or ``None``: run unguarded (no
        key on a route that does not require one)."""
        if header_value is None:
            if route.require_key:
                return render(
                    Problem.KEY_MISSING,
                    f"{request.method} {request.path} requires an {self.config.header} header "
                    "(a unique value per operation, e.g. a UUID; the same value on retries)",
                )
            return None
        try:
            key = parse_key(
                header_value,
                max_length=self.config.max_key_length,
                pattern=self.config.key_regex,
            )
        except InvalidKey as bad:
            return render(Problem.KEY_INVALID, bad.reason)
        principal = "*"  # no principal configured: one namespace (quote() escapes a real '*')
        if self.config.principal is not None:
            who = self.config.principal(request)
            if not who:
                return render(
                    Problem.PRINCIPAL_REQUIRED,
                    "idempotent requests are scoped to the caller, and this request does not "
                    "identify one (authenticate first)",
                )
            who = str(who)
            principal = who if _UNRESERVED.fullmatch(who) else quote(who, safe="")
        scope = f"{principal} {request.method} {request.path}"
        if len(scope) > MAX_SCOPE_LENGTH:
            scope = "sha256:" + hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()
        return Plan(route, key, request, scope, time.monotonic())

    def too_large(self, limit: int) -> ProblemResponse:
        return render(
            Problem.REQUEST_TOO_LARGE,
            f"an idempotent request's body is read whole to fingerprint it; this one is over "
            f"the {limit}-byte limit",
            limit=limit,
        )

    # -- the fingerprint ---------------------------------------------------------------------

    def payload(self, plan: Plan, body: bytes) -> Any:
        """What the layer fingerprints for the mismatch check (``UNSET``-like ``None`` is not
        used: ``fingerprint=None`` passes no payload at all, see :meth:`has_payload`)."""
        how = plan.route.fingerprint
        query = plan.request.query
        if how == "body":
            return [query, hashlib.sha256(body).hexdigest()]
        if isinstance(how, tuple):
            return [query, _fields(body, how)]
        if callable(how):
            value = how(plan.request, body)
            if isinstance(value, (bytes, bytearray, memoryview)):
                return hashlib.sha256(bytes(value)).hexdigest()
            return value
        raise ValueError(f"unknown fingerprint setting {how!r}")  # pragma: no cover

    @staticmethod
    def has_payload(plan: Plan) -> bool:
        return plan.route.fingerprint is not None

    # -- answers -----------------------------------------------------------------------------

    def answer_error(self, plan: Plan, error: BaseException) -> ProblemResponse | None:
        """The answer to an error from claiming or replaying (:func:`.problems.answer_for`,
        with the route's ``Retry-After`` policy for "in progress"); a failure of the store
        that is not the layer's own error (the SDK's connection errors...) is a 503 too.
        ``None`` only for what cannot be answered (``BaseException`` that is not an
        ``Exception``: let it propagate)."""
        if isinstance(error, InProgressError):
            return render_error(
                error, self.config.header, retry_after=self.retry_after(plan.route.label, error)
            )
        answered = render_error(error, self.config.header)
        if answered is not None:
            if answered[0] >= 500 and not isinstance(error, DeadlineExceededError):
                # Logged here with its message (which table, how to create it...); a spent
                # budget is logged by the layer, with its error code.
                log.error("idempotency store unavailable for %s", plan.request, exc_info=error)
            return answered
        if not isinstance(error, Exception):
            return None
        log.error("idempotency store unavailable for %s", plan.request, exc_info=error)
        return render(Problem.STORE_UNAVAILABLE, _UNAVAILABLE_DETAIL, retry_after=1.0)

    def retry_after(self, label: str, error: InProgressError) -> float:
        policy = self.config.retry_after
        if not callable(policy):
            return float(policy)
        context = RetryAfterContext(label, self.durations.expected(label), error.retry_after)
        return float(policy(context))

    def replay(self, replay: Replay) -> Response | Replayed | StreamedReply:
        """The stored response (byte for byte) with the replay marker, or the problem saying
        the first response was not stored. A response in the guard's result store comes as a
        :class:`~.streamed_replies.StreamedReply` (its body read in chunks)."""
        if replay.placement is not None:
            chunked = streamed(replay)
            if chunked is not None:
                chunked.headers.append((self.config.replayed_header, "true"))
                if chunked.length is not None and chunked.status not in (204, 304):
                    chunked.headers.append(("content-length", str(chunked.length)))
                return chunked
        try:
            raw = replay.value()
        except ReplayedFailureError as failure:
            data = failure.data if isinstance(failure.data, Mapping) else {}
            status = data.get("status")
            return render(
                Problem.RESPONSE_NOT_STORED,
                "the first request with this key ran, but its response was not stored "
                f"({data.get('reason', failure.message)}); it will not run again for this key",
                original_status=status if isinstance(status, int) else None,
            )
        if not isinstance(raw, (bytes, bytearray)):
            raise SerializationError(
                f"record {replay.record_id} does not hold an HTTP response (was the key written "
                "by something other than the middleware?)"
            )
        reply = _decode(bytes(raw))
        status, headers, body = reply.status, _header_bytes(reply.headers), reply.body
        headers.append((self.config.replayed_header.lower().encode("latin-1"), b"true"))
        if reply.body_omitted:
            headers.append((UNSTORED_HEADER, STATUS_ONLY))
        if status not in (204, 304):  # RFC 9110 8.6: no Content-Length on these
            headers.append((b"content-length", str(len(body)).encode()))
        replayed = Replayed((status, headers, body))
        replayed.reason = reply.reason
        return replayed

    # -- storing -----------------------------------------------------------------------------

    def held_limit(self, has_store: bool) -> int:
        """How big a response is held to be stored: ``max_stored_response``, or with a
        result store on the guard ``max_result_store_response`` (stored there, replayed in
        chunks)."""
        config = self.config
        if not has_store:
            return config.max_stored_response
        return max(config.max_stored_response, config.max_result_store_response)

    def spool_over(self, has_store: bool) -> int | None:
        """Past how many bytes a held response goes to a temporary file: ``spool_threshold``
        with a result store on the guard (stored from the file), else never (``None``)."""
        return self.config.spool_threshold if has_store else None

    def verdict(self, status: int) -> Verdict:
        return Verdict.STORE if self.config.stores(status) else Verdict.RELEASE

    def stored_form(
        self,
        status: int,
        headers: Headers,
        body: bytes | SpooledResult,
        reason: str | None = None,
        *,
        status_only: bool = False,
    ) -> bytes | SpooledResult:
        """What is stored for a response: its status (and reason phrase, when not the
        standard one), its allowed headers, its body; a body in a file stays there (the
        stored form is then a :class:`~firstwrite.idempotency.spooled_results.SpooledResult`).
        ``status_only``: no body, nor the headers that describe one."""
        allowed = self._replay_header_bytes
        kept = [
            [n.decode("latin-1"), v.decode("latin-1")]
            for n, v in headers
            if n.lower() in allowed and not (status_only and n.lower() in _BODY_HEADERS)
        ]
        if status_only:
            return http_reply.head(status, kept, reason, body_omitted=True)
        if isinstance(body, SpooledResult):
            return body.with_head(http_reply.head(status, kept, reason))
        return encode_response(status, kept, body, reason)

    def streams(self, headers: Headers) -> bool:
        """A response whose content type is in ``stream_types``: passed through as it comes."""
        for name, value in headers:
            if name.lower() == b"content-type":
                return self.streams_media(value.decode("latin-1"))
        return False

    def streams_media(self, content_type: str) -> bool:
        """Whether a ``Content-Type`` value is one of ``stream_types`` (parameters ignored;
        of repeated values joined with ", ", the first decides)."""
        types = self.config.stream_types
        media = content_type.split(",", 1)[0].split(";", 1)[0]
        return bool(types) and media.strip().lower() in types

    def unstored_data(self, status: int, reason: str) -> dict[str, Any]:
        return {"status": status, "reason": reason}


def refuse_status_only_guard(replay: str) -> None:
    """``ValueError`` for a guard whose ``replay`` is ``"status-only"``: it would record no
    response at all, not even its status, so a retry could not be answered as HTTP."""
    if replay == "status-only":
        raise ValueError(
            "the guard's IdempotencyConfig(replay='status-only') records no response, not even "
            "its status, so the middleware could not answer a retry; give the middleware a "
            "guard with replay='full' and set HttpConfig(replay='status-only') (or a Route's "
            "replay='status-only'): the status and headers are kept, never the body"
        )


class HeldBody:
    """A response body held until it is stored (both middlewares' capture of the app's
    response): its size against ``limit``, whether it is ``complete``. Held in memory, or,
    once over ``spool_over`` bytes (``None``: never), in an anonymous temporary file."""

    def __init__(self, limit: int, spool_over: int | None = None) -> None:
        self._limit = limit
        self._spool_over = spool_over
        self._chunks: list[bytes] = []
        self._file: BinaryIO | None = None
        self._size = 0
        self.complete = False

    def hold(self, chunk: bytes) -> bool:
        """Keep ``chunk``; whether what is held is now over the limit."""
        if chunk:
            self._size += len(chunk)
            if self._file is not None:
                self._file.write(chunk)
            else:
                self._chunks.append(chunk)
                if self._spool_over is not None and self._size > self._spool_over:
                    self._spool()
        return self._size > self._limit

    def _spool(self) -> None:
        self._file = cast(BinaryIO, tempfile.TemporaryFile(prefix="firstwrite-response-"))  # noqa: SIM115 (closed by forget)
        for held in self._chunks:
            self._file.write(held)
        self._chunks = []

    @property
    def spooled(self) -> bool:
        return self._file is not None

    def body(self) -> bytes | SpooledResult:
        """What is held: bytes, or (spooled) the file's bytes as a
        :class:`~firstwrite.idempotency.spooled_results.SpooledResult`."""
        if self._file is None:
            return b"".join(self._chunks)
        self._file.flush()
        return SpooledResult(b"", self._file, self._size)

    def chunks(self) -> Iterator[bytes]:
        """What is held, in pieces (a spooled body read from its file)."""
        body = self.body()
        if isinstance(body, SpooledResult):
            yield from body.body_chunks(SPOOL_CHUNK)
        elif body:
            yield body

    def forget(self) -> None:
        """Let go of what is held (the temporary file is closed, so removed)."""
        self._chunks = []
        if self._file is not None:
            self._file.close()
            self._file = None


def _fields(body: bytes, names: tuple[str, ...]) -> Any:
    """The named (dotted) fields of a JSON object body; a body that is not one: its digest."""
    try:
        document = json.loads(body)
    except ValueError:
        return hashlib.sha256(body).hexdigest()
    if not isinstance(document, dict):
        return hashlib.sha256(body).hexdigest()
    selected: dict[str, Any] = {}
    for name in names:
        value: Any = document
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        selected[name] = value
    return selected


# -- the stored form: firstwrite.shared.http_reply's (the CLI and the console decode it too) ----


class Replayed(tuple[int, Headers, bytes]):
    """A replayed :data:`Response`; ``reason`` is the first answer's reason phrase when it was
    not the standard one (a WSGI replay sends the same status line: ``201 CREATED``)."""

    reason: str | None = None


def encode_response(
    status: int, headers: list[list[str]], body: bytes, reason: str | None = None
) -> bytes:
    return http_reply.encode(status, headers, body, reason)


def reconciled_response(
    status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()
) -> Reconciled:
    """The answer of a ``reconcile`` hook behind the middleware that found the interrupted
    request done: the response to store and replay (``status``, ``body``, ``headers`` as
    ``(name, value)``), as if the handler had answered it (:mod:`firstwrite.idempotency.recovery`)."""
    return Reconciled(encode_response(status, [[n, v] for n, v in headers], body))


def decode_response(raw: bytes) -> tuple[int, Headers, bytes]:
    reply = _decode(raw)
    return reply.status, _header_bytes(reply.headers), reply.body


def _decode(raw: bytes) -> http_reply.StoredReply:
    try:
        return http_reply.decode(raw)
    except ValueError as exc:
        raise SerializationError(str(exc)) from exc


def _header_bytes(headers: list[tuple[str, str]]) -> Headers:
    return [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]


# -- the Retry-After estimate ------------------------------------------------------------------


class Durations:
    """Recent handler durations per route (the last 64), for the Retry-After estimate."""

    WINDOW = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: dict[str, collections.deque[float]] = {}

    def observe(self, label: str, seconds: float) -> None:
        with self._lock:
            recent = self._recent.get(label)
            if recent is None:
                recent = self._recent[label] = collections.deque(maxlen=self.WINDOW)
            recent.append(seconds)

    def expected(self, label: str) -> float | None:
        """The 90th percentile of the recent durations, or ``None`` before the first."""
        with self._lock:
            recent = self._recent.get(label)
            if not recent:
                return None
            ordered = sorted(recent)
        return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
