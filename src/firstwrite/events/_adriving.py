"""The asyncio driver of a consumer's steps: a guard's calls and the handler, awaited.

:func:`adrive` hands the guard steps of :mod:`.steps` to the layer's driver
(:func:`firstwrite.idempotency.steps.adrive`: a thrown error for a guard call that raised) and
awaits the handler while a :class:`_Renewal` task keeps the claim
alive (and awaits the :class:`~.steps.Keepalive`'s ``extend``). A cancelled handler's
``CancelledError`` is handed to the steps as the run's error, so they free the key first.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from firstwrite.idempotency import Claim, LostClaimError
from firstwrite.idempotency import steps as guard_steps
from firstwrite.idempotency.recovery import RUNNING

from .steps import HandlerEffect, Keepalive, Ran, RunHandler, RunUnguarded, Steps

if TYPE_CHECKING:
    from .guard import AsyncEventGuard

__all__ = ["AsyncHandler", "adrive"]

LOG = logging.getLogger("firstwrite.events")
T = TypeVar("T")

AsyncHandler = Callable[[Any], Awaitable[object]]


class _Renewal:
    """The task behind a :class:`~.core.Keepalive`: renews until stopped or the claim is lost."""

    def __init__(self, guard: AsyncEventGuard, claim: Claim, keepalive: Keepalive) -> None:
        self.guard, self.claim, self.keepalive = guard, claim, keepalive
        self.stopped = asyncio.Event()
        self.task = asyncio.create_task(self._beat(), name="firstwrite-events-keepalive")

    async def _beat(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), self.keepalive.every)
                return
            try:  # the claim first: a broker refusing the extension must not cost the lease
                self.claim = await self.guard.renew(self.claim, self.keepalive.lease)
            except LostClaimError:
                return
            except Exception:
                LOG.warning("renewing a claim failed; retrying at the next beat", exc_info=True)
            try:
                if self.keepalive.extend is not None:
                    extended = self.keepalive.extend()
                    if inspect.isawaitable(extended):
                        await extended
            except Exception:
                LOG.warning(
                    "a keepalive's extension failed; retrying at the next beat", exc_info=True
                )

    async def finish(self) -> Claim:
        """Stop after the renewal in flight (so the claim returned is the latest)."""
        self.stopped.set()
        await asyncio.shield(self.task)
        return self.claim


class _Renewed:
    """Marks the claim as last renewed by the keepalive (a renewal makes a new version)."""

    is_async = True

    def __init__(self, renewal: _Renewal) -> None:
        self.renewal = renewal

    def mark(self, claim: Claim, step: str, reference: str | None = None) -> object:
        return self.renewal.guard.mark(self.renewal.claim, step, reference)


async def _run(guard: AsyncEventGuard, handler: AsyncHandler, effect: RunHandler[Any]) -> Ran:
    renewal = _Renewal(guard, effect.claim, effect.keepalive) if effect.keepalive else None

    token = RUNNING.set((guard if renewal is None else _Renewed(renewal), effect.claim))
    try:
        result = await handler(effect.record)
    except BaseException as exc:  # CancelledError too: the steps free the key, then re-raise
        return Ran(await renewal.finish() if renewal else effect.claim, error=exc)
    finally:
        RUNNING.reset(token)
    return Ran(await renewal.finish() if renewal else effect.claim, result)


async def adrive(steps: Steps[T], guard: AsyncEventGuard, handler: AsyncHandler) -> T:
    """Run ``steps`` to its end, awaiting ``guard`` and ``handler``; return its value."""

    async def handle(effect: HandlerEffect) -> object:
        if isinstance(effect, RunUnguarded):
            return await handler(effect.record)
        return await _run(guard, handler, effect)

    return await guard_steps.adrive(steps, guard, handle)
