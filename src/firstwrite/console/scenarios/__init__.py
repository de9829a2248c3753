"""The guided scenarios: each stages one failure case and shows the layer's defence.

A scenario module has ``run(stage) -> verdict headline``, a ``STORY`` (what happens) and a
``STAGE`` (what is set up). :func:`run` gives each run a fresh :class:`~.stage.Stage` (a scratch
engine of its own) and turns whatever happens, including an unexpected error, into an
:class:`~.stage.Outcome` the page can show.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from firstwrite.idempotency import Metrics

from . import (
    both_regions,
    hot_partition,
    killed_worker,
    lease,
    redelivered_batch,
    replay,
    replica,
    skewed_worker,
    throttling,
    transaction,
    ttl_race,
)
from .stage import Outcome, Stage

__all__ = ["SCENARIOS", "Outcome", "Scenario", "by_slug", "count_in_words", "run"]

log = logging.getLogger("firstwrite.console")


@dataclass(frozen=True, slots=True)
class Scenario:
    number: int
    slug: str
    title: str
    story: str
    stage: tuple[str, ...]
    runner: Callable[[Stage], str]
    make_stage: Callable[[str, Metrics | None], Stage]


def _scenario(number: int, slug: str, title: str, module: ModuleType) -> Scenario:
    make = getattr(module, "make_stage", None) or (lambda slug, shared: Stage(slug, shared))
    return Scenario(number, slug, title, module.STORY, module.STAGE, module.run, make)


SCENARIOS: tuple[Scenario, ...] = (
    _scenario(1, "lease-takeover", "Lease expiry and takeover", lease),
    _scenario(2, "ttl-race", "The TTL race", ttl_race),
    _scenario(3, "throttling", "Throttling under burst", throttling),
    _scenario(4, "transaction-cancelled", "A transaction cancelled", transaction),
    _scenario(5, "stale-replica", "A stale replica", replica),
    _scenario(6, "replay", "Replay", replay),
    _scenario(7, "hot-partition", "A hot partition", hot_partition),
    _scenario(8, "redelivered-batch", "A redelivered batch", redelivered_batch),
    _scenario(9, "worker-killed-after-charge", "A worker killed after the charge", killed_worker),
    _scenario(10, "skewed-worker", "A worker whose clock runs ahead", skewed_worker),
    _scenario(11, "regions-both-claimed", "Two regions both said yes", both_regions),
)
_BY_SLUG = {s.slug: s for s in SCENARIOS}
_WORDS = (
    *("no", "one", "two", "three", "four", "five", "six"),
    *("seven", "eight", "nine", "ten", "eleven", "twelve"),
)


def count_in_words() -> str:
    """How many scenarios there are, as the text says it ("eight"): the one source of the
    count for the demo's banner, the console's overview and the docs (tests/docs checks them)."""
    n = len(SCENARIOS)
    return _WORDS[n] if n < len(_WORDS) else str(n)


def by_slug(slug: str) -> Scenario | None:
    return _BY_SLUG.get(slug)


def run(scenario: Scenario, shared: Metrics | None = None) -> Outcome:
    """Run ``scenario`` on a scratch engine; never raises (an error becomes the outcome)."""
    started = time.perf_counter()
    stage = scenario.make_stage(scenario.slug, shared)
    try:
        with stage.working():
            verdict = scenario.runner(stage)
        error = None
    except Exception as exc:  # shown on the page as "could not run", never a 500
        log.exception("scenario %s failed", scenario.slug)
        verdict = "The scenario could not run to its end."
        error = f"{type(exc).__name__}: {exc}"
    finally:
        stage.close()
    outcome = stage.outcome(verdict, time.perf_counter() - started, error)
    outcome.title = scenario.title
    return outcome
