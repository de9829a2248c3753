"""Scenario 5: a stale replica.

Two regions with replication lag, a duplicate routed to the other region: what happens without
home-region pinning, and with it."""

from __future__ import annotations

import collections
from typing import Any

from firstwrite.idempotency import (
    HomeRegionRouter,
    IdempotencyConfig,
    RoutedIdempotency,
)

from .stage import Stage

TABLE = "orders-idempotency"
HOME = "us-east-1"
OTHER = "eu-west-1"
REGIONS = (HOME, OTHER)
LAG = 5.0
UNPINNED = "order-7"
PINNED = "order-8"


def run(stage: Stage) -> str:
    ran: collections.Counter[str] = collections.Counter()

    def charge(key: str, region: str) -> Any:
        def side_effect() -> dict[str, str]:
            ran[key] += 1
            stage.note(f"side effect: {key} charged in {region} (run {ran[key]})")
            return {"charge": f"{key}-{region}"}

        return side_effect

    configs = {r: IdempotencyConfig(table_name=TABLE, region=r) for r in REGIONS}
    clients = {r: stage.client(r) for r in REGIONS}
    guards = {r: stage.guard(configs[r], client=clients[r]) for r in REGIONS}

    with stage.step(
        "Setting the stage",
        f"The idempotency table in {HOME}, made a global table with a replica in {OTHER} "
        f"(UpdateTable ReplicaUpdates), replication lag {LAG:g} s on the engine's clock.",
    ):
        with stage.actor(HOME):
            guards[HOME].ensure_table()
            clients[HOME].update_table(
                TableName=TABLE, ReplicaUpdates=[{"Create": {"RegionName": OTHER}}]
            )
        stage.engine.replication.lag(LAG)
        stage.note(
            f"replication lag {LAG:g} s",
            kind="stage",
            code=f'engine.replication.lag({LAG:g})  ·  POST /_firstwrite/replication {{"lag": {LAG:g}}}',
        )
        for key in (UNPINNED, PINNED):
            for region in REGIONS:
                stage.watch_record(f"{key} in {region}", configs[region], key, region)

    # -- without pinning -----------------------------------------------------------------------
    with (
        stage.step(
            f"Without pinning: a payment in {HOME}",
            f"{UNPINNED} is claimed and completed in {HOME}.",
        ),
        stage.actor(HOME),
    ):
        guards[HOME].run(UNPINNED, charge(UNPINNED, HOME), payload={"order": 7})

    with stage.step(
        f"Without pinning: the duplicate is routed to {OTHER}",
        f"One second later the client's retry lands in {OTHER}. Its replica has not seen the "
        f"record yet ({LAG:g} s lag), so the conditional claim succeeds there too: a conditional "
        "write is linearizable only within the region it is sent to.",
    ) as routed_away:
        stage.advance(1, "a retry one second later")
        with stage.actor(OTHER):
            guards[OTHER].run(UNPINNED, charge(UNPINNED, OTHER), payload={"order": 7})

    with stage.step(
        "Replication catches up",
        "Both writes replicate; the later one wins in both regions (last writer wins). The "
        "replicas agree again, but the side effect has already run twice.",
    ) as converged:
        stage.advance(LAG, "the replication lag passes")

    with (
        stage.step(
            f"Without pinning: another duplicate in {HOME}",
            f"{HOME} now holds the record {OTHER} wrote. The layer replays it and counts "
            "dynamo_cross_region_duplicate_detected_total: a claim made in another region than the "
            "one serving the request is the symptom of unpinned traffic.",
        ) as counted,
        stage.actor(HOME),
    ):
        guards[HOME].run(UNPINNED, charge(UNPINNED, HOME), payload={"order": 7})

    # -- with pinning --------------------------------------------------------------------------
    routed = RoutedIdempotency(guards, HomeRegionRouter(REGIONS))
    home = routed.home(PINNED)
    with (
        stage.step(
            f"With pinning: a payment arrives in {HOME}",
            f"RoutedIdempotency sends every request for a key to the key's home region, chosen by "
            f"rendezvous hashing of the key: {PINNED} lives in {home}.",
        ),
        stage.actor(f"{HOME} front door → {home}"),
    ):
        routed.run(PINNED, charge(PINNED, home), payload={"order": 8})

    with stage.step(
        f"With pinning: the duplicate arrives in {OTHER}",
        f"The retry lands in {OTHER} within the lag, but it is decided in {home}, where the "
        "record is: the stored result is replayed.",
    ) as pinned:
        stage.advance(1, "a retry one second later")
        with stage.actor(f"{OTHER} front door → {home}"):
            routed.run(PINNED, charge(PINNED, home), payload={"order": 8})
        stage.advance(LAG, "the replication lag passes")

    unpinned = [stage.record(configs[r], UNPINNED, r) for r in REGIONS]
    stage.check(
        "without pinning the hazard is real: two regions each claimed the key, the side effect ran twice",
        ran[UNPINNED] == 2,
        shown_by=routed_away,
    )
    stage.check(
        "the replicas converged on one record (last writer wins)",
        None not in unpinned and len({r.owner for r in unpinned if r is not None}) == 1,
        shown_by=converged,
    )
    stage.check(
        "the cross-region duplicate was counted (dynamo_cross_region_duplicate_detected_total)",
        stage.metrics.total("dynamo_cross_region_duplicate_detected_total") >= 1,
        shown_by=counted,
    )
    stage.check(
        "with home-region pinning the side effect ran once", ran[PINNED] == 1, shown_by=pinned
    )
    return (
        "Pinning held: unpinned, two regions each accepted a claim inside the replication lag and "
        f"the side effect ran twice; pinned to its home region ({home}), the duplicate was "
        "replayed and it ran once."
    )


STORY = (
    "A global table with a replica in a second region and a few seconds of replication lag. "
    "A retry routed to the other region finds no record there and runs the side effect again; "
    "with home-region pinning (RoutedIdempotency) the same retry is decided where the record "
    "is, and replayed."
)
STAGE = (
    "a scratch engine with its clock frozen at t0",
    f"the idempotency table in {HOME} with a replica in {OTHER}",
    f"replication lag {LAG:g} s (engine.replication.lag)",
    "one guard per region (config.region set), then RoutedIdempotency over both",
)
