"""The middleware's configuration: one frozen object, validated at construction.

The DynamoDB side (table, retention, lease, client) is the layer's own ``IdempotencyConfig``
and guard, shared with the rest of the application; this object only says how HTTP maps onto
it. Bad values raise ``ValueError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .request import HttpRequest
from .routes import DEFAULT_METHODS, Fingerprint, Route

__all__ = [
    "DEFAULT_REPLAY_HEADERS",
    "NEVER_REPLAYED",
    "NEVER_STORED",
    "HttpConfig",
    "RetryAfterContext",
    "RetryAfterPolicy",
    "expected_duration",
    "layer_retry_after",
    "stored_by_default",
]

# Replayed with the stored body. Anything else the first response carried is dropped.
DEFAULT_REPLAY_HEADERS = frozenset(
    {
        "content-type",
        "content-encoding",
        "content-language",
        "content-disposition",
        "content-location",
        "location",
        "etag",
        "last-modified",
        "link",
        "cache-control",
        "expires",
    }
)
# Never stored, whatever the allow-list says: cookies and credentials belong to one response;
# hop-by-hop headers (RFC 9110 7.6.1) to one connection; the length is recomputed on replay;
# the replay marker is the middleware's own.
NEVER_REPLAYED = frozenset(
    {
        "set-cookie",
        "set-cookie2",
        "authorization",
        "proxy-authorization",
        "www-authenticate",
        "proxy-authenticate",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "date",
        "server",
        "idempotent-replayed",
    }
)
# Answers about the caller's credentials or rate, not about the request: a retry must be able
# to succeed once the caller authenticates or slows down.
NEVER_STORED = frozenset({401, 403, 429})


def stored_by_default(status: int) -> bool:
    """2xx and 4xx responses are stored and replayed; 1xx, 3xx and 5xx release the key."""
    return 200 <= status < 300 or 400 <= status < 500


@dataclass(frozen=True, slots=True)
class RetryAfterContext:
    """What a Retry-After policy may use: the route, the handler's observed duration on it
    (the 90th percentile of recent runs in this process; ``None`` before the first), and the
    layer's own value (``InProgressError.retry_after``, seconds)."""

    route: str
    expected: float | None
    layer: float


RetryAfterPolicy = Callable[[RetryAfterContext], float]


def expected_duration(context: RetryAfterContext) -> float:
    """The default: about as long as the handler usually takes (1 s before any observation),
    never longer than the layer says the claim can last."""
    expected = 1.0 if context.expected is None else context.expected
    return min(expected, context.layer) if context.layer > 0 else expected


def layer_retry_after(context: RetryAfterContext) -> float:
    """Defer to the layer's value (``InProgressError.retry_after``)."""
    return context.layer


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """How HTTP requests map onto idempotency records.

    Requests are guarded when their method is in ``methods`` (default POST and PATCH) and they
    carry the ``header``, unless a ``routes`` entry (first match wins) says otherwise; see
    :class:`~firstwrite.http.Route`. A record is scoped by method, path and ``principal(request)``
    (the authenticated user, API key or tenant; ``None`` from it answers 401), so one caller can
    never replay another's response.

    With a result store on the guard, a response held to be stored goes to a temporary file
    once it is over ``spool_threshold`` bytes, and is stored from there. ``replay`` is
    ``"full"`` or ``"status-only"``: keep the status and headers of responses, never their
    bodies (a route's own ``replay`` overrides it).
    """

    routes: Sequence[Route] = ()
    methods: Iterable[str] = DEFAULT_METHODS
    require_key: bool = False
    principal: Callable[[HttpRequest], str | None] | None = None
    fingerprint: Fingerprint = "body"
    header: str = "Idempotency-Key"
    max_key_length: int = 255
    key_pattern: str | None = None
    store_status: Callable[[int], bool] | Collection[int] = stored_by_default
    replay_headers: Iterable[str] = DEFAULT_REPLAY_HEADERS
    stream_types: Iterable[str] = ("text/event-stream",)
    max_request_body: int = 1024 * 1024
    max_stored_response: int = 256 * 1024
    max_result_store_response: int = 1 << 30
    spool_threshold: int = 1 << 20
    replay: Literal["full", "status-only"] = "full"
    lease: float | None = None
    wait: float | None = None
    budget: float | None = None
    retry_after: float | RetryAfterPolicy = expected_duration
    on_unstored: Literal["keep", "release"] = "keep"
    replayed_header: str = "Idempotent-Replayed"
    _key_regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "routes", tuple(self.routes))
        object.__setattr__(self, "methods", frozenset(m.upper() for m in self.methods))
        replay = frozenset(h.lower() for h in self.replay_headers)
        forbidden = sorted(replay & NEVER_REPLAYED)
        if forbidden:
            raise ValueError(f"these headers are never replayed: {', '.join(forbidden)}")
        object.__setattr__(self, "replay_headers", replay)
        object.__setattr__(
            self, "stream_types", frozenset(t.lower().strip() for t in self.stream_types)
        )
        if not callable(self.store_status):
            statuses = frozenset(self.store_status)
            if statuses & NEVER_STORED:
                raise ValueError("401, 403 and 429 responses are never stored")
            if any(not 100 <= s <= 599 for s in statuses):
                raise ValueError("store_status holds HTTP statuses (100-599)")
            object.__setattr__(self, "store_status", statuses)
        if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", self.header):
            raise ValueError(f"not an HTTP header name: {self.header!r}")
        if not 1 <= self.max_key_length <= 1024:
            raise ValueError("max_key_length must be within 1..1024")
        object.__setattr__(
            self, "_key_regex", None if self.key_pattern is None else re.compile(self.key_pattern)
        )
        limits = (self.max_request_body, self.max_stored_response, self.max_result_store_response)
        if min(*limits, self.spool_threshold) < 0:
            raise ValueError("size limits must be >= 0")
        if self.replay not in ("full", "status-only"):
            raise ValueError("replay is 'full' or 'status-only'")
        if self.lease is not None and self.lease <= 0:
            raise ValueError("lease must be > 0 seconds")
        if self.wait is not None and self.wait < 0:
            raise ValueError("wait must be >= 0 seconds")
        if self.budget is not None and not self.budget > 0:
            raise ValueError("budget must be > 0 seconds")
        if not callable(self.retry_after) and not self.retry_after >= 0:
            raise ValueError("retry_after must be >= 0 seconds or a policy")
        if self.on_unstored not in ("keep", "release"):
            raise ValueError("on_unstored is 'keep' or 'release'")
        if self.replayed_header.lower() in replay or not self.replayed_header:
            raise ValueError("replayed_header must be a header the response does not carry")

    @property
    def key_regex(self) -> re.Pattern[str] | None:
        return self._key_regex

    def stores(self, status: int) -> bool:
        """Whether a response with ``status`` is stored (and replayed) or releases the key."""
        if status in NEVER_STORED:
            return False
        store = self.store_status
        if callable(store):
            return bool(store(status))
        return status in store
