"""Home-region routing: every key is claimed and read in one region.

With global tables, two regions can each accept a claim for the same key before replication
carries either across (replication is asynchronous; last writer wins), and both run the side
effect. Sending every request for a key to the key's *home region* closes that window: the
conditional write that decides is always made against one copy.

Home regions come from rendezvous (highest-random-weight) hashing: each region scores
``hash(region, key)`` and the highest wins. Adding a region moves only the keys the new region
now wins (about 1/n of them), and removing one moves only its own keys, with no ring to keep.
During a region change, keys that moved can see one duplicate window; change regions with
traffic drained or accept that, and watch ``dynamo_cross_region_duplicate_detected_total``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from .guard import UNSET, Claim, Idempotency

T = TypeVar("T")


def _score(region: str, record_id: str) -> int:
    digest = hashlib.sha256(f"{region}\x00{record_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class HomeRegionRouter:
    """Maps a record id to its home region, stably."""

    def __init__(self, regions: Iterable[str]) -> None:
        self.regions = tuple(dict.fromkeys(regions))
        if not self.regions:
            raise ValueError("a router needs at least one region")

    def region_for(self, record_id: str) -> str:
        return max(self.regions, key=lambda region: _score(region, record_id))


class RoutedIdempotency:
    """One guard per region behind a router: ``run`` of a key always goes to its home region's
    guard, and ``complete``/``fail``/``renew`` of a claim to the guard of the region that made
    it. ``guards`` maps region -> :class:`~.guard.Idempotency` (each with ``config.region`` set,
    so records carry the region that claimed them). To claim step by step, claim on the key's
    home guard: ``routed.guard_for(key, scope).claim(key, payload, scope=scope)`` (the router
    is no guard of its own: the claim's signature is declared once, in :mod:`.protocols`)."""

    def __init__(
        self, guards: Mapping[str, Idempotency], router: HomeRegionRouter | None = None
    ) -> None:
        self.guards = dict(guards)
        self.router = router or HomeRegionRouter(self.guards)
        missing = set(self.router.regions) - set(self.guards)
        if missing:
            raise ValueError(f"no guard for regions {sorted(missing)}")
        self._any = next(iter(self.guards.values()))

    def home(self, key: str, scope: str | None = None) -> str:
        return self.router.region_for(self._any.record_id(key, scope=scope))

    def guard_for(self, key: str, scope: str | None = None) -> Idempotency:
        return self.guards[self.home(key, scope)]

    def _owner_of(self, claim: Claim) -> Idempotency:
        region = claim.region or self.router.region_for(claim.record_id)
        return self.guards[region]

    def complete(self, claim: Claim, result: Any = None, *, budget: float | None = None) -> Any:
        return self._owner_of(claim).complete(claim, result, budget=budget)

    def fail(
        self,
        claim: Claim,
        error: BaseException | str,
        *,
        retryable: bool,
        budget: float | None = None,
    ) -> None:
        self._owner_of(claim).fail(claim, error, retryable=retryable, budget=budget)

    def renew(self, claim: Claim, lease: float | None = None) -> Claim:
        return self._owner_of(claim).renew(claim, lease)

    def run(
        self,
        key: str,
        fn: Callable[[], T],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        **kw: Any,
    ) -> T:
        return self.guard_for(key, scope).run(key, fn, payload, scope=scope, **kw)
