"""The engine's clock: real time by default, frozen, set and advanced by tests.

Everything time-dependent in the engine (TTL expiry, transaction token windows, stream
retention, stale-read lag, the ``Date`` of its answers) reads :meth:`Clock.now`, never
``time.time()`` directly, so a test can stage a race by moving time instead of sleeping. The
engine's clock is DynamoDB's clock: :meth:`Clock.skewed` gives a client a clock off it by a
fixed amount (a worker whose host clock runs ahead or behind), to stage clock skew.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from email.utils import formatdate

# The instants the engine can stand at: from the epoch to the last second of year 9999, the
# range DynamoDB's timestamps (and the engine's dates, ARNs and stream records) can show.
EARLIEST = 0.0
LATEST = 253_402_300_799.0


def _in_range(at: float) -> float:
    at = float(at)
    if not (math.isfinite(at) and EARLIEST <= at <= LATEST):
        raise ValueError(
            f"the engine clock ranges from {EARLIEST:.0f} to {LATEST:.0f} (epoch seconds, "
            f"1970-01-01 to 9999-12-31), not {at!r}"
        )
    return at


# Told of every change of a clock's setting: (offset, frozen instant or None).
Keeper = Callable[[float, float | None], None]


class Clock:
    """Epoch seconds; ``now() = time.time() + offset`` unless frozen at a fixed instant.

    An engine on a file keeps its clock's setting in the database (:meth:`keep`) and restores
    it when it opens the file again (:meth:`restore`): a clock moved by an offset is still
    moved by it (from the wall clock of the moment), a frozen one still stands where it stood.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = 0.0
        self._frozen_at: float | None = None
        self._keeper: Keeper | None = None
        self._date: tuple[int, str] = (-1, "")  # the last second dated, and its header

    def keep(self, keeper: Keeper | None) -> None:
        """Call ``keeper(offset, frozen_at)`` after every change from now on (None: stop)."""
        self._keeper = keeper

    def restore(self, offset: float, frozen_at: float | None) -> None:
        """Take a kept setting back (ignored, with the clock unchanged, if out of range)."""
        try:
            _in_range(time.time() + offset if frozen_at is None else frozen_at)
        except ValueError:
            return
        with self._lock:
            self._offset = float(offset)
            self._frozen_at = None if frozen_at is None else float(frozen_at)

    def _changed(self) -> None:
        # Under the lock: settings are kept in the order they were made.
        keeper = self._keeper
        if keeper is not None:
            keeper(self._offset, self._frozen_at)

    def now(self) -> float:
        frozen = self._frozen_at
        if frozen is not None:
            return frozen
        return time.time() + self._offset

    def skewed(self, seconds: float) -> Callable[[], float]:
        """A clock for a client whose host clock is off DynamoDB's (this clock) by ``seconds``:
        ahead when positive, behind when negative. It reads :meth:`now` plus ``seconds``, so it
        follows every freeze, set and advance of this clock (pass it as a guard's ``clock``)."""
        seconds = float(seconds)
        if not math.isfinite(seconds):
            raise ValueError(f"a clock's skew is a finite number of seconds, not {seconds!r}")
        now = self.now

        def skewed_now() -> float:
            return now() + seconds

        skewed_now.__qualname__ = f"Clock.skewed({seconds:+g})"
        return skewed_now

    def http_date(self) -> str:
        """``now()``'s whole second as an HTTP ``Date`` (IMF-fixdate, ``Mon, 07 Dec 2026
        13:52:13 GMT``, RFC 9110 5.6.7): how DynamoDB dates its answers."""
        frozen = self._frozen_at  # now(), inlined: every in-process answer is dated
        second = int(time.time() + self._offset if frozen is None else frozen)
        cached = self._date
        if cached[0] != second:
            cached = self._date = (second, formatdate(second, usegmt=True))
        return cached[1]

    @property
    def frozen(self) -> bool:
        return self._frozen_at is not None

    @staticmethod
    def check(at: float) -> None:
        """``ValueError`` unless the clock can stand at ``at`` (:data:`EARLIEST`..:data:`LATEST`)."""
        _in_range(at)

    def freeze(self, at: float | None = None) -> float:
        """Stop the clock at ``at`` (default: the current engine time). Returns the instant."""
        with self._lock:
            self._frozen_at = self.now() if at is None else _in_range(at)
            self._changed()
            return self._frozen_at

    def unfreeze(self) -> None:
        """Let the clock run again from where it stands (no jump back to wall time)."""
        with self._lock:
            if self._frozen_at is not None:
                self._offset = self._frozen_at - time.time()
                self._frozen_at = None
                self._changed()

    def set(self, at: float) -> None:
        """Jump to ``at``; a frozen clock stays frozen there. Outside
        :data:`EARLIEST`..:data:`LATEST`: ``ValueError``."""
        at = _in_range(at)
        with self._lock:
            if self._frozen_at is not None:
                self._frozen_at = float(at)
            else:
                self._offset = float(at) - time.time()
            self._changed()

    def advance(self, seconds: float) -> float:
        """Move forward (or back, with a negative amount). Returns the new time. A move that
        would leave :data:`EARLIEST`..:data:`LATEST`: ``ValueError``, the clock unmoved."""
        if seconds != seconds:  # NaN
            raise ValueError("cannot advance the clock by NaN")
        with self._lock:
            _in_range(self.now() + seconds)
            if self._frozen_at is not None:
                self._frozen_at += seconds
            else:
                self._offset += seconds
            self._changed()
        return self.now()

    def reset(self) -> None:
        """Back to real wall-clock time."""
        with self._lock:
            self._offset = 0.0
            self._frozen_at = None
            self._changed()

    def state(self) -> dict[str, float | bool]:
        return {"now": self.now(), "frozen": self.frozen, "offset": self._offset}
