"""Seed 001's record layout through the real layer, in process and over HTTP.

The table is built by hand from the seed's model (``pk`` S, TTL on ``expiresAt``), never by
``ensure_table``, and every transition's stored item is checked attribute by attribute: the
layer must read and write the seed's item (``status``, ``resultId``, ``claimedAt``,
``expiresAt``) and nothing of its own default layout.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from firstwrite.idempotency import (
    Claim,
    ClockSkewPolicy,
    ConfigurationError,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    LateRetryError,
    PayloadMismatchError,
    RecordLayout,
    Replay,
    ReplayedFailureError,
    Status,
    TtlAudit,
)
from firstwrite.idempotency.layout import DEFAULT, SEED_001, layout_of, named
from firstwrite.idempotency.record import Record, convert_item

from .conftest import Backend, OffsetClock
from .test_audit import stream_record

SEED = RecordLayout.seed_001()
# Names only the default layout uses: none may appear on a seed item.
DEFAULT_ONLY = set(DEFAULT.names().values()) - set(SEED.names().values())
RETENTION = 3600.0


def seed_table(client: Any) -> str:
    """CreateTable exactly as seed 001's model has it: ``pk`` S, TTL on ``expiresAt``."""
    name = f"seed-{uuid.uuid4().hex[:10]}"
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}
    )
    return name


