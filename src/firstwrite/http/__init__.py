"""The ``Idempotency-Key`` header for web services.

Pure ASGI and WSGI middleware over the idempotency layer.

>>> app.add_middleware(IdempotencyMiddleware, guard=AsyncIdempotency(config, client=client))
>>> flask_app.wsgi_app = WSGIIdempotencyMiddleware(flask_app.wsgi_app, guard=Idempotency())

A POST or PATCH carrying ``Idempotency-Key`` runs once per key (per method, path and caller);
a retry gets the stored response byte for byte with ``Idempotent-Replayed: true``; a retry while
the first runs gets 409 with ``Retry-After``; the key reused for another request gets 422. Every
error is ``application/problem+json`` (:class:`Problem`). See ``docs/http.md``.

The rules live once in :mod:`.core`, the guard calls they lead to once in :mod:`.guarding`
(generators of the layer's guard steps); :mod:`.asgi` and :mod:`.wsgi` move bytes and drive
them. This package imports nothing but the standard library and :mod:`firstwrite.idempotency`.
"""

from __future__ import annotations

from .asgi import IdempotencyMiddleware
from .config import (
    DEFAULT_REPLAY_HEADERS,
    NEVER_REPLAYED,
    NEVER_STORED,
    HttpConfig,
    RetryAfterContext,
    RetryAfterPolicy,
    expected_duration,
    layer_retry_after,
    stored_by_default,
)
from .context import CONTEXT_KEY, AsyncRequestIdempotency, RequestIdempotency, idempotency
from .core import reconciled_response
from .key import InvalidKey, parse_key
from .problems import PROBLEM_CONTENT_TYPE, Problem
from .request import HttpRequest
from .routes import Route
from .wsgi import WSGIIdempotencyMiddleware

__all__ = [
    "CONTEXT_KEY",
    "DEFAULT_REPLAY_HEADERS",
    "NEVER_REPLAYED",
    "NEVER_STORED",
    "PROBLEM_CONTENT_TYPE",
    "AsyncRequestIdempotency",
    "HttpConfig",
    "HttpRequest",
    "IdempotencyMiddleware",
    "InvalidKey",
    "Problem",
    "RequestIdempotency",
    "RetryAfterContext",
    "RetryAfterPolicy",
    "Route",
    "WSGIIdempotencyMiddleware",
    "expected_duration",
    "idempotency",
    "layer_retry_after",
    "parse_key",
    "reconciled_response",
    "stored_by_default",
]
