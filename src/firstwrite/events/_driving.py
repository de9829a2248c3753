"""The synchronous driver of a consumer's steps: a guard's calls, the handler in this thread.

:func:`drive` hands the guard steps of :mod:`.steps` to the layer's driver
(:func:`firstwrite.idempotency.steps.drive`: a thrown error for a guard call that raised) and
runs the handler while a :class:`_Renewer` thread keeps the claim alive.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from firstwrite.idempotency import Claim, LostClaimError
from firstwrite.idempotency import steps as guard_steps
from firstwrite.idempotency.recovery import RUNNING

from .steps import HandlerEffect, Keepalive, Ran, RunHandler, RunUnguarded, Steps

if TYPE_CHECKING:
    from .guard import EventGuard

__all__ = ["drive"]

LOG = logging.getLogger("firstwrite.events")
T = TypeVar("T")


class _Renewer(threading.Thread):
    """The thread behind a :class:`~.steps.Keepalive`: renews until stopped or the claim is lost."""

    def __init__(self, guard: EventGuard, claim: Claim, keepalive: Keepalive) -> None:
        super().__init__(name="firstwrite-events-keepalive", daemon=True)
        self.guard, self.claim, self.keepalive = guard, claim, keepalive
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.keepalive.every):
            try:  # the claim first: a broker refusing the extension must not cost the lease
                self.claim = self.guard.renew(self.claim, self.keepalive.lease)
            except LostClaimError:
                return
            except Exception:
                LOG.warning("renewing a claim failed; retrying at the next beat", exc_info=True)
            try:
                if self.keepalive.extend is not None:
                    self.keepalive.extend()
            except Exception:
                LOG.warning(
                    "a keepalive's extension failed; retrying at the next beat", exc_info=True
                )

    def finish(self) -> Claim:
        self.stopped.set()
        self.join()
        return self.claim


class _Renewed:
    """Marks the claim as last renewed by the keepalive (a renewal makes a new version)."""

    is_async = False

    def __init__(self, renewer: _Renewer) -> None:
        self.renewer = renewer

    def mark(self, claim: Claim, step: str, reference: str | None = None) -> object:
        return self.renewer.guard.mark(self.renewer.claim, step, reference)


def _run(guard: EventGuard, handler: Callable[[Any], object], effect: RunHandler[Any]) -> Ran:
    renewer = None
    if effect.keepalive is not None:
        renewer = _Renewer(guard, effect.claim, effect.keepalive)
        renewer.start()

    token = RUNNING.set((guard if renewer is None else _Renewed(renewer), effect.claim))
    try:
        result = handler(effect.record)
    except BaseException as exc:
        return Ran(renewer.finish() if renewer else effect.claim, error=exc)
    finally:
        RUNNING.reset(token)
    return Ran(renewer.finish() if renewer else effect.claim, result)


def _handle(handler: Callable[[Any], object], guard: EventGuard, effect: HandlerEffect) -> object:
    if isinstance(effect, RunUnguarded):
        return handler(effect.record)
    return _run(guard, handler, effect)


def drive(steps: Steps[T], guard: EventGuard, handler: Callable[[Any], object]) -> T:
    """Run ``steps`` to its end with ``guard`` and ``handler``; return its value."""
    return guard_steps.drive(steps, guard, functools.partial(_handle, handler, guard))
