"""Seed 001's Variant 2: the ``version`` attribute of the seed layout, and the public helper for
optimistic-version updates of business items (:mod:`firstwrite.idempotency.versioned`)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from firstwrite.idempotency import (
    Claim,
    Idempotency,
    IdempotencyConfig,
    LostClaimError,
    RecordLayout,
)
from firstwrite.idempotency.versioned import VersionOutcome, update_versioned

from .test_seed_layout import seed_table


@pytest.fixture(params=["inprocess", "http"])
def client(request: pytest.FixtureRequest, make_ddb: Callable[..., Any]) -> Any:
    return make_ddb(request.param)


def test_the_completion_is_conditioned_on_the_version(client: Any) -> None:
    table = seed_table(client)
    guard = Idempotency(
        IdempotencyConfig(table_name=table, layout=RecordLayout.seed_001()), client=client
    )
    claim = guard.claim("v-1")
    assert isinstance(claim, Claim)
    # Another writer moves the version on (the owner fence alone would still match).
    client.update_item(
        TableName=table,
        Key={"pk": {"S": "IDEMPOTENCY#v-1"}},
        UpdateExpression="SET version = :v",
        ExpressionAttributeValues={":v": {"N": "7"}},
    )
    with pytest.raises(LostClaimError):
        guard.complete(claim, {"late": True})
    item = client.get_item(TableName=table, Key={"pk": {"S": "IDEMPOTENCY#v-1"}})["Item"]
    assert "resultId" not in item and item["version"] == {"N": "7"}


def business_table(client: Any) -> str:
    name = f"accounts-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def test_the_three_outcomes(client: Any) -> None:
    table = business_table(client)
    key = {"id": {"S": "acct-1"}}
    created = update_versioned(client, table, key, {"balance": {"N": "10"}}, None)
    assert created.outcome is VersionOutcome.UPDATED and created.version == 1
    again = update_versioned(client, table, key, {"balance": {"N": "99"}}, None)
    assert again.outcome is VersionOutcome.CONFLICT and again.version == 1
    moved = update_versioned(client, table, key, {"balance": {"N": "20"}}, 1)
    assert moved.outcome is VersionOutcome.UPDATED and moved.version == 2
    assert moved.item is not None and moved.item["balance"] == {"N": "20"}
    stale = update_versioned(client, table, key, {"balance": {"N": "30"}}, 1)
    assert stale.outcome is VersionOutcome.CONFLICT and stale.version == 2
    assert stale.item is not None and stale.item["balance"] == {"N": "20"}  # the current item
    missing = update_versioned(client, table, {"id": {"S": "nope"}}, {"x": {"S": "y"}}, 1)
    assert missing.outcome is VersionOutcome.MISSING and missing.item is None
    assert client.get_item(TableName=table, Key={"id": {"S": "nope"}}).get("Item") is None
    with pytest.raises(ValueError):
        update_versioned(client, table, key, {"version": {"N": "5"}}, 2)


def test_racing_writers_of_one_version_move_it_on_once(client: Any) -> None:
    table = business_table(client)
    key = {"id": {"S": "acct-2"}}
    update_versioned(client, table, key, {"balance": {"N": "0"}}, None)
    barrier = threading.Barrier(8)
    outcomes: list[VersionOutcome] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        barrier.wait()
        done = update_versioned(client, table, key, {"balance": {"N": str(i)}}, 1)
        with lock:
            outcomes.append(done.outcome)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(o.value for o in outcomes) == ["conflict"] * 7 + ["updated"]
    item = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert item["version"] == {"N": "2"}


def test_a_live_claim_moved_into_the_seed_layout_still_completes(client: Any) -> None:
    """convert_item writes Variant 2's version, so the versioned fence holds after a move."""
    from firstwrite.idempotency.record import convert_item

    table = seed_table(client)
    old = Idempotency(IdempotencyConfig(table_name=table), client=client)
    claim = old.claim("moving")
    assert isinstance(claim, Claim)
    key = {"pk": {"S": "IDEMPOTENCY#moving"}}
    item = client.get_item(TableName=table, Key=key)["Item"]
    client.put_item(TableName=table, Item=convert_item(item, RecordLayout.seed_001()))
    new = Idempotency(
        IdempotencyConfig(table_name=table, layout=RecordLayout.seed_001()), client=client
    )
    new.complete(claim, {"moved": True})
    assert new.run("moving", lambda: pytest.fail("ran")) == {"moved": True}
    assert client.get_item(TableName=table, Key=key)["Item"]["version"] == {"N": "2"}
