"""Retries for DynamoDB errors that are not answers: throttling, 5xx, dropped connections.

Bounded exponential backoff with full jitter (sleep ``uniform(0, min(cap, base * 2**n))``), the
scheme AWS recommends because it spreads a herd of throttled clients out. A failed condition
(``ConditionalCheckFailedException``, ``TransactionCanceledException``) is an answer and is never
retried here: the state machine reads it. Retrying a conditional write after a lost response is
safe because the state machine recognises its own earlier write by the owner token.

These retries stack on botocore's own (legacy mode: up to 10 attempts); pass a client built with
``Config(retries={"total_max_attempts": 1})`` to leave all retrying to this policy.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from .config import RetryPolicy

T = TypeVar("T")
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
_ANSWERS = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})

OnRetry = Callable[[str, Kind, str, int, float], None]


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return type(exc).__name__


def classify(exc: BaseException) -> Kind | None:
    """``"throttle"``, ``"transient"`` or ``None`` (not retryable: an answer or a bug)."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        if code in THROTTLE_CODES:
            return "throttle"
        if code in TRANSIENT_CODES:
            return "transient"
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return "transient" if isinstance(status, int) and status >= 500 else None
    if isinstance(exc, (BotoConnectionError, HTTPClientError)):
        return "transient"
    return None


def backoff(policy: RetryPolicy, attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Full-jitter delay before retry number ``attempt`` (1-based)."""
    return float(rng() * min(policy.cap, policy.base * 2.0 ** (attempt - 1)))


class Retrier:
    """Runs one DynamoDB call under a :class:`RetryPolicy`."""

    __slots__ = ("on_retry", "policy", "rng", "sleep")

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        on_retry: OnRetry | None = None,
    ) -> None:
        self.policy = policy
        self.sleep = sleep
        self.rng = rng
        self.on_retry = on_retry

    def call(self, operation: str, fn: Callable[..., T], request: dict[str, Any]) -> T:
        attempt = 0
        while True:
            try:
                return fn(**request)
            except (ClientError, BotoCoreError) as exc:
                if error_code(exc) in _ANSWERS:
                    raise  # an answer (e.g. a failed condition), not a failure: never retried
                attempt += 1
                kind = classify(exc)
                if kind is None or attempt >= self.policy.max_attempts:
                    raise
                delay = backoff(self.policy, attempt, self.rng)
                if self.on_retry is not None:
                    self.on_retry(operation, kind, error_code(exc), attempt, delay)
                self.sleep(delay)


class AsyncRetrier(Retrier):
    """The same policy for aiobotocore calls."""

    __slots__ = ("async_sleep",)

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
        on_retry: OnRetry | None = None,
    ) -> None:
        super().__init__(policy, rng=rng, on_retry=on_retry)
        self.async_sleep = sleep

    async def acall(
        self, operation: str, fn: Callable[..., Awaitable[T]], request: dict[str, Any]
    ) -> T:
        attempt = 0
        while True:
            try:
                return await fn(**request)
            except (ClientError, BotoCoreError) as exc:
                if error_code(exc) in _ANSWERS:
                    raise  # an answer (e.g. a failed condition), not a failure: never retried
                attempt += 1
                kind = classify(exc)
                if kind is None or attempt >= self.policy.max_attempts:
                    raise
                delay = backoff(self.policy, attempt, self.rng)
                if self.on_retry is not None:
                    self.on_retry(operation, kind, error_code(exc), attempt, delay)
                await self.async_sleep(delay)
