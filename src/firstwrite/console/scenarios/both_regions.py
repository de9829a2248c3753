"""Scenario 11: two regions both said yes, and the cross-region reconciler found it.

A global table with a replica and replication lag, no home-region pinning: one key is claimed
and completed in both regions inside the lag, replication keeps the later write everywhere,
and no retry ever comes to notice it. A
:class:`~firstwrite.events.global_tables.CrossRegionReconciler` per region reads that region's
stream and finds the overwritten claim all the same.
"""

from __future__ import annotations

import collections
from typing import Any

from firstwrite.events.global_tables import METRIC, CrossRegionReconciler, Overwrite
from firstwrite.idempotency import IdempotencyConfig

from .stage import Stage

TABLE = "orders-idempotency"
HOME = "us-east-1"
OTHER = "eu-west-1"
REGIONS = (HOME, OTHER)
LAG = 5.0
KEY = "order-9117"
PAYLOAD = {"order": 9117, "amount": 2500}


def run(stage: Stage) -> str:
    ran: collections.Counter[str] = collections.Counter()
    owners: dict[str, str] = {}

    def charge(region: str) -> Any:
        def side_effect() -> dict[str, str]:
            ran[region] += 1
            stage.note(f"side effect: {KEY} charged in {region}")
            return {"charge": f"ch-{region}"}

        return side_effect

    configs = {r: IdempotencyConfig(table_name=TABLE, region=r, lease=30.0) for r in REGIONS}
    clients = {r: stage.client(r) for r in REGIONS}
    guards = {r: stage.guard(configs[r], client=clients[r]) for r in REGIONS}

    with stage.step(
        "Setting the stage",
        f"The idempotency table in {HOME}, made a global table with a replica in {OTHER} "
        f"(UpdateTable ReplicaUpdates), which gives each region a stream of its own "
        f"(NEW_AND_OLD_IMAGES), as on DynamoDB; replication lag {LAG:g} s on the engine's "
        f"clock. No home-region pinning.",
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
        for region in REGIONS:
            stage.watch_record(f"{KEY} in {region}", configs[region], KEY, region)

    with (
        stage.step(
            f"A payment in {HOME}",
            f"{KEY} is claimed in {HOME} (a conditional PutItem: nothing there yet), the card is "
            "charged, and the record completed.",
        ),
        stage.actor(HOME),
    ):
        guards[HOME].run(KEY, charge(HOME), payload=PAYLOAD)
        owners[HOME] = _owner(stage, configs[HOME], HOME)

    with stage.step(
        f"The same payment in {OTHER}, inside the lag",
        f"One second later the same request reaches {OTHER} (a client failover, a duplicate "
        f"send). Its replica has not seen {HOME}'s record yet, so its conditional claim "
        "succeeds too: a condition is checked only in the region the write is sent to. Both "
        "regions said yes; the card is charged again.",
    ) as second:
        stage.advance(1, "a duplicate one second later")
        with stage.actor(OTHER):
            guards[OTHER].run(KEY, charge(OTHER), payload=PAYLOAD)
        owners[OTHER] = _owner(stage, configs[OTHER], OTHER)

    with stage.step(
        "Replication converges, and nobody retries",
        f"Both writes replicate; the later one, {OTHER}'s, wins in both regions (last writer "
        f"wins): {HOME}'s claim and result are overwritten. No retry of {KEY} ever arrives, so "
        "no guard gets to see another region's claim and count it.",
    ) as converged:
        stage.advance(LAG, "the replication lag passes")
        stage.engine.replication.flush()
        counted_by_guards = stage.metrics.total(METRIC)
        stage.note(f"{METRIC} so far: {counted_by_guards:g}")

    found: list[Overwrite] = []
    reconcilers = {
        r: CrossRegionReconciler(r, metrics=stage.sink, on_overwrite=found.append) for r in REGIONS
    }
    with stage.step(
        "The cross-region reconciler reads each region's stream",
        "One CrossRegionReconciler per region (run as a Lambda on the stream, or polling it as "
        "here) examines every MODIFY: a claim made in its region replaced by one made in "
        "another region before the old claim's lease or retention ended is an overwrite. Only "
        f"the losing region's stream shows it ({OTHER} never applied the older write), so it "
        "is found once: counted, logged at ERROR with both owners.",
    ) as reconciled:
        for region in REGIONS:
            with stage.actor(f"reconciler {region}"):
                streams = stage.client(region, service="dynamodbstreams")
                arn = clients[region].describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
                reconcilers[region].poll(streams, arn)
                for o in reconcilers[region].found:
                    stage.note(
                        f"overwrite of {o.key}: {o.lost_region}'s claim …{o.lost_owner[-10:]} "
                        f"({o.lost_status}) replaced by {o.won_region}'s …{o.won_owner[-10:]}"
                    )
                if not reconcilers[region].found:
                    stage.note(f"no overwrite in {region}'s stream")

    records = [stage.record(configs[r], KEY, r) for r in REGIONS]
    stage.check(
        "the hazard is real: both regions claimed the key and the side effect ran in each",
        ran == {HOME: 1, OTHER: 1} and owners[HOME] != owners[OTHER],
        shown_by=second,
    )
    stage.check(
        f"the replicas converged on {OTHER}'s record (last writer wins), "
        "and no retry counted anything",
        None not in records
        and {r.owner for r in records if r is not None} == {owners[OTHER]}
        and counted_by_guards == 0
        and stage.metrics.total("firstwrite_claims_total") == 2,  # two claims, no retry
        shown_by=converged,
    )
    stage.check(
        f"the reconciler found exactly one overwrite of {KEY}, in {HOME}'s stream",
        [o.key for o in found] == [KEY]
        and [o.key for o in reconcilers[HOME].found] == [KEY]
        and reconcilers[OTHER].found == [],
        shown_by=reconciled,
    )
    stage.check(
        f"it names both owners: {HOME}'s lost claim and {OTHER}'s winning one",
        len(found) == 1
        and found[0].lost_owner.startswith(owners[HOME])
        and found[0].won_owner.startswith(owners[OTHER])
        and (found[0].lost_region, found[0].won_region) == (HOME, OTHER),
        shown_by=reconciled,
    )
    stage.check(
        f"{METRIC}{{region={OTHER}}} counted it once, with no retry needed",
        stage.metrics.total(METRIC, region=OTHER) == 1 and stage.metrics.total(METRIC) == 1,
        shown_by=reconciled,
    )
    return (
        "Found: two regions both accepted the claim inside the replication lag and the side "
        "effect ran in each; no retry ever came, yet the cross-region reconciler read the "
        f"overwrite in {HOME}'s stream and counted it once, naming both owners."
    )


def _owner(stage: Stage, config: IdempotencyConfig, region: str) -> str:
    record = stage.record(config, KEY, region)
    return "" if record is None else record.owner


STORY = (
    "Two regions of a global table each accept the same key's claim inside the replication "
    "lag, each runs the side effect, and replication quietly keeps the later record. No retry "
    "arrives to notice; the cross-region reconciler, a Streams consumer per region, finds the "
    "overwritten claim anyway and counts it with both owners."
)
STAGE = (
    "a scratch engine with its clock frozen at t0",
    f"the idempotency table in {HOME} with a replica in {OTHER}, streams on in both",
    f"replication lag {LAG:g} s (engine.replication.lag), no home-region pinning",
    "one guard per region (config.region set), a CrossRegionReconciler per region",
)
