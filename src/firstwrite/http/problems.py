"""Every error the middleware answers, as an RFC 9457 ``application/problem+json`` body.

Each error has a stable ``type`` URI (a URN: it names the error and never changes; the table in
``docs/http.md`` documents each one), an HTTP status and a title. The ``detail`` says what was
wrong with this request; some carry extension members (``retry_after``, ``original_status``).

:func:`answer_for` is the one mapping from the layer's errors
(:mod:`firstwrite.idempotency.errors`) to problems, used by the ASGI and WSGI middlewares and by
the Lambda HTTP handlers (:mod:`.lambda_proxy`) alike: no error of the layer reaches a client as
a 500.
"""

from __future__ import annotations

import enum
import json
import math
from typing import Any, NamedTuple

from firstwrite.idempotency import errors

__all__ = [
    "PROBLEM_CONTENT_TYPE",
    "Answer",
    "Problem",
    "ProblemResponse",
    "answer_for",
    "render",
    "render_error",
]

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
    KEY_EXPIRED = (
        "urn:firstwrite:problem:idempotency-key-expired",
        410,
        "Idempotency-Key expired: this request is too late to be retried",
    )
    CONDITION_FAILED = (
        "urn:firstwrite:problem:condition-failed",
        409,
        "The request's own write condition failed",
    )
    RECOVERY_REQUIRED = (
        "urn:firstwrite:problem:recovery-required",
        503,
        "An interrupted request with this Idempotency-Key must be reconciled first",
    )
    WRITES_REFUSED = (
        "urn:firstwrite:problem:writes-refused",
        422,
        "The request's writes were refused",
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


class Answer(NamedTuple):
    """What an error answers: its problem, the detail, and the ``Retry-After`` delay (seconds;
    ``None``: no header)."""

    problem: Problem
    detail: str
    retry_after: float | None = None


_UNAVAILABLE = "the request was not run: its key could not be checked; retry"
_NOT_REPLAYED = (
    "the first request with this key ran, but its response cannot be replayed ({}); it will "
    "not run again for this key"
)


def answer_for(error: BaseException, header: str = "Idempotency-Key") -> Answer | None:
    """The answer to an error of the idempotency layer (``header``: the key header's name, for
    the details), or ``None`` for an error that is not the layer's. Every subclass of
    :class:`~firstwrite.idempotency.errors.IdempotencyError` has one; the most specific class
    in the error's MRO decides."""
    if isinstance(error, errors.InProgressError):
        return Answer(
            Problem.IN_PROGRESS,
            "a request with this key is still being processed; retry after the delay to get "
            "its response",
            error.retry_after,
        )
    if isinstance(error, errors.PayloadMismatchError):
        return Answer(
            Problem.KEY_REUSED,
            f"this {header} was used for a different request (method, path, query or body "
            "differ); use a new key for a new request",
        )
    if isinstance(error, errors.MissingKeyError):
        return Answer(
            Problem.KEY_MISSING,
            f"this request requires an {header} (a unique value per operation, e.g. a UUID; "
            f"the same value on retries): {error}",
        )
    if isinstance(error, errors.LateRetryError):
        return Answer(
            Problem.KEY_EXPIRED,
            "the first request with this key was made too long ago: its record is past "
            "retention, so it is not run again; send a new request with a new key if it is "
            "still wanted",
        )
    if isinstance(error, errors.DeadlineExceededError):
        return Answer(
            Problem.STORE_UNAVAILABLE,
            "the request was not run: the idempotency store kept failing for the request's "
            "whole time budget; retry after the delay",
            error.retry_after,
        )
    if isinstance(error, errors.ClockSkewError):
        return Answer(
            Problem.STORE_UNAVAILABLE,
            "the request was not run: an earlier attempt's lease looks over, but this "
            "server's clock is too far from the store's to take it over safely; retry after "
            "the delay",
            error.retry_after,
        )
    if isinstance(error, errors.TransactionConflictError):
        return Answer(Problem.STORE_UNAVAILABLE, _UNAVAILABLE, 1.0)
    if isinstance(error, errors.BusinessConditionFailedError):
        return Answer(
            Problem.CONDITION_FAILED,
            "a condition of the request's own writes failed; nothing was written and the key "
            "is free",
        )
    if isinstance(error, (errors.TransactionCancelledError, errors.TooManyTransactItemsError)):
        return Answer(Problem.WRITES_REFUSED, f"nothing was written and the key is free: {error}")
    if isinstance(error, errors.ReplayedFailureError):
        return Answer(Problem.RESPONSE_NOT_STORED, _NOT_REPLAYED.format(error.message))
    if isinstance(
        error,
        (errors.SerializationError, errors.ResultDecryptionError, errors.ResultIntegrityError),
    ):
        return Answer(Problem.RESPONSE_NOT_STORED, _NOT_REPLAYED.format(type(error).__name__))
    if isinstance(error, errors.CompletionNotRecordedError):
        return Answer(
            Problem.STORE_UNAVAILABLE,
            "the request ran but its response could not be recorded; a retry after the delay "
            "may run it again",
            1.0,
        )
    if isinstance(error, errors.RecoveryRequiredError):
        return Answer(
            Problem.RECOVERY_REQUIRED,
            "the first request with this key was interrupted after it may have acted "
            "(recovery points recorded) and is not run again until it is reconciled; retry "
            "after the delay",
            error.retry_after,
        )
    if isinstance(error, errors.RecoveryFailedError):
        return Answer(
            Problem.RESPONSE_NOT_STORED,
            "the first request with this key was interrupted and then found to have failed "
            f"for good ({error.reason}); it will not run again for this key",
        )
    if isinstance(error, errors.LostClaimError):
        return Answer(
            Problem.IN_PROGRESS,
            "another worker took this request over; retry after the delay to get its response",
            1.0,
        )
    if isinstance(error, errors.IdempotencyError):
        # The store (a missing table, a result store down) or the layer's configuration: the
        # request was not run; the log says why (logged by the caller).
        return Answer(Problem.STORE_UNAVAILABLE, _UNAVAILABLE, 1.0)
    return None


def render_error(
    error: BaseException, header: str = "Idempotency-Key", *, retry_after: float | None = None
) -> ProblemResponse | None:
    """:func:`render` of :func:`answer_for` (``retry_after`` overrides the error's own delay,
    where it has one), or ``None`` for an error that is not the layer's."""
    answer = answer_for(error, header)
    if answer is None:
        return None
    delay = answer.retry_after
    if delay is not None and retry_after is not None:
        delay = retry_after
    return render(answer.problem, answer.detail, retry_after=delay)
