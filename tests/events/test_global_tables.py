"""The cross-region reconciler (firstwrite.events.global_tables) on the engine's replicas: two
regions claiming the same keys through replication lag, every overwritten claim found once, in
the stream of the region that lost it, whether or not a retry ever arrives."""

from __future__ import annotations

import random
from typing import Any

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.events.global_tables import CrossRegionReconciler, Overwrite, find_overwrite
from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig, InProgressError
from firstwrite.idempotency.metrics import MemoryMetrics

US, EU = "us-east-1", "eu-west-1"
TABLE = "payments-idempotency"
LAG = 5.0


def _global_table(engine: Engine) -> dict[str, Any]:
    clients = {r: local_client(engine, region=r) for r in (US, EU)}
    Idempotency(IdempotencyConfig(table_name=TABLE), client=clients[US]).ensure_table()
    # A replica switches the table's stream on (NEW_AND_OLD_IMAGES) and has one of its own.
    clients[US].update_table(TableName=TABLE, ReplicaUpdates=[{"Create": {"RegionName": EU}}])
    return clients


def _guard(engine: Engine, client: Any, region: str, metrics: Any = None) -> Idempotency:
    config = IdempotencyConfig(table_name=TABLE, region=region, lease=30.0)
    return Idempotency(config, client=client, clock=engine.clock.now, metrics=metrics)


