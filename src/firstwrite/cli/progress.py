"""A progress bar on stderr for long work, drawn only when stderr is a terminal.

No dependency: one line redrawn with ``\\r`` at most ten times a second, erased when the work
ends, so piped or captured output never contains it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

WIDTH = 30
INTERVAL = 0.1


class Progress:
    """``with Progress("scanning", total) as bar: bar.advance()``; ``total`` may be ``None``
    (unknown: a counter instead of a bar) and may be revised with :meth:`set_total`."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = (callable(isatty) and bool(isatty())) if enabled is None else enabled
        self._clock = clock
        self._start = clock()
        self._drawn = 0.0
        self._width = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Progress:
        self._draw(force=True)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def set_total(self, total: int | None) -> None:
        self.total = total

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self.done += count
            self._draw()

    def line(self) -> str:
        elapsed = max(self._clock() - self._start, 1e-9)
        rate = f"{self.done / elapsed:,.0f}/s"
        if self.total:
            share = min(self.done / self.total, 1.0)
            filled = int(share * WIDTH)
            bar = "#" * filled + "." * (WIDTH - filled)
            return f"{self.label} [{bar}] {self.done:,}/{self.total:,} {rate}"
        return f"{self.label} {self.done:,} {rate}"

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if not force and now - self._drawn < INTERVAL:
            return
        self._drawn = now
        text = self.line()
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
