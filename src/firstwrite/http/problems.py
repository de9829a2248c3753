"""Every error the middleware answers, as an RFC 9457 ``application/problem+json`` body.

Each error has a stable ``type`` URI (a URN: it names the error and never changes; the table in
``docs/http.md`` documents each one), an HTTP status and a title. The ``detail`` says what was
wrong with this request; some carry extension members (``retry_after``, ``original_status``).
"""

from __future__ import annotations

import enum
import json
import math
from typing import Any

__all__ = ["PROBLEM_CONTENT_TYPE", "Problem", "ProblemResponse", "render"]

PROBLEM_CONTENT_TYPE = "application/problem+json"


class Problem(enum.Enum):
    """``(type URI, status, title)`` of each error."""

    KEY_MISSING = (
        "urn:firstwrite:problem:idempotency-key-missing",
        400,
        "Idempotency-Key header required",
    )
    KEY_INVALID = (
        "urn:firstwrite:problem:idempotency-key-invalid",
        400,
        "Invalid Idempotency-Key header",
    )
    PRINCIPAL_REQUIRED = (
        "urn:firstwrite:problem:principal-required",
        401,
        "Caller not identified",
    )
    REQUEST_TOO_LARGE = (
        "urn:firstwrite:problem:request-too-large",
        413,
        "Request body too large for an idempotent request",
    )
    IN_PROGRESS = (
        "urn:firstwrite:problem:request-in-progress",
        409,
        "A request with this Idempotency-Key is still in progress",
    )
    KEY_REUSED = (
        "urn:firstwrite:problem:idempotency-key-reused",
        422,
        "Idempotency-Key reused with a different request",
    )
    RESPONSE_NOT_STORED = (
        "urn:firstwrite:problem:response-not-stored",
        409,
        "The first response for this Idempotency-Key was not stored",
    )
    STORE_UNAVAILABLE = (
        "urn:firstwrite:problem:idempotency-store-unavailable",
        503,
        "The idempotency store is unavailable",
    )

    @property
    def type_uri(self) -> str:
        return str(self.value[0])

    @property
    def status(self) -> int:
        return int(self.value[1])

    @property
    def title(self) -> str:
        return str(self.value[2])


Headers = list[tuple[bytes, bytes]]
ProblemResponse = tuple[int, Headers, bytes]


def render(
    problem: Problem, detail: str, *, retry_after: float | None = None, **extensions: Any
) -> ProblemResponse:
    """``(status, headers, body)`` of ``problem``; ``retry_after`` (seconds) also becomes a
    ``Retry-After`` header (whole seconds, at least 1: a ``0`` invites a tight retry loop)."""
    document: dict[str, Any] = {
        "type": problem.type_uri,
        "title": problem.title,
        "status": problem.status,
        "detail": detail,
    }
    headers: Headers = [(b"content-type", PROBLEM_CONTENT_TYPE.encode())]
    if retry_after is not None:
        seconds = retry_after_seconds(retry_after)
        document["retry_after"] = seconds
        headers.append((b"retry-after", str(seconds).encode()))
    document.update(extensions)
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    headers.append((b"content-length", str(len(body)).encode()))
    return problem.status, headers, body


def retry_after_seconds(seconds: float) -> int:
    """A ``Retry-After`` delay: whole seconds, rounded up, at least 1."""
    if not math.isfinite(seconds):  # NaN or infinite: a policy bug
        return 1
    return max(1, math.ceil(seconds))
