"""What a handler sees of the middleware.

The request's key, record scope and claim, and, on a ``transactional`` route, the claim made together with the handler's own DynamoDB writes.

``idempotency(request)`` finds it in the ASGI scope (``request.scope``) or the WSGI environ
(``request.environ``) under :data:`CONTEXT_KEY`::

    ctx = idempotency(request)
    claim = await ctx.claim_with([debit, record_charge])   # one TransactWriteItems
    if claim is None:
        return Response()   # answered already (replay, 409, 422): this response is discarded
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from firstwrite.idempotency import (
    AsyncGuard,
    BusinessConditionFailedError,
    Claim,
    Guard,
    Replay,
    TransactionConflictError,
    recovery,
)
from firstwrite.idempotency import steps as guard_steps

from .core import Core, Plan
from .problems import ProblemResponse
from .streamed_replies import StreamedReply

__all__ = ["CONTEXT_KEY", "AsyncRequestIdempotency", "RequestIdempotency", "idempotency"]

CONTEXT_KEY = "firstwrite.idempotency"

# Errors of claim_with that belong to the handler: its own conditions, a busy table.
_CALLERS = (BusinessConditionFailedError, TransactionConflictError)


class Context:
    """Shared state of a guarded request (sync and async flavours below)."""

    def __init__(self, core: Core, plan: Plan, payload: Any) -> None:
        self._core = core
        self.plan = plan
        """The middleware's view of the request: route, key, request, record scope."""
        self.payload = payload
        """What the layer fingerprints for this request."""
        self.claim: Claim | None = None
        """The claim this request holds (its ``fencing_token`` can go downstream)."""
        self.answer: ProblemResponse | StreamedReply | None = None
        """Set when ``claim_with`` found the key taken: what the client gets instead."""

    @property
    def key(self) -> str:
        return self.plan.key

    @property
    def scope(self) -> str:
        """The record's scope: principal, method and path."""
        return self.plan.scope

    @property
    def transactional(self) -> bool:
        return self.plan.route.transactional

    def _check(self) -> None:
        if not self.plan.route.transactional:
            raise RuntimeError(
                f"route {self.plan.route.label!r} is not transactional: the middleware already "
                "claimed the key (Route(..., transactional=True) lets the handler claim it)"
            )
        if self.claim is not None or self.answer is not None:
            raise RuntimeError("claim_with may be called once per request")

    def _claim_with(
        self, transact_items: Sequence[dict[str, Any]]
    ) -> guard_steps.Steps[Claim | None]:
        """``claim_with``'s decision, as guard steps (driven by the flavours below)."""
        self._check()
        plan = self.plan
        try:
            outcome = yield guard_steps.ClaimWithItems(
                plan.key,
                transact_items,
                self.payload,
                plan.scope,
                plan.route.lease,
                plan.budget_left(),
            )
        except _CALLERS:
            raise
        except Exception as exc:
            answer = self._core.answer_error(plan, exc)
            if answer is None:
                raise
            self.answer = answer
            return None
        if isinstance(outcome, Replay):
            self.answer = self._core.replay(outcome)
            return None
        assert isinstance(outcome, Claim)
        self.claim = outcome
        return outcome


class AsyncRequestIdempotency(Context):
    """The context of a request through the ASGI middleware."""

    def __init__(
        self,
        core: Core,
        plan: Plan,
        payload: Any,
        guard: Guard | AsyncGuard,
        reconcile: recovery.AnyHook | None = None,
    ) -> None:
        super().__init__(core, plan, payload)
        self._guard = guard
        self._reconcile = reconcile

    async def claim_with(self, transact_items: Sequence[dict[str, Any]]) -> Claim | None:
        """Claim the key and apply ``transact_items`` (low-level ``TransactWriteItems``
        entries) in one transaction. Returns the claim (the writes are applied), or ``None``
        when the key was taken (nothing applied): return any response, the middleware sends
        the replay, 409 or 422 instead. ``BusinessConditionFailedError`` (one of your
        conditions failed; nothing applied, the key is free) is yours to answer. A record whose
        earlier run marked recovery points is settled by the middleware's ``reconcile`` hook
        (docs/recovery.md, "With claim_with")."""
        with recovery.reconciling_with(self._reconcile):
            return await guard_steps.adrive(self._claim_with(transact_items), self._guard)


class RequestIdempotency(Context):
    """The context of a request through the WSGI middleware."""

    def __init__(
        self,
        core: Core,
        plan: Plan,
        payload: Any,
        guard: Guard,
        reconcile: recovery.ReconcileHook | None = None,
    ) -> None:
        super().__init__(core, plan, payload)
        self._guard = guard
        self._reconcile = reconcile

    def claim_with(self, transact_items: Sequence[dict[str, Any]]) -> Claim | None:
        """See :meth:`AsyncRequestIdempotency.claim_with`."""
        with recovery.reconciling_with(self._reconcile):
            return guard_steps.drive(self._claim_with(transact_items), self._guard)


def idempotency(request: Any) -> Any:
    """The context the middleware attached to ``request`` (a Starlette/Flask/Werkzeug request,
    an ASGI scope or a WSGI environ), or ``None`` when the request is not guarded."""
    for attribute in ("scope", "environ"):
        mapping = getattr(request, attribute, None)
        if isinstance(mapping, Mapping):
            return mapping.get(CONTEXT_KEY)
    if isinstance(request, Mapping):
        return request.get(CONTEXT_KEY)
    raise TypeError(f"not a request, ASGI scope or WSGI environ: {type(request).__name__}")
