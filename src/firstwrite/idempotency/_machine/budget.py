"""The time budget of one guarded call: its deadline, and the SDK's own retries kept inside it.

A guarded call (``run``, ``claim``, ``complete``... or a request through the middleware) gets
one :class:`Deadline`, ``budget`` seconds after it starts on the guard's monotonic clock. The
layer's retry loop (:func:`.retry.perform`) stops before a backoff that would end past it, and
raises :class:`~firstwrite.idempotency.errors.DeadlineExceededError`.

botocore retries inside a single call too (legacy mode, DynamoDB's default: up to 10 attempts,
about 25 s of backoff). :func:`install` hooks the client's ``needs-retry`` event, which botocore
asks before each of its retries: while a deadline is current (set by the drivers around each
transition, in a context variable, so the hook sees only the layer's own calls), the hook
declines a retry whose longest possible backoff for the client's retry mode, plus an attempt
as long as the last one, would reach the deadline; botocore then raises the error as after its
last attempt. The client is read by duck typing (``client.meta.events.register_first``,
``client.meta.config``), like everything else the layer knows of a client: no botocore import.

One attempt that hangs is bounded by the client's timeouts (:func:`slowest_attempt`); longer
than what is left, it is abandoned at the deadline (:mod:`.abandon`; :func:`check_timeouts`
warns). A claim back with the budget spent is not run on (:func:`spent_before_run`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple

from ..errors import DeadlineExceededError

__all__ = [
    "CURRENT",
    "Deadline",
    "check_timeouts",
    "deadline_for",
    "install",
    "release_grace",
    "slowest_attempt",
    "spent_before_run",
]

log = logging.getLogger("firstwrite.idempotency")


class Deadline(NamedTuple):
    """When the call's budget ends, on ``monotonic`` (the guard's clock)."""

    at: float
    budget: float
    monotonic: Callable[[], float]

    def left(self) -> float:
        """Seconds until the deadline (negative once past it)."""
        return self.at - self.monotonic()

    def elapsed(self) -> float:
        """Seconds of the budget used so far."""
        return self.budget - self.left()


CURRENT: ContextVar[Deadline | None] = ContextVar("firstwrite_deadline", default=None)
"""The deadline of the guarded call being driven in this context (``None`` outside one)."""


def deadline_for(budget: float | None, monotonic: Callable[[], float]) -> Deadline | None:
    """The deadline of a call starting now with ``budget`` seconds (``None``: unbounded)."""
    if budget is None:
        return None
    return Deadline(monotonic() + budget, budget, monotonic)


# botocore's retry modes, and the longest backoff each may sleep before retry number ``n``
# (1-based: after ``n`` attempts). Legacy mode's DynamoDB policy is deterministic (botocore's
# ``_retry.json``: base 0.05 s, growth factor 2); standard and adaptive modes sleep a random
# fraction of ``min(2 ** (n - 1), 20)`` seconds.
_LEGACY_BASE = 0.05
_MAX_BACKOFF = 20.0


def _legacy_bound(attempts: int) -> float:
    return float(_LEGACY_BASE * 2.0 ** max(0, attempts - 1))


def _standard_bound(attempts: int) -> float:
    return float(min(2.0 ** max(0, attempts - 1), _MAX_BACKOFF))


def _retries(client: Any) -> Mapping[str, Any]:
    retries = getattr(getattr(getattr(client, "meta", None), "config", None), "retries", None)
    return retries if isinstance(retries, Mapping) else {}


def backoff_bound(client: Any) -> Callable[[int], float]:
    """The longest backoff the client's retry mode may sleep after ``n`` attempts."""
    return _legacy_bound if _retries(client).get("mode", "legacy") == "legacy" else _standard_bound


def slowest_attempt(client: Any) -> float | None:
    """The longest one attempt of the client can take without an answer: its
    ``connect_timeout + read_timeout`` (``None`` when the client does not say)."""
    config = getattr(getattr(client, "meta", None), "config", None)
    connect = getattr(config, "connect_timeout", None)
    read = getattr(config, "read_timeout", None)
    if not isinstance(connect, (int, float)) or not isinstance(read, (int, float)):
        return None
    return float(connect) + float(read)


_MARK = "firstwrite_retry_mark"  # in botocore's per-request context: when the last retry began


class _Cut:
    """The ``needs-retry`` handler: ``False`` (no retry) when the longest backoff and another
    attempt as long as the last one would reach the current deadline, else ``None`` (botocore's
    own handler decides)."""

    __slots__ = ("bound",)

    def __init__(self, bound: Callable[[int], float]) -> None:
        self.bound = bound

    def __call__(
        self, attempts: int = 1, request_dict: Mapping[str, Any] | None = None, **_: Any
    ) -> bool | None:
        deadline = CURRENT.get()
        if deadline is None:
            return None
        now = deadline.monotonic()
        context = request_dict.get("context") if request_dict is not None else None
        mark = context.get(_MARK) if isinstance(context, dict) else None
        last_attempt = 0.0 if mark is None else max(0.0, now - mark)
        backoff = self.bound(attempts)
        if deadline.at - now <= backoff + last_attempt:
            return False
        if isinstance(context, dict):
            context[_MARK] = now + backoff  # the next attempt starts after the backoff at most
        return None


_HOOK_ID = "firstwrite-idempotency-budget"


def install(client: Any) -> bool:
    """Keep the client's own retries inside the current deadline (see the module docstring);
    once per client. ``False`` when the client has no botocore-style event system."""
    events = getattr(getattr(client, "meta", None), "events", None)
    register_first = getattr(events, "register_first", None)
    if not callable(register_first):
        return False
    register_first("needs-retry.dynamodb", _Cut(backoff_bound(client)), unique_id=_HOOK_ID)
    return True


def check_timeouts(client: Any, budget: float | None) -> bool:
    """``False`` (and a WARNING naming the numbers) when one hung attempt of ``client`` can
    outlast ``budget``: its connect and read timeouts add up to more. The budget still holds
    (such an attempt is abandoned at the deadline, :mod:`.abandon`), at the cost of a thread
    held by the abandoned attempt until its own timeouts end it."""
    slowest = slowest_attempt(client)
    if budget is None or slowest is None or slowest <= budget:
        return True
    config = client.meta.config
    log.warning(
        "a DynamoDB call that hangs can take %.1fs on this client (connect_timeout %.1fs + "
        "read_timeout %.1fs), more than the %.1fs budget: such an attempt is abandoned at the "
        "deadline, holding a thread until its timeouts end it; build the client with "
        "firstwrite.idempotency.dynamodb_client() or smaller timeouts (docs/patterns.md, Time "
        "budget)",
        slowest,
        float(config.connect_timeout),
        float(config.read_timeout),
        budget,
        extra={"budget": budget, "slowest_attempt": slowest},
    )
    return False


def spent_before_run(
    key: str, record_id: str, deadline: Deadline | None
) -> DeadlineExceededError | None:
    """The error of a call whose claim came back with its budget already spent (the function
    must not start: the caller releases the claim and raises it), else ``None``."""
    if deadline is None or deadline.left() > 0:
        return None
    return DeadlineExceededError(
        key,
        retry_after=1.0,
        budget=deadline.budget,
        elapsed=deadline.elapsed(),
        operation="claim",
        dynamo_error_code="BudgetSpentBeforeRun",
        record_id=record_id,
    )


def release_grace(deadline: Deadline) -> Deadline:
    """The deadline of releasing a claim made too late: a twentieth of the budget, so the
    release cannot hold the call much past it."""
    return deadline_for(deadline.budget / 20, deadline.monotonic)  # type: ignore[return-value]