@pytest.fixture(params=["inprocess", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def seeded(transport: str, make_ddb: Callable[..., Any]) -> tuple[Any, str, OffsetClock]:
    client = make_ddb(transport)
    return client, seed_table(client), OffsetClock()


def seed_guard(client: Any, table: str, clock: OffsetClock, **config: Any) -> Idempotency:
    # The tests move the guard's clock to stand for time passing: over HTTP, the estimate of
    # DynamoDB's clock (from the answers' Date) would undo it, so leases are on this clock.
    config.setdefault("clock_skew", ClockSkewPolicy(enabled=False))
    cfg = IdempotencyConfig(table_name=table, layout=SEED, retention=RETENTION, **config)
    return Idempotency(cfg, client=client, clock=clock.now)


def stored(client: Any, table: str, pk: str) -> dict[str, Any]:
    item: dict[str, Any] = client.get_item(
        TableName=table, Key={"pk": {"S": pk}}, ConsistentRead=True
    )["Item"]
    assert not DEFAULT_ONLY & set(item), item
    return item


def assert_pending(item: dict[str, Any], claim: Claim, now: float) -> None:
    assert set(item) == {
        "pk",
        "status",
        "owner",
        "leaseExpiresAt",
        "claimedAt",
        "expiresAt",
        "fingerprint",
        "version",
    }
    assert item["status"] == {"S": "PENDING"}
    assert item["owner"] == {"S": f"{claim.owner}:{claim.version}"}
    # Variant 2's version: 1 at claim, +1 on every transition
    assert item["version"] == {"N": str(claim.version)}
    claimed = int(item["claimedAt"]["N"])
    assert claimed == int(claim.claimed_at) and abs(claimed - now) <= 2
    # Retention counted from the latest DynamoDB time the answers' whole-second Date allows.
    assert int(item["expiresAt"]["N"]) == claim.expires_at
    assert 0 <= claim.expires_at - int(claim.claimed_at + RETENTION) <= 2
    assert int(item["leaseExpiresAt"]["N"]) == claim.lease_expires_at


def test_the_whole_state_machine_on_a_table_built_from_the_seed_model(
    seeded: tuple[Any, str, OffsetClock],
) -> None:
    client, table, clock = seeded
    guard = seed_guard(client, table, clock)

    # claim: the unscoped key is exactly IDEMPOTENCY#<key>
    claim = guard.claim("order-1", payload={"amount": 5})
    assert isinstance(claim, Claim) and claim.record_id == "IDEMPOTENCY#order-1"
    assert_pending(stored(client, table, "IDEMPOTENCY#order-1"), claim, clock.now())

    # in progress, and a different request with the same key
    with pytest.raises(InProgressError):
        guard.claim("order-1", payload={"amount": 5}, wait=0)
    with pytest.raises(PayloadMismatchError):
        guard.claim("order-1", payload={"amount": 6}, wait=0)

    # renew keeps it PENDING, bumps the version
    renewed = guard.renew(claim)
    assert renewed.version == 2
    assert_pending(stored(client, table, "IDEMPOTENCY#order-1"), renewed, clock.now())

    # complete: status COMPLETED written, the result in resultId, the lease gone
    guard.complete(renewed, {"receipt": "r-1"})
    item = stored(client, table, "IDEMPOTENCY#order-1")
    assert set(item) == {
        "pk",
        "status",
        "owner",
        "claimedAt",
        "expiresAt",
        "fingerprint",
        "resultId",
        "version",
    }
    assert item["status"] == {"S": "COMPLETED"}
    assert json.loads(item["resultId"]["S"]) == {"receipt": "r-1"}
    assert item["owner"] == {"S": f"{renewed.owner}:2"}
    assert item["version"] == {"N": "3"}  # claim 1, renew 2, complete 3

    # replay: the stored result, the function not run
    assert guard.run("order-1", lambda: pytest.fail("ran twice"), {"amount": 5}) == {
        "receipt": "r-1"
    }
    record = guard.get("order-1")
    assert record is not None and record.status is Status.COMPLETED

    # fail, retryable: FAILED with lease 0, then the same request claims it again
    flaky = guard.claim("order-2", payload={"n": 2})
    assert isinstance(flaky, Claim)
    guard.fail(flaky, ValueError("gateway timeout"), retryable=True)
    item = stored(client, table, "IDEMPOTENCY#order-2")
    assert item["status"] == {"S": "FAILED"} and item["leaseExpiresAt"] == {"N": "0"}
    assert json.loads(item["error"]["S"])["message"] == "gateway timeout"
    assert item["owner"] == {"S": f"{flaky.owner}:2"} and item["version"] == {"N": "2"}
    again = guard.claim("order-2", payload={"n": 2})
    assert isinstance(again, Claim) and again.previous is Status.FAILED
    assert_pending(stored(client, table, "IDEMPOTENCY#order-2"), again, clock.now())

    # fail, final: FAILED without a lease; a duplicate gets the stored failure
    final = guard.claim("order-3", payload={"n": 3})
    assert isinstance(final, Claim)
    guard.fail(final, ValueError("card declined"), retryable=False)
    item = stored(client, table, "IDEMPOTENCY#order-3")
    assert item["status"] == {"S": "FAILED"} and "leaseExpiresAt" not in item
    with pytest.raises(ReplayedFailureError, match="card declined"):
        guard.run("order-3", lambda: pytest.fail("ran a final failure again"), {"n": 3})

    # lease takeover: an abandoned claim is taken once its lease is over
    abandoned = guard.claim("order-4", payload={"n": 4}, lease=1.0)
    assert isinstance(abandoned, Claim)
    clock.advance(2.0)
    taker = guard.claim("order-4", payload={"n": 4})
    assert isinstance(taker, Claim) and taker.taken_over and taker.owner != abandoned.owner
    assert_pending(stored(client, table, "IDEMPOTENCY#order-4"), taker, clock.now())

    # past retention: a new request takes the key
    clock.advance(RETENTION + 10)
    fresh = guard.claim("order-1", payload={"amount": 7})
    assert isinstance(fresh, Claim)
    assert_pending(stored(client, table, "IDEMPOTENCY#order-1"), fresh, clock.now())


def test_the_transactional_variant_on_the_seed_layout(
    seeded: tuple[Any, str, OffsetClock],
) -> None:
    client, table, clock = seeded
    guard = seed_guard(client, table, clock)
    order = {"Put": {"TableName": table, "Item": {"pk": {"S": "ORDER#9"}, "total": {"N": "10"}}}}
    claim = guard.claim_with("order-9", [order], payload={"n": 9})
    assert isinstance(claim, Claim)
    assert_pending(stored(client, table, "IDEMPOTENCY#order-9"), claim, clock.now())
    paid = {
        "Update": {
            "TableName": table,
            "Key": {"pk": {"S": "ORDER#9"}},
            "UpdateExpression": "SET paid = :t",
            "ExpressionAttributeValues": {":t": {"BOOL": True}},
        }
    }
    guard.complete_with(claim, [paid], {"paid": True})
    item = stored(client, table, "IDEMPOTENCY#order-9")
    assert item["status"] == {"S": "COMPLETED"} and "leaseExpiresAt" not in item
    assert json.loads(item["resultId"]["S"]) == {"paid": True}
    business = client.get_item(TableName=table, Key={"pk": {"S": "ORDER#9"}})["Item"]
    assert business["paid"] == {"BOOL": True}
    replay = guard.claim_with("order-9", [order], payload={"n": 9})
    assert isinstance(replay, Replay) and replay.value() == {"paid": True}
    with pytest.raises(PayloadMismatchError):
        guard.claim_with("order-9", [order], payload={"n": 10})


def test_threads_race_for_one_key_and_exactly_one_wins(
    transport: str, make_ddb: Callable[..., Any]
) -> None:
    clients = [make_ddb(transport) for _ in range(8)]  # each thread its own client
    table = seed_table(clients[0])
    clock = OffsetClock()
    runs: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(clients))
    answers: list[object] = []

    def side_effect() -> dict[str, int]:
        with lock:
            runs.append(1)
        return {"ran": len(runs)}

    def worker(client: Any) -> None:
        guard = seed_guard(client, table, clock, in_progress_wait=20.0)
        barrier.wait()
        answer = guard.run("hot", side_effect, {"same": True})
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(runs) == 1
    assert answers == [{"ran": 1}] * len(clients)
    item = stored(clients[0], table, "IDEMPOTENCY#hot")
    assert item["status"] == {"S": "COMPLETED"} and item["resultId"] == {"S": '{"ran":1}'}


def test_unscoped_and_scoped_keys_never_share_a_record(
    seeded: tuple[Any, str, OffsetClock],
) -> None:
    client, table, clock = seeded
    unscoped = seed_guard(client, table, clock)
    scoped = seed_guard(client, table, clock, scope="a")
    # "a#b" without a scope and "b" in scope "a" would both be IDEMPOTENCY#a#b unescaped.
    assert unscoped.run("a#b", lambda: "unscoped") == "unscoped"
    assert scoped.run("b", lambda: "scoped") == "scoped"
    assert unscoped.record_id("a#b") == "IDEMPOTENCY#a%23b"
    assert scoped.record_id("b") == "IDEMPOTENCY#a#b"
    assert json.loads(stored(client, table, "IDEMPOTENCY#a%23b")["resultId"]["S"]) == "unscoped"
    assert json.loads(stored(client, table, "IDEMPOTENCY#a#b")["resultId"]["S"]) == "scoped"


def test_the_default_layout_also_writes_the_unscoped_key_without_an_empty_scope(
    seeded: tuple[Any, str, OffsetClock],
) -> None:
    client, table, clock = seeded
    guard = Idempotency(IdempotencyConfig(table_name=table), client=client, clock=clock.now)
    guard.run("k1", lambda: 1)
    item = client.get_item(TableName=table, Key={"pk": {"S": "IDEMPOTENCY#k1"}})["Item"]
    assert set(item) == {"pk", "owner", "expires_at", "result"}
    assert layout_of(item) is DEFAULT
    assert "Item" not in client.get_item(TableName=table, Key={"pk": {"S": "IDEMPOTENCY##k1"}})


def test_layouts_are_named_validated_and_recognised() -> None:
    assert named("seed-001") is SEED_001 is RecordLayout.seed_001()
    assert named("default") is DEFAULT == RecordLayout()
    with pytest.raises(ConfigurationError, match="unknown record layout"):
        named("seed-002")
    with pytest.raises(ConfigurationError, match="distinct"):
        RecordLayout(result="error")
    with pytest.raises(ConfigurationError, match="RecordLayout"):
        IdempotencyConfig(layout="seed-001")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="key attributes"):
        IdempotencyConfig(layout=SEED, partition_key="status")
    assert SEED.names()["status"] == "status" and "status" not in DEFAULT.names()
    assert layout_of({"pk": {"S": "x"}}) is None
    assert layout_of({"owner": {"S": "t:1"}, "expiresAt": {"N": "1"}}) is SEED


