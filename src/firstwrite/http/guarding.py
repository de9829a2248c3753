"""A guarded request's calls to the guard, decided once for both middlewares.

Claim the key, then store the response, release the key or settle it as "not stored": each
decision is a generator of the layer's guard steps (:mod:`firstwrite.idempotency.steps`) that
does no I/O. The ASGI middleware awaits them (:func:`~firstwrite.idempotency.steps.adrive`),
the WSGI middleware makes the calls (:func:`~firstwrite.idempotency.steps.drive`); the
middlewares themselves only move bytes (reading the body, capturing and streaming the
response) and say when a decision is due. The rules each decision applies (what a status, an
outcome or an error answers) are :mod:`.core`'s.

A guard call that fails where the request already ran (storing, releasing, settling) is logged
on ``firstwrite.http`` and the client still gets its response.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from firstwrite.idempotency import (
    Claim,
    DeadlineExceededError,
    IdempotencyError,
    LostClaimError,
    Replay,
    SerializationError,
    SpooledResult,
)
from firstwrite.idempotency import steps as guard_steps

from .context import Context
from .core import STATUS_ONLY, UNSTORED_HEADER, Core, Headers, Plan, Response, Verdict
from .streamed_replies import StreamedReply

__all__ = ["claim", "finish", "keeps", "release", "settle_unstored"]

log = logging.getLogger("firstwrite.http")


def claim(
    core: Core, plan: Plan, payload: Any, *, before_run: bool = True
) -> guard_steps.Steps[Claim | Response | StreamedReply]:
    """Claim the request's key: the claim, or the answer to send instead (the replay, or the
    problem an error of the claim or of the replay answers). ``before_run``: the handler has
    not run yet, so a claim that comes back with the route's budget spent is released and
    answered 503 (the handler never starts; a retry can take the key at once)."""
    try:
        outcome = yield guard_steps.ClaimKey(
            plan.key,
            payload,
            plan.scope,
            plan.route.lease,
            plan.route.wait,
            plan.budget_left(),
        )
    except Exception as exc:
        return _answered(core, plan, exc)
    if isinstance(outcome, Replay):
        try:
            return core.replay(outcome)
        except IdempotencyError as exc:  # a stored response that cannot be replayed
            return _answered(core, plan, exc)
    assert isinstance(outcome, Claim)
    left = plan.budget_left()
    if before_run and left is not None and left <= 0:
        yield from release(outcome, "the request's time budget was spent before it ran")
        budget = plan.route.budget or 0.0
        spent = DeadlineExceededError(
            plan.key,
            retry_after=1.0,
            budget=budget,
            elapsed=budget - left,
            operation="claim",
            dynamo_error_code="BudgetSpentBeforeRun",
        )
        return _answered(core, plan, spent)
    return outcome


def _answered(core: Core, plan: Plan, error: Exception) -> Response:
    """The problem ``error`` answers (every ``Exception`` has one: :meth:`.core.Core.answer_error`)."""
    answer = core.answer_error(plan, error)
    if answer is None:
        raise error
    return answer


def finish(
    core: Core,
    context: Context,
    status: int,
    headers: Headers,
    body: bytes | SpooledResult,
    reason: str | None,
    started: float,
) -> guard_steps.Steps[tuple[Response | StreamedReply | None, Headers]]:
    """A complete response (``status``, ``headers``, ``body``, in memory or spooled to a file;
    ``reason``: the status line's phrase, WSGI only) of a handler started at ``started`` (``time.monotonic()``): store it,
    or release or settle the key, as its status says. Returns ``(answer, extra)``: the answer
    to send instead (a twin got to a transactional route's late claim first), or ``None`` and
    the headers to add to the response."""
    core.durations.observe(context.plan.route.label, time.monotonic() - started)
    verdict = core.verdict(status)
    if context.claim is None and verdict is Verdict.STORE:
        # A transactional handler that made no claim (a 4xx before any write): claim now so
        # the answer is stored; a twin that got there first is answered instead.
        outcome = yield from claim(core, context.plan, context.payload, before_run=False)
        if not isinstance(outcome, Claim):
            return outcome, []
        context.claim = outcome
    extra: Headers = []
    held = context.claim
    if held is None:
        return None, extra
    if verdict is Verdict.STORE:
        status_only = context.plan.route.status_only
        stored = core.stored_form(status, headers, body, reason, status_only=status_only)
        try:
            yield guard_steps.CompleteClaim(held, stored, context.plan.budget_left())
            if status_only:  # tell the first caller: keep this body, a retry will not get it
                extra.append((UNSTORED_HEADER, STATUS_ONLY))
        except SerializationError as exc:  # the layer marked the key FAILED for good
            log.warning("response for %s not stored: %s", context.plan.request, exc)
            extra.append((UNSTORED_HEADER, b"size-exceeded"))
        except LostClaimError:
            log.warning("claim on %s lost before its response was stored", held.record_id)
        except Exception:  # the side effect happened: the client still gets its answer
            log.exception("could not store the response for %s", held.record_id)
    elif context.transactional:
        yield from settle_unstored(core, context, status, f"status {status} is not stored")
    else:
        yield from release(held, f"status {status}")
    return None, extra


def release(held: Claim, reason: str) -> guard_steps.Steps[None]:
    """Free the key (FAILED, retryable): the next request with it runs."""
    try:
        yield guard_steps.ReleaseClaim(held, reason)
    except Exception:  # the lease will expire; the retry then takes the key over
        log.exception("could not release %s", held.record_id)


def keeps(core: Core, context: Context, status: int | None) -> bool:
    """Whether an unstored response keeps its key ("not stored" is its final answer): always
    once a transactional claim committed its writes, else with ``on_unstored="keep"`` for a
    status that would have been stored."""
    return context.transactional or (
        core.config.on_unstored == "keep"
        and status is not None
        and core.verdict(status) is Verdict.STORE
    )


def settle_unstored(
    core: Core, context: Context, status: int | None, reason: str
) -> guard_steps.Steps[None]:
    """A response that is not stored (``reason``): release the request's claim, or make "not
    stored" its key's final answer (:func:`keeps`). Nothing to do without a claim."""
    held = context.claim
    if held is None:
        return
    if not keeps(core, context, status):
        yield from release(held, reason)
        return
    data = core.unstored_data(status or 0, reason)
    try:
        yield guard_steps.FailClaim(held, reason, retryable=False, data=data)
    except Exception:
        log.exception("could not record that %s was not stored", held.record_id)
