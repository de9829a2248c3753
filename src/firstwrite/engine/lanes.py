"""Where the HTTP server runs engine calls, so that the event loop never waits on one.

* :class:`Lane`: one thread running the small requests' calls, handed over a batch per
  event-loop turn. An engine call is tens of microseconds of CPU; handing each to a thread pool
  costs more than the call (one wake-up, future and callback each), while a batch costs one
  wake-up each way. The event loop only moves bytes, and a call that waits (on SQLite's write
  lock held by another process, say) holds up the lane, never the loop.
* When the lane has been busy with one call for longer than :data:`STUCK_SECONDS`, new calls
  go to the thread pool instead: one waiting write does not hold up every read.
* :class:`ByteBudget`: big request bodies are admitted while their sizes fit in a budget, so
  the memory a few huge requests take at once stays bounded.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["STUCK_SECONDS", "ByteBudget", "Lane"]

log = logging.getLogger(__name__)

T = TypeVar("T")
STUCK_SECONDS = 0.02

_Job = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class Lane:
    """One thread running jobs handed over from one event loop, a batch per loop turn."""

    def __init__(self, name: str = "firstwrite-lane") -> None:
        self._queue: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._pending: list[_Job] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.busy_since: float | None = None  # when the running job started (None: idle)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stuck(self) -> bool:
        """Whether the running job has taken longer than :data:`STUCK_SECONDS` so far."""
        since = self.busy_since
        return since is not None and time.monotonic() - since > STUCK_SECONDS

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` on the lane; await the result on the calling event loop."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._hand_over)
        self._pending.append((fn, args, future))
        return future

    def _hand_over(self) -> None:
        batch, self._pending = self._pending, []
        self._queue.put(batch)

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            results: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
            for fn, args, future in batch:
                self.busy_since = time.monotonic()
                try:
                    results.append((future, fn(*args), None))
                except BaseException as exc:  # handed to the awaiting request
                    results.append((future, None, exc))
            self.busy_since = None
            loop = self._loop
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(_deliver, results)
                except RuntimeError:  # the loop closed meanwhile: nobody awaits these
                    pass

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()


def _deliver(results: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in results:
        if future.cancelled():
            continue
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


class ByteBudget:
    """At most ``total`` bytes of admitted requests at once; a request asks for its size.

    Waiters are admitted in arrival order. A request larger than the budget asks for all of it,
    so it runs alone rather than never.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.available = total
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    async def acquire(self, size: int) -> int:
        """Wait until ``size`` bytes fit; returns what to :meth:`release` afterwards."""
        size = min(size, self.total)
        if not self._waiters and size <= self.available:
            self.available -= size
            return size
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((size, future))
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self.release(size)  # admitted just as the wait was cancelled
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((size, future))
                self._wake()
            raise
        return size

    def release(self, size: int) -> None:
        self.available += size
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.available:
            size, future = self._waiters.popleft()
            if not future.done():  # a cancelled waiter is skipped
                self.available -= size
                future.set_result(None)