def test_a_record_of_the_other_layout_is_refused_by_name_not_overwritten(
    seeded: tuple[Any, str, OffsetClock],
) -> None:
    client, table, clock = seeded
    old = Idempotency(IdempotencyConfig(table_name=table), client=client, clock=clock.now)
    old.run("k", lambda: "default", payload={"n": 1})
    before = client.get_item(TableName=table, Key={"pk": {"S": "IDEMPOTENCY#k"}})["Item"]
    with pytest.raises(ConfigurationError, match=r"'default' layout, not .*'seed-001'"):
        seed_guard(client, table, clock).run("k", lambda: "again", payload={"n": 1})
    assert client.get_item(TableName=table, Key={"pk": {"S": "IDEMPOTENCY#k"}})["Item"] == before


def test_convert_item_round_trips_every_state(seeded: tuple[Any, str, OffsetClock]) -> None:
    client, table, clock = seeded
    guard = Idempotency(IdempotencyConfig(table_name=table), client=client, clock=clock.now)
    guard.run("done", lambda: {"x": 1}, payload={"n": 1})
    guard.claim("live", payload={"n": 2})
    for key, retryable in (("flaky", True), ("final", False)):
        claim = guard.claim(key)
        assert isinstance(claim, Claim)
        guard.fail(claim, ValueError(key), retryable=retryable)
    items = client.scan(TableName=table, ConsistentRead=True)["Items"]
    assert len(items) == 4
    for item in items:
        seed = convert_item(item, SEED)
        assert layout_of(seed) is SEED and not DEFAULT_ONLY & set(seed)
        as_default, as_seed = Record.from_item(item), Record.from_item(seed, SEED)
        assert as_seed == as_default
        assert seed["status"] == {"S": as_default.status.value}
        assert int(seed["claimedAt"]["N"]) == int(as_default.claimed_at or 0)
        assert seed["version"] == {"N": str(as_default.version)}  # what fenced writes expect
        assert convert_item(seed, DEFAULT) == item
    with pytest.raises(ValueError, match="known layout"):
        convert_item({"pk": {"S": "x"}}, SEED)


