"""The engine's clock: real time by default, frozen, set and advanced by tests.

Everything time-dependent in the engine (TTL expiry, transaction token windows, stream
retention, stale-read lag) reads :meth:`Clock.now`, never ``time.time()`` directly, so a test can
stage a race by moving time instead of sleeping.
"""

from __future__ import annotations

import math
import threading
import time

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


class Clock:
    """Epoch seconds; ``now() = time.time() + offset`` unless frozen at a fixed instant."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = 0.0
        self._frozen_at: float | None = None

    def now(self) -> float:
        frozen = self._frozen_at
        if frozen is not None:
            return frozen
        return time.time() + self._offset

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
            return self._frozen_at

    def unfreeze(self) -> None:
        """Let the clock run again from where it stands (no jump back to wall time)."""
        with self._lock:
            if self._frozen_at is not None:
                self._offset = self._frozen_at - time.time()
                self._frozen_at = None

    def set(self, at: float) -> None:
        """Jump to ``at``; a frozen clock stays frozen there. Outside
        :data:`EARLIEST`..:data:`LATEST`: ``ValueError``."""
        at = _in_range(at)
        with self._lock:
            if self._frozen_at is not None:
                self._frozen_at = float(at)
            else:
                self._offset = float(at) - time.time()

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
        return self.now()

    def reset(self) -> None:
        """Back to real wall-clock time."""
        with self._lock:
            self._offset = 0.0
            self._frozen_at = None

    def state(self) -> dict[str, float | bool]:
        return {"now": self.now(), "frozen": self.frozen, "offset": self._offset}
