"""Calls that end at the call's deadline, whatever the client's own timeouts.

A client whose ``connect_timeout + read_timeout`` (:func:`.budget.slowest_attempt`) is longer
than what is left of the current deadline could hold a guarded call past its budget on one hung
attempt (botocore's defaults: 60 s each). :func:`held` wraps each client method: while the
deadline leaves room for the slowest attempt, the method is called directly; otherwise the
attempt runs on a small pool of daemon threads (:data:`WORKERS`), the caller waits until the
deadline and then abandons it with
:class:`~firstwrite.idempotency.client_errors.AttemptAbandoned`, a transport error the retry
loop turns into :class:`~firstwrite.idempotency.errors.DeadlineExceededError`. The abandoned
attempt's late answer is dropped like a lost one (a claim it wrote stays under its lease); an
attempt still queued at the deadline never starts. An attempt made once the deadline has
passed (a completion's first attempt is always made: the function ran) is called directly.
:func:`aheld` is the asyncio form. ``docs/patterns.md`` (Time budget) says why this was chosen
over rebuilding the client with smaller timeouts.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ..client_errors import AttemptAbandoned
from .budget import CURRENT, Deadline

__all__ = ["WORKERS", "aheld", "held"]

WORKERS = 8
"""The most threads abandoned attempts may hold at once (per process); more calls queue."""

_Job = tuple[Future[Any], contextvars.Context, Callable[..., Any], dict[str, Any]]


class _Pool:
    """Daemon worker threads, started as needed up to :data:`WORKERS` (a hung attempt must not
    keep the interpreter from exiting, as ``ThreadPoolExecutor``'s workers would)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0

    def submit(self, method: Callable[..., Any], params: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((future, contextvars.copy_context(), method, params))
        with self._lock:
            if self._idle == 0 and len(self._threads) < self._size:
                worker = threading.Thread(target=self._work, name="firstwrite-budget", daemon=True)
                self._threads.append(worker)
                self._idle += 1
                worker.start()
        return future

    def _work(self) -> None:
        while True:
            future, context, method, params = self._jobs.get()
            with self._lock:
                self._idle -= 1
            try:
                if future.set_running_or_notify_cancel():  # not abandoned while queued
                    try:
                        future.set_result(context.run(method, **params))
                    except BaseException as exc:  # delivered to the caller, or dropped
                        future.set_exception(exc)
            finally:
                del future, context, method, params  # nothing of a late answer is kept
                with self._lock:
                    self._idle += 1


_POOL = _Pool(WORKERS)


def _abandoned(deadline: Deadline) -> AttemptAbandoned:
    return AttemptAbandoned(
        f"no answer by the end of the {deadline.budget:.3f}s budget: the attempt was abandoned"
    )


def held(method: Callable[..., Any], slowest: float | None) -> Callable[..., Any]:
    """``method`` ending at the current deadline (:data:`.budget.CURRENT`); ``slowest``: the
    client's longest attempt (``None``: the client declares no timeouts, as the engine's direct
    client: called directly)."""

    def call(**params: Any) -> Any:
        deadline = CURRENT.get()
        if deadline is None:
            return method(**params)
        left = deadline.left()
        if slowest is None or left <= 0 or slowest < left:
            return method(**params)  # past the deadline: a completion's one attempt
        future = _POOL.submit(method, params)
        try:
            return future.result(timeout=left)
        except FutureTimeout:
            future.cancel()  # still queued: it never starts
            raise _abandoned(deadline) from None

    return call


def aheld(method: Callable[..., Awaitable[Any]], slowest: float | None) -> Callable[..., Any]:
    """:func:`held` for a coroutine method: awaited until the deadline, then cancelled."""

    async def call(**params: Any) -> Any:
        deadline = CURRENT.get()
        if deadline is None:
            return await method(**params)
        left = deadline.left()
        if slowest is None or left <= 0 or slowest < left:
            return await method(**params)  # past the deadline: a completion's one attempt
        try:
            return await asyncio.wait_for(method(**params), timeout=left)
        except TimeoutError:
            raise _abandoned(deadline) from None

    return call