def test_the_ttl_audit_tombstones_a_seed_record_and_a_late_retry_is_refused(
    backend: Backend,
) -> None:
    table = seed_table(backend.client)
    config = IdempotencyConfig(
        table_name=table,
        layout=SEED,
        retention=60,
        client_retry_ceiling=60,
        refuse_late_retries=True,
    )
    guard = Idempotency(config, client=backend.client, clock=backend.now)
    guard.run("a", lambda: "charged", payload={"n": 1})
    first = stored(backend.client, table, "IDEMPOTENCY#a")
    backend.client.delete_item(TableName=table, Key={"pk": first["pk"]})  # TTL's delete
    audit = TtlAudit(config=config, client=backend.client, window=600)
    audit.process([stream_record("REMOVE", first, backend.now() + 61, ttl=True)])
    assert audit.tombstones == 1
    tombstone = stored(backend.client, table, "IDEMPOTENCY#a")
    assert set(tombstone) == {
        "pk",
        "owner",
        "expiresAt",
        "removedAt",
        "removedStatus",
        "fingerprint",
    }
    assert tombstone["removedStatus"] == {"S": "COMPLETED"}
    backend.advance(120)
    with pytest.raises(LateRetryError):
        guard.run("a", lambda: pytest.fail("a late retry ran"), payload={"n": 1})
