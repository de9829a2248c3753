"""Where the HTTP server runs engine calls, so that the event loop never waits on one.

* :class:`Lane`: one thread running the small requests' calls. An engine call is tens of
  microseconds of CPU; handing each to a thread pool costs more than the call (a wake-up, a
  future and a callback each), while the lane takes every call queued by the time it looks
  and hands the results back with one wake-up. The event loop only moves bytes, and a call that waits (on SQLite's write
  lock held by another process, say) holds up the lane, never the loop.
* When the lane has been busy with one call for longer than :data:`STUCK_SECONDS`, new calls
  go to the thread pool instead, and so do the calls already queued behind it (a watch on the
  event loop, armed while the lane has work, moves them): a call waiting on SQLite's write lock
  holds up no call that does not depend on it.
* :class:`ByteBudget`: big request bodies are admitted while their sizes fit in a budget, so
  the memory a few huge requests take at once stays bounded.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar

__all__ = ["STUCK_SECONDS", "ByteBudget", "Lane"]

log = logging.getLogger(__name__)

T = TypeVar("T")
STUCK_SECONDS = 0.02

_Job = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class Lane:
    """One thread running jobs handed over from one event loop, in batches.

    A job is queued at once; the lane takes every job queued by the time it looks (under load,
    a batch), and hands the batch's results back to the loop with one wake-up.
    """

    def __init__(
        self,
        name: str = "firstwrite-lane",
        scope: Callable[[], contextlib.AbstractContextManager[Pending | None]] | None = None,
        overflow: Executor | None = None,
    ) -> None:
        # Entered around each batch (the engine's Storage.deferred). What it yields, if needed
        # once the batch is done, is waited for on a second thread before the batch's results
        # are handed back (with durability "full": the batch's fsync), while the lane runs the
        # next batch; if the wait fails, every job of the batch gets that error.
        self._scope = scope
        self._settling: queue.SimpleQueue[_Settling | None] | None = None
        self._settler: threading.Thread | None = None
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.busy_since: float | None = None  # when the running job started (None: idle)
        # Where queued jobs go once the lane is stuck (None: they wait for it), and the watch
        # that moves them there: one timer at a time, armed by submit() while the lane has work.
        self._overflow = overflow
        self._watch: asyncio.TimerHandle | None = None
        self.moved = 0  # jobs moved off a stuck lane (tests and figures)
        # The running batch's results so far, which the watch hands back early when the lane is
        # stuck (only without a scope: with one, a batch's results wait for its settling).
        self._running: list[_Result] | None = None
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
        self._queue.put((fn, args, future))
        if self._watch is None and self._overflow is not None:
            self._watch = loop.call_later(STUCK_SECONDS, self._rescue)
        return future

    def _rescue(self) -> None:
        """On the event loop: if the lane is stuck, move every job queued behind the running one
        to the overflow executor; watch again while the lane has work."""
        self._watch = None
        loop, overflow = self._loop, self._overflow
        if loop is None or overflow is None or loop.is_closed():
            return
        if self.stuck():
            running = self._running
            if running:  # answered already: not held back by the call that waits
                _deliver(running[: len(running)])
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:  # closing: the lane must still see it
                    self._queue.put(None)
                    break
                fn, args, future = job
                self.moved += 1
                moved = loop.run_in_executor(overflow, fn, *args)
                moved.add_done_callback(functools.partial(_pass_on, future))
        if self.busy_since is not None or not self._queue.empty():
            self._watch = loop.call_later(STUCK_SECONDS, self._rescue)

    def _run(self) -> None:
        get, scope = self._queue.get, self._scope
        while True:
            job = get()
            results: list[_Result] = []
            waits: list[Pending] = []  # what each job depends on (with a scope)
            if scope is None:  # (no scope: not even an empty one entered per batch)
                pending = None
                self._running = results
                job = self._batch(job, results)
                self._running = None
            else:
                with scope() as pending:
                    job = self._batch(job, results, pending, waits)
            self.busy_since = None
            if pending is not None and pending.needed():
                # Each call waits for what it depends on only: a read of another table is
                # not held back by a write of the same batch whose fsync is slow. Each wait
                # is looked at once: an fsync on another thread may end between two looks,
                # and a result counted in neither list would never be answered.
                ready: list[_Result] = []
                left: list[_Result] = []
                for result, wait in zip(results, waits, strict=True):
                    (left if wait.needed() else ready).append(result)
                if ready:
                    self._hand_back(ready)
                if left:
                    self._settle(pending, left)
            else:
                self._hand_back(results)
            if job is None:
                if self._settling is not None:
                    self._settling.put(None)
                    assert self._settler is not None
                    self._settler.join()
                return

    def _batch(
        self,
        job: _Job | None,
        results: list[_Result],
        pending: Pending | None = None,
        waits: list[Pending] | None = None,
    ) -> _Job | None:
        """Run ``job`` and every job queued by then; the last one taken (``None``: closing).
        With a ``pending``, what each job depends on is added to ``waits``."""
        get_nowait = self._queue.get_nowait
        while job is not None:
            fn, args, future = job
            self.busy_since = time.monotonic()
            try:
                results.append((future, fn(*args), None))
            except BaseException as exc:  # handed to the awaiting request
                results.append((future, None, exc))
            if pending is not None and waits is not None:
                waits.append(pending.split())
            try:
                job = get_nowait()
            except queue.Empty:
                break
        return job

    def _hand_back(self, results: list[_Result]) -> None:
        loop = self._loop
        if results and loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(_deliver, results)
            except RuntimeError:  # the loop closed meanwhile: nobody awaits these
                pass

    def _settle(self, pending: Pending, results: list[_Result]) -> None:
        """Hand a batch's results back once ``pending`` is settled, on the settler thread."""
        if self._settling is None:
            self._settling = queue.SimpleQueue()
            self._settler = threading.Thread(
                target=self._run_settler, name=f"{self._thread.name}-settler", daemon=True
            )
            self._settler.start()
        self._settling.put((pending, results))

    def _run_settler(self) -> None:
        assert self._settling is not None
        while (entry := self._settling.get()) is not None:
            pending, results = entry
            try:
                pending.wait()
            except BaseException as exc:  # not durable: every job of the batch failed
                results = [(future, None, exc) for future, _result, _error in results]
            self._hand_back(results)

    def close(self) -> None:
        watch = self._watch
        if watch is not None:
            watch.cancel()
        self._queue.put(None)
        self._thread.join()


_Result = tuple["asyncio.Future[Any]", Any, BaseException | None]
_Settling = tuple["Pending", list[_Result]]


class Pending(Protocol):
    """What a batch's scope leaves to wait for (the engine's storage.Pending)."""

    def needed(self) -> bool: ...

    def wait(self) -> None: ...

    def split(self) -> Pending:
        """What the calls made since the last split depend on (this one still covers them)."""
        ...


def _pass_on(future: asyncio.Future[Any], done: asyncio.Future[Any]) -> None:
    """Hand a moved job's outcome (``done``) to the future its request awaits."""
    if future.cancelled():
        return
    if done.cancelled():
        future.cancel()
    elif (error := done.exception()) is not None:
        future.set_exception(error)
    else:
        future.set_result(done.result())


def _deliver(results: list[_Result]) -> None:
    for future, result, error in results:
        if future.done():  # cancelled, or handed back early by a stuck lane's watch
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
