"""Home-region routing: stable placement, and the stale-replica duplicate it prevents."""

from __future__ import annotations

from firstwrite.idempotency import (
    HomeRegionRouter,
    Idempotency,
    IdempotencyConfig,
    MemoryMetrics,
    RoutedIdempotency,
)
from firstwrite.idempotency.record import A_REGION

from .conftest import TABLE, Backend, create_table

REGIONS = ("us-east-1", "eu-west-1")


def test_rendezvous_is_stable_when_regions_are_added() -> None:
    keys = [f"IDEMPOTENCY##k{i}" for i in range(4000)]
    three = HomeRegionRouter(["us-east-1", "eu-west-1", "ap-south-1"])
    four = HomeRegionRouter(["us-east-1", "eu-west-1", "ap-south-1", "sa-east-1"])
    before = {k: three.region_for(k) for k in keys}
    after = {k: four.region_for(k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "sa-east-1" for k in moved)  # only to the new region
    assert 0.18 < len(moved) / len(keys) < 0.32  # about 1/4
    counts = {r: list(before.values()).count(r) for r in three.regions}
    assert min(counts.values()) > 1100  # balanced
    assert HomeRegionRouter(reversed(three.regions)).region_for("x") == three.region_for("x")


def regional_guards(
    backend: Backend, metrics: MemoryMetrics | None = None
) -> dict[str, Idempotency]:
    guards = {}
    for region in REGIONS:
        client = backend.new_client(region=region)
        config = IdempotencyConfig(table_name=TABLE, region=region)
        create_table(client, config)
        guards[region] = Idempotency(config, client=client, clock=backend.now, metrics=metrics)
    return guards


def test_stale_replica_duplicate_is_prevented_by_routing(backend: Backend) -> None:
    """Each region's table is a replica that has not yet received the other's writes (the
    worst case of replication lag). A retry served by the other region runs the side effect
    again, unless both are routed to the key's home region."""
    guards = regional_guards(backend)
    runs: list[str] = []

    def charge(region: str) -> str:
        runs.append(region)
        return f"charged in {region}"

    # Without routing: the retry lands on the lagging replica and charges twice.
    for region in REGIONS:
        guards[region].run("unrouted", lambda r=region: charge(r), {"amount": 1})
    assert len(runs) == 2

    runs.clear()
    routed = RoutedIdempotency(guards)
    home = routed.home("routed")
    first = routed.run("routed", lambda: charge(home), {"amount": 1})
    retry = routed.run("routed", lambda: charge("retry"), {"amount": 1})
    assert runs == [home] and retry == first
    assert guards[home].get("routed") is not None
    other = next(r for r in REGIONS if r != home)
    assert guards[other].get("routed") is None  # never claimed elsewhere


def test_claim_from_another_region_is_counted(backend: Backend) -> None:
    metrics = MemoryMetrics()
    guards = regional_guards(backend, metrics)
    east, west = guards["us-east-1"], guards["eu-west-1"]
    east.run("k", lambda: 1, {"p": 1})
    # Replicate the record east -> west as a global table would.
    dkey = east.dynamodb_key("k")
    item = east.client.get_item(TableName=TABLE, Key=dkey, ConsistentRead=True)["Item"]
    assert item[A_REGION] == {"S": "us-east-1"}
    west.client.put_item(TableName=TABLE, Item=item)
    assert west.run("k", lambda: 2, {"p": 1}) == 1  # replayed from the replica...
    # ...but it was served outside the key's home: a cross-region duplicate to look into.
    assert metrics.total("dynamo_cross_region_duplicate_detected_total", region="us-east-1") == 1


def test_lagging_global_table_replica(backend: Backend) -> None:
    """A replica made with ``UpdateTable(ReplicaUpdates=[{"Create": ...}])`` as on DynamoDB,
    held back by ``engine.replication.lag(seconds)``: routing keeps a key's reads and claims home."""
    client = backend.new_client(region="us-east-1")
    config = IdempotencyConfig(table_name=TABLE, region="us-east-1")
    create_table(client, config)
    client.update_table(TableName=TABLE, ReplicaUpdates=[{"Create": {"RegionName": "eu-west-1"}}])
    backend.engine.replication.lag(60.0)
    guards = regional_guards(backend)
    runs: list[int] = []
    routed = RoutedIdempotency(guards)
    for _attempt in range(2):  # a first try and the client's retry, whichever region serves it
        routed.run("g", lambda: runs.append(1), {"p": 1})
    assert runs == [1]
    guards["eu-west-1"].run("h", lambda: runs.append(2), {"p": 1})
    guards["us-east-1"].run("h", lambda: runs.append(3), {"p": 1})  # unrouted: replica is stale
    assert runs == [1, 2, 3]
