"""What one console holds: the engine, the shared metrics, a bound client, the latest results.

All of it is blocking work (engine calls, threads); the ASGI handlers call it through a thread
pool so a console mounted in the engine's server never stalls its event loop.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from firstwrite.engine import Engine, local_client
from firstwrite.idempotency import IdempotencyConfig, MemoryMetrics, sdk_settings

from . import race as race_module
from . import scenarios, seed
from .scenarios.stage import Outcome


@dataclass(frozen=True, slots=True)
class ClockView:
    now: float
    frozen: bool
    offset: float

    @property
    def now_ms(self) -> int:
        return int(self.now * 1000)


class Console:
    """The services behind the pages: one per :func:`firstwrite.console.create_console`."""

    def __init__(self, engine: Engine, metrics: MemoryMetrics) -> None:
        self.engine = engine
        self.metrics = metrics
        self.region = engine.default_region
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._results_lock = threading.Lock()
        # One race at a time (up to 128 threads each) and two scenarios at a time: a console
        # left open by several people must not multiply the server's threads.
        self._racing = threading.Lock()
        self._staging = threading.BoundedSemaphore(2)
        self.last_race: race_module.RaceResult | None = None
        self.outcomes: dict[str, Outcome] = {}

    @property
    def client(self) -> Any:
        """A boto3 client bound to the engine in process (created once, thread-safe)."""
        with self._client_lock:
            if self._client is None:
                # Built as the layer builds its clients (idempotency/clients.py): timeouts
                # within the guards' budget.
                from botocore.config import Config

                settings = sdk_settings(IdempotencyConfig().budget)
                self._client = local_client(
                    self.engine, region=self.region, config=Config(**settings)
                )
            return self._client

    def clock(self) -> ClockView:
        state = self.engine.clock.state()
        return ClockView(float(state["now"]), bool(state["frozen"]), float(state["offset"]))

    def seed(self, *, fresh_only: bool) -> int:
        return seed.seed(self.client, self.engine.clock.now, self.metrics, fresh_only=fresh_only)

    def race(self, n: int, key: str) -> race_module.RaceResult:
        with self._racing:
            result = race_module.race(self.client, n, key, hooks=self.engine.hooks)
        with self._results_lock:
            self.last_race = result
        return result

    def run_scenario(self, scenario: scenarios.Scenario) -> Outcome:
        with self._staging:
            outcome = scenarios.run(scenario, self.metrics)
        with self._results_lock:
            self.outcomes[scenario.slug] = outcome
        return outcome
