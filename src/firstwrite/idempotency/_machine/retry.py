"""Retries for DynamoDB errors that are not answers: throttling, 5xx, dropped connections.

Bounded exponential backoff with full jitter (sleep ``uniform(0, min(cap, base * 2**n))``), the
scheme AWS recommends because it spreads a herd of throttled clients out. A failed condition
(``ConditionalCheckFailedException``, ``TransactionCanceledException``) is an answer and is never
retried here: the state machine reads it. Retrying a conditional write after a lost response is
safe because the state machine recognises its own earlier write by the owner token.

:func:`perform` is *the* retry loop, and its reporting, for every request of the layer, sync or
async: the retries are effects (a :class:`~firstwrite.idempotency.effects.Sleep`, then the same
:class:`~firstwrite.idempotency.effects.Call` again), so the drivers have no retry code of their own.

The client's errors are recognised by their shape (:mod:`firstwrite.idempotency.client_errors`): like the whole layer,
this module imports no botocore. These retries stack on botocore's own (legacy mode: up to 10
attempts); pass a client built with ``Config(retries={"total_max_attempts": 1})`` to leave all
retrying to this policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ..client_errors import is_sdk_error, is_transport_error, response_of
from ..config import RetryPolicy
from ..effects import Call, Sleep, Steps
from ..errors import DeadlineExceededError, TableNotFoundError
from ..requests import tables_of
from .budget import Deadline

if TYPE_CHECKING:
    from ..clock_skew import ClockSkew
from .reporting import Reporter

Kind = Literal["throttle", "transient"]

THROTTLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "Throttling",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
    }
)
TRANSIENT_CODES = frozenset(
    {
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionInProgressException",
        "TransactionConflictException",
        "ReplicatedWriteConflictException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)

# Error codes that answer the request: the commonest errors by far, so checked before classify().
CONDITION_FAILED = "ConditionalCheckFailedException"
ANSWERS = frozenset({CONDITION_FAILED, "TransactionCanceledException"})


def classify(exc: BaseException) -> Kind | None:
    """``"throttle"``, ``"transient"`` or ``None`` (not retryable: an answer or a bug). Errors
    are told apart by their shape (:mod:`firstwrite.idempotency.client_errors`)."""
    response = response_of(exc)
    if response is not None:
        code = str(response["Error"].get("Code", ""))
        if code in THROTTLE_CODES:
            return "throttle"
        if code in TRANSIENT_CODES:
            return "transient"
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return "transient" if isinstance(status, int) and status >= 500 else None
    if is_transport_error(exc):
        return "transient"
    return None


def backoff(policy: RetryPolicy, attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Full-jitter delay before retry number ``attempt`` (1-based)."""
    return float(rng() * min(policy.cap, policy.base * 2.0 ** (attempt - 1)))


def perform(
    call: Call,
    policy: RetryPolicy,
    rng: Callable[[], float],
    report: Reporter,
    key: str,
    record_id: str,
    conditional: bool = False,
    deadline: Deadline | None = None,
    skew: ClockSkew | None = None,
) -> Steps[Any]:
    """Perform ``call`` under ``policy``: yield it, and again after a backoff for each
    retryable error, until it answers (the response is returned), fails with an answer (a
    failed condition or a cancelled transaction: re-raised at once), or the attempts run out
    (re-raised, logged with its ``dynamo_error_code``). ``key`` (the caller's idempotency key)
    and ``record_id`` go into the logs. A missing table becomes :class:`TableNotFoundError`.

    ``conditional``: a conditional write, whose failed condition is an answer, never an error:
    ``(True, returned attributes)`` or ``(False, the ALL_OLD item or None)``. The same loop, so
    a failed condition costs no second generator and no re-raise (the duplicate's hot path);
    one function, not a wrapper per kind, so a request enters one frame less.

    ``deadline``: the call's time budget. A retry whose backoff would end past it is not made:
    :class:`DeadlineExceededError` (from the last error) instead, logged and counted.

    ``skew``: the guard's estimate of DynamoDB's clock, given every answer (and every error's
    response) with the local time its call was sent."""
    observer = skew if skew is not None and skew.enabled else None
    reporting = report.enabled  # the default sink is off: no timing, no calls to report
    start = report.start() if reporting else 0.0
    attempt = 0
    while True:
        sent = 0.0 if deadline is None else deadline.monotonic()
        asked = 0.0 if observer is None else observer.clock()
        try:
            response: dict[str, Any] = yield call
        except Exception as exc:
            answer = response_of(exc)
            if observer is not None and answer is not None:
                observer.observe(answer, asked)
            if answer is None and not is_sdk_error(exc):
                raise  # not the client's: a bug, or the caller's own exception
            code = type(exc).__name__ if answer is None else str(answer["Error"].get("Code", ""))
            if code in ANSWERS:
                if reporting:
                    report.refused(call, exc, start)
                if conditional and answer is not None and code == CONDITION_FAILED:
                    return False, answer.get("Item")
                raise
            attempt += 1
            kind = classify(exc)
            if kind is None or attempt >= policy.max_attempts:
                report.gave_up(call, code, kind is not None, key, record_id, start)
                if code == "ResourceNotFoundException" and answer is not None:
                    raise TableNotFoundError.raised_for(
                        exc, tables_of(call), answer, call.operation
                    ) from exc
                raise
            delay = backoff(policy, attempt, rng)
            # another attempt, after the backoff, must end inside the budget: one as long as
            # this call, or a tenth of the budget if this call held the SDK's own retries
            if deadline is not None and deadline.left() <= delay + min(
                deadline.monotonic() - sent, deadline.budget / 10
            ):
                raise budget_spent(
                    call.operation, code, delay, key, record_id, deadline, report
                ) from exc
            report.retrying(call.operation, kind, code, attempt, delay, key, record_id)
            yield Sleep(delay)
        else:
            if observer is not None:
                observer.observe(response, asked)
            if reporting:
                report.answered(call, response, start)
            if conditional:
                return True, response.get("Attributes")
            return response


def budget_spent(
    operation: str,
    code: str,
    delay: float,
    key: str,
    record_id: str,
    deadline: Deadline,
    report: Reporter,
) -> DeadlineExceededError:
    """The error (logged and counted) of a call whose next retry, after ``delay``, would end
    past ``deadline``; a client is told to come back after that delay, and at least a second."""
    elapsed = deadline.elapsed()
    report.deadline_exceeded(operation, code, key, record_id, deadline.budget, elapsed)
    return DeadlineExceededError(
        key,
        retry_after=max(1.0, delay),
        budget=deadline.budget,
        elapsed=elapsed,
        operation=operation,
        dynamo_error_code=code,
        record_id=record_id,
    )
