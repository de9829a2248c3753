"""Recovery points: how far a key's work got, so a takeover reconciles instead of rerunning.

Inside the work, :func:`recovery_point` (or :meth:`~.guard.Idempotency.mark` with the claim)
appends a :class:`RecoveryPoint` (a step name, an optional reference such as the key passed
downstream, the time) to the claim's record, fenced like every other write of the claim. When a
later claim replaces a record that carries points (its worker died, or failed retryably after
marking), the work is not run blind: the guard's ``reconcile`` hook is called with an
:class:`Interrupted` and answers :class:`Reconciled` (the record is completed with its result,
the caller gets it as a replay), :class:`NotDone` (the work runs) or :class:`FailedFinally` (the
record is FAILED for good, the caller gets
:class:`~firstwrite.idempotency.errors.RecoveryFailedError`). Without a hook the claim is
refused with :class:`~firstwrite.idempotency.errors.RecoveryRequiredError` (retryable; counted
in ``firstwrite_recovery_takeovers_total``): never a silent rerun.

The layer sets :data:`RUNNING` while a claim's work runs (``run``, the decorators, the HTTP
middleware, the event consumers), and :data:`HOOK` where a hook is given per call site.
docs/recovery.md tells the whole story.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, cast

from .errors import ConfigurationError
from .record import Record

__all__ = [
    "HOOK",
    "RUNNING",
    "AsyncReconcileHook",
    "FailedFinally",
    "Interrupted",
    "NotDone",
    "ReconcileAnswer",
    "ReconcileHook",
    "Reconciled",
    "RecoveryPoint",
    "arecovery_point",
    "recovery_point",
]


@dataclass(frozen=True, slots=True)
class RecoveryPoint:
    """One mark: ``step`` (your name for it), ``reference`` (e.g. the provider's request id or
    the key passed downstream), ``at`` (epoch seconds, the marking worker's clock), ``owner``
    (the claim that made it) and ``mark_id`` (unique: a mark written twice by a retried call
    after a lost response is read once)."""

    step: str
    reference: str | None
    at: float
    owner: str
    mark_id: str

    def item(self) -> dict[str, Any]:
        """The mark as a DynamoDB map value."""
        fields: dict[str, Any] = {
            "step": {"S": self.step},
            "at": {"N": str(round(self.at * 1000))},
            "owner": {"S": self.owner},
            "id": {"S": self.mark_id},
        }
        if self.reference is not None:
            fields["reference"] = {"S": self.reference}
        return {"M": fields}

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> RecoveryPoint:
        """The mark in a stored map value (:meth:`item`)."""
        m = value["M"]
        reference = m.get("reference")
        return cls(
            m["step"]["S"],
            None if reference is None else reference["S"],
            int(m["at"]["N"]) / 1000,
            m["owner"]["S"],
            m["id"]["S"],
        )


def new_mark_id() -> str:
    """A mark's unique id (64 random bits)."""
    return os.urandom(8).hex()


def points_of(item: Mapping[str, Any], attribute: str | None) -> tuple[RecoveryPoint, ...]:
    """The marks stored in ``item``'s ``attribute`` list, in order, each once."""
    if attribute is None:
        return ()
    stored = item.get(attribute)
    if stored is None:
        return ()
    points: list[RecoveryPoint] = []
    seen: set[str] = set()
    for value in stored.get("L", ()):
        point = RecoveryPoint.from_value(value)
        if point.mark_id not in seen:
            seen.add(point.mark_id)
            points.append(point)
    return tuple(points)


@dataclass(frozen=True, slots=True)
class Interrupted:
    """What a ``reconcile`` hook is asked about: the caller's ``key``, the ``points`` the
    interrupted work recorded (oldest first), and the ``record`` it left (its status, owner,
    claim time)."""

    key: str
    record_id: str
    points: tuple[RecoveryPoint, ...]
    record: Record

    @property
    def last(self) -> RecoveryPoint:
        """The most recent mark (there is always one)."""
        return self.points[-1]


@dataclass(frozen=True, slots=True)
class Reconciled:
    """The work had finished: ``result`` is stored as the key's result (as the work's own
    return value would have been) and answered as a replay."""

    result: Any = None


@dataclass(frozen=True, slots=True)
class NotDone:
    """The side effect did not happen: the work runs now, as after a plain takeover (the
    earlier points stay on the record, before the new run's)."""


@dataclass(frozen=True, slots=True)
class FailedFinally:
    """The side effect failed for good: the record becomes FAILED (not retryable) with
    ``reason``, replayed to every duplicate."""

    reason: str


ReconcileAnswer: TypeAlias = Reconciled | NotDone | FailedFinally
"""What a ``reconcile`` hook answers."""


class ReconcileHook(Protocol):
    """A blocking hook: looks the interrupted work up downstream (by the points' references)."""

    def __call__(self, interrupted: Interrupted, /) -> ReconcileAnswer: ...


class AsyncReconcileHook(Protocol):
    """The coroutine form of :class:`ReconcileHook` (for an
    :class:`~firstwrite.idempotency.aio.AsyncIdempotency`)."""

    def __call__(self, interrupted: Interrupted, /) -> Awaitable[ReconcileAnswer]: ...


AnyHook: TypeAlias = ReconcileHook | AsyncReconcileHook


class Marker(Protocol):
    """What marks the claim whose work runs in this context: a guard (or an adapter of one)."""

    @property
    def is_async(self) -> bool: ...

    # ``claim`` is a Claim (not imported here: the outcomes import this module's values)
    def mark(self, claim: Any, step: str, reference: str | None = None) -> object: ...


RUNNING: ContextVar[tuple[Marker, object] | None] = ContextVar(
    "firstwrite_running_claim", default=None
)
"""``(marker, claim)``: the claim whose work runs in this context and what marks it, set by
the layer around the work (a plain tuple: it is set on every guarded call)."""

HOOK: ContextVar[AnyHook | None] = ContextVar("firstwrite_reconcile_hook", default=None)
"""A per-call-site ``reconcile`` hook (the decorators', middleware's, consumers'), used before
the guard's own."""


@contextmanager
def reconciling_with(hook: AnyHook | None) -> Iterator[None]:
    """:data:`HOOK` set to ``hook`` for the block (nothing changes for ``None``)."""
    if hook is None:
        yield
        return
    token = HOOK.set(hook)
    try:
        yield
    finally:
        HOOK.reset(token)


def check_blocking(hook: AnyHook | None) -> ReconcileHook | None:
    """``hook`` for a synchronous guard: refused when it is a coroutine function."""
    if hook is not None and _is_coroutine_function(hook):
        raise ConfigurationError(
            "the reconcile hook is a coroutine function: give it to an AsyncIdempotency, or "
            "give the synchronous guard a blocking hook"
        )
    return hook  # type: ignore[return-value]


def asking(
    hook: AnyHook, interrupted: Interrupted
) -> tuple[Callable[[], object], Callable[[], Awaitable[object]]]:
    """``(run, arun)``: ``hook`` asked about ``interrupted`` from a blocking driver, and from an
    asyncio driver (a blocking hook in a worker thread, off the event loop)."""

    def run() -> object:
        answer = hook(interrupted)
        if inspect.isawaitable(answer):
            close = getattr(answer, "close", None)
            if close is not None:
                close()  # never awaited: no "coroutine was never awaited" warning
            check_blocking(hook)
        return answer

    async def arun() -> object:
        if _is_coroutine_function(hook):
            return await hook(interrupted)  # type: ignore[misc]
        return await asyncio.to_thread(run)

    return run, arun


def _is_coroutine_function(hook: object) -> bool:
    # a callable object's coroutine ``__call__`` too (not caught by iscoroutinefunction)
    call = vars(type(hook)).get("__call__")
    return inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(call)


def _current(name: str) -> tuple[Marker, object]:
    current = RUNNING.get()
    if current is None:
        raise ConfigurationError(
            f"{name}() is called outside a guarded call: use it inside the function given to "
            "run(), an @idempotent function, a guarded HTTP handler or event handler, or call "
            "guard.mark(claim, step) with the claim"
        )
    return current


def recovery_point(step: str, reference: str | None = None) -> RecoveryPoint:
    """Mark, on the record of the claim whose work runs here, that ``step`` is about to start
    (or has started), with ``reference``. One fenced write; raises
    :class:`~firstwrite.idempotency.errors.LostClaimError` if the claim was taken over (stop:
    another worker owns the key). Under an asynchronous guard use :func:`arecovery_point`."""
    marker, claim = _current("recovery_point")
    if marker.is_async:
        raise ConfigurationError(
            "recovery_point() under an asynchronous guard: use `await arecovery_point(...)`"
        )
    point = marker.mark(claim, step, reference)
    assert isinstance(point, RecoveryPoint)
    return point


async def arecovery_point(step: str, reference: str | None = None) -> RecoveryPoint:
    """:func:`recovery_point` from a coroutine (under either guard: a synchronous guard's write
    runs in a worker thread)."""
    marker, claim = _current("arecovery_point")
    if marker.is_async:
        point: object = await cast(Awaitable[object], marker.mark(claim, step, reference))
    else:
        point = await asyncio.to_thread(marker.mark, claim, step, reference)
    assert isinstance(point, RecoveryPoint)
    return point