def _stream_arn(client: Any) -> str:
    return str(client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"])


def _claimed(guard: Idempotency, key: str) -> Claim | None:
    try:
        outcome = guard.claim(key, {"key": key}, wait=0)
    except InProgressError:
        return None
    return outcome if isinstance(outcome, Claim) else None


def test_every_overwritten_claim_is_found_once_over_500_keys(engine: Engine) -> None:
    engine.clock.freeze()
    engine.replication.lag(LAG)
    clients = _global_table(engine)
    guards = {r: _guard(engine, clients[r], r) for r in (US, EU)}
    rng = random.Random(41)
    both: set[str] = set()  # keys both regions claimed: the overwrites to find
    keys = [f"pay-{i}" for i in range(520)]
    for n, key in enumerate(keys):
        first, second = (US, EU) if rng.random() < 0.5 else (EU, US)
        plan = n % 4
        a = _claimed(guards[first], key)
        assert a is not None
        if plan in (0, 1):  # the other region claims before replication: both say yes
            if plan == 1:
                guards[first].complete(a, {"charged": key})  # the loser may even be finished
            b = _claimed(guards[second], key)
            assert b is not None
            both.add(key)
            if rng.random() < 0.5:
                guards[second].complete(b, {"charged": key})
        elif plan == 2:  # only one region ever claims
            guards[first].complete(a, {"charged": key})
        else:  # the other region's attempt comes after replication: it sees the claim
            engine.clock.advance(LAG + 0.5)
            assert _claimed(guards[second], key) is None
        if n % 40 == 39:
            engine.clock.advance(0.01)  # claims keep moving forward in time
    engine.clock.advance(LAG + 1)
    engine.replication.flush()
    assert engine.replication.backlog() == []

    metrics = MemoryMetrics()
    found: list[Overwrite] = []
    for region in (US, EU):
        streams = local_client(engine, region=region, service_name="dynamodbstreams")
        reconciler = CrossRegionReconciler(region, metrics=metrics, on_overwrite=found.append)
        reconciler.poll(streams, _stream_arn(clients[region]))
        assert all(o.lost_region == region for o in reconciler.found)

    assert len(both) >= 250
    assert sorted(o.key for o in found) == sorted(both)  # each once, none missed, no false alarm
    assert {o.won_owner != o.lost_owner and o.won_region != o.lost_region for o in found} == {True}
    assert metrics.total("dynamo_cross_region_duplicate_detected_total") == len(both)
    assert {o.lost_status for o in found} == {"PENDING", "COMPLETED"}


def test_a_takeover_after_the_lease_in_another_region_is_not_an_overwrite(engine: Engine) -> None:
    engine.clock.freeze()
    engine.replication.lag(LAG)
    clients = _global_table(engine)
    us, eu = _guard(engine, clients[US], US), _guard(engine, clients[EU], EU)
    assert _claimed(us, "order-1") is not None  # the worker dies: never completes
    engine.clock.advance(31)  # past the 30 s lease, and past the lag
    assert _claimed(eu, "order-1") is not None  # a legitimate takeover in the other region
    engine.clock.advance(LAG + 1)
    engine.replication.flush()
    reconciler = CrossRegionReconciler(US)
    reconciler.poll(
        local_client(engine, region=US, service_name="dynamodbstreams"), _stream_arn(clients[US])
    )
    assert reconciler.found == []


def _modify(old: dict[str, Any], new: dict[str, Any], event_id: str = "e1") -> dict[str, Any]:
    return {
        "eventID": event_id,
        "eventName": "MODIFY",
        "dynamodb": {
            "Keys": {"pk": {"S": "IDEMPOTENCY#order-9"}},
            "OldImage": old,
            "NewImage": new,
            "SequenceNumber": "100",
        },
    }


def _image(owner: str, region: str, lease_ms: int | None, expires: int) -> dict[str, Any]:
    item = {
        "pk": {"S": "IDEMPOTENCY#order-9"},
        "owner": {"S": owner},
        "expires_at": {"N": str(expires)},
        "region": {"S": region},
    }
    if lease_ms is not None:
        item["lease_expires_at"] = {"N": str(lease_ms)}
    return item


# Owner tokens start with the claim time in epoch milliseconds (12 hex digits).
T0 = 1_800_000_000_000
OLD = f"{T0:012x}" + "a" * 20 + ":1"
NEW_EARLY = f"{T0 + 2_000:012x}" + "b" * 20 + ":1"
NEW_LATE = f"{T0 + 40_000:012x}" + "c" * 20 + ":1"


@pytest.mark.parametrize(
    ("old", "new", "region", "expected"),
    [
        (
            _image(OLD, US, T0 + 30_000, 1_900_000_000),
            _image(NEW_EARLY, EU, T0 + 32_000, 1_900_000_000),
            US,
            True,
        ),
        (
            _image(OLD, US, T0 + 30_000, 1_900_000_000),
            _image(NEW_LATE, EU, T0 + 70_000, 1_900_000_000),
            US,
            False,
        ),
        (
            _image(OLD, US, T0 + 30_000, 1_900_000_000),
            _image(NEW_EARLY, EU, T0 + 32_000, 1_900_000_000),
            EU,
            False,
        ),
        (
            _image(OLD, US, T0 + 30_000, 1_900_000_000),
            _image(OLD, US, None, 1_900_000_000),
            US,
            False,
        ),
        (
            _image(OLD, US, T0 + 30_000, 1_900_000_000),
            _image(NEW_EARLY, US, T0 + 32_000, 1_900_000_000),
            US,
            False,
        ),
    ],
    ids=[
        "overwritten",
        "taken over after the lease",
        "seen in the winner's region",
        "completed",
        "same region",
    ],
)
def test_find_overwrite_rules(
    old: dict[str, Any], new: dict[str, Any], region: str, expected: bool
) -> None:
    assert (find_overwrite(_modify(old, new), region) is not None) is expected


def test_a_redelivered_stream_batch_is_counted_once_with_a_guard(engine: Engine) -> None:
    client = local_client(engine, region=US)
    guard = Idempotency(IdempotencyConfig(table_name="reconciler-ledger"), client=client)
    guard.ensure_table()
    metrics = MemoryMetrics()
    reconciler = CrossRegionReconciler(US, guard=guard, metrics=metrics)
    old = _image(OLD, US, T0 + 30_000, 1_900_000_000)
    event = {"Records": [_modify(old, _image(NEW_EARLY, EU, T0 + 32_000, 1_900_000_000))]}
    assert reconciler.lambda_handler(event, None) == {"batchItemFailures": []}
    assert reconciler.lambda_handler(event, None) == {"batchItemFailures": []}  # redelivered
    assert reconciler.process(event["Records"]) == 0  # and read again by a restarted poller
    assert metrics.total("dynamo_cross_region_duplicate_detected_total") == 1
    assert len(reconciler.found) == 1
