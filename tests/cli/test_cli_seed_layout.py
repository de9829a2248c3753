"""``firstwrite keys`` and ``firstwrite table`` on seed 001's record layout: a table built by hand
from the seed's model, records written by the layer in that layout beside one in the default
layout, each recognised from its own attributes (or as ``--layout`` names it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine import Engine, local_client
from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig, RecordLayout

TABLE = "firstwrite-idempotency"


def seed_model_table(client: Any, *, ttl: bool = True) -> None:
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    if ttl:
        client.update_time_to_live(
            TableName=TABLE,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"},
        )


def write_records(engine: Engine) -> None:
    client = local_client(engine)
    seed = Idempotency(IdempotencyConfig(layout=RecordLayout.seed_001()), client=client)
    seed.run("paid", lambda: {"charge": "ch_1"}, payload={"n": 1})
    seed.claim("running", payload={"n": 2})
    for key, retryable in (("declined", False), ("flaky", True)):
        claim = seed.claim(key)
        assert isinstance(claim, Claim)
        seed.fail(claim, ValueError(f"{key} card"), retryable=retryable)
    Idempotency(IdempotencyConfig(), client=client).run("legacy", lambda: "default layout")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "seed.db"
    with Engine(path) as engine:
        seed_model_table(local_client(engine))
        write_records(engine)
    yield str(path)


def test_list_recognises_both_layouts(cli: Callable[..., Any], db: str) -> None:
    result = cli("keys", "list", "--db", db, "--json")
    assert result.code == 0, result.err
    records = {r["key"]: r for r in result.json()["records"]}
    assert {k: r["layout"] for k, r in records.items()} == {
        "paid": "seed-001",
        "running": "seed-001",
        "declined": "seed-001",
        "flaky": "seed-001",
        "legacy": "default",
    }
    assert records["paid"]["state"] == "COMPLETED"
    assert records["paid"]["result"]["summary"] == '{"charge": "ch_1"}'  # read from resultId
    assert records["running"]["state"] == "PENDING" and records["running"]["lease_remaining_s"] > 0
    assert records["declined"]["retryable"] is False and records["flaky"]["retryable"] is True
    assert records["declined"]["error"]["message"] == "declined card"
    assert records["legacy"]["result"]["summary"] == '"default layout"'
    assert all(r["record_id"] == f"IDEMPOTENCY#{k}" for k, r in records.items())
    # Named, the other layout's records are not records of that layout.
    named = cli("keys", "list", "--db", db, "--layout", "seed-001", "--json").json()["records"]
    assert {r["key"]: r["state"] for r in named}["IDEMPOTENCY#legacy"] is None


def test_get_and_delete_a_seed_record(cli: Callable[..., Any], db: str) -> None:
    paid = cli("keys", "get", "paid", "--db", db)
    assert paid.code == 0, paid.err
    assert "layout       seed-001" in paid.out
    [result] = [line for line in paid.out.splitlines() if line.startswith("result ")]
    assert '"charge": "ch_1"' in result  # read from resultId
    as_default = cli("keys", "get", "paid", "--db", db, "--layout", "default", "--json").json()
    assert as_default["state"] is None  # resultId/expiresAt are not the default layout's
    deleted = cli("keys", "delete", "declined", "--db", db, "--yes")
    assert deleted.code == 0, deleted.err
    assert "deleted IDEMPOTENCY#declined" in deleted.out
    assert cli("keys", "get", "declined", "--db", db).code == 4


def test_delete_refuses_a_seed_record_changed_since_it_was_read(
    cli: Callable[..., Any], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from firstwrite.cli import keys

    real = keys.unchanged

    def changed_meanwhile(item: dict[str, Any], layout: Any = None) -> dict[str, Any]:
        # The claim's worker completes it in between: same owner and version, the lease
        # removed, resultId added (only the seed layout's names tell this from before).
        with Engine(db) as engine:
            local_client(engine).update_item(
                TableName=TABLE,
                Key={"pk": {"S": "IDEMPOTENCY#running"}},
                UpdateExpression="SET resultId = :r, #st = :st REMOVE leaseExpiresAt",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":r": {"S": '"done"'}, ":st": {"S": "COMPLETED"}},
            )
        return real(item, layout)

    monkeypatch.setattr(keys, "unchanged", changed_meanwhile)
    result = cli("keys", "delete", "running", "--db", db, "--yes")
    assert result.code == 1 and "changed since it was read" in result.err


def test_table_describe_says_which_layout_it_sees(
    cli: Callable[..., Any], db: str, tmp_path: Path
) -> None:
    seen = cli("table", "describe", "--db", db, "--json").json()
    assert seen["layout"] == {"name": "seed-001", "from": "TTL attribute"}
    assert seen["problems"] == []
    text = cli("table", "describe", "--db", db).out
    assert "layout         seed-001 (from the TTL attribute)" in text
    assert "ok: the table suits the idempotency layer" in text
    wrong = cli("table", "describe", "--db", db, "--layout", "default", "--json").json()
    assert wrong["problems"] == [
        "TTL is on 'expiresAt', but the layer (default layout) writes expiry to 'expires_at'"
    ]

    bare = tmp_path / "no-ttl.db"  # TTL off: the layout is read from the records
    with Engine(bare) as engine:
        seed_model_table(local_client(engine), ttl=False)
        write_records(engine)
    from_items = cli("table", "describe", "--db", str(bare), "--json").json()
    assert from_items["layout"]["name"] in ("seed-001", "default")
    assert from_items["layout"]["from"] == "items"
    assert "TTL is not enabled" in " ".join(from_items["problems"])

    empty = tmp_path / "empty.db"
    with Engine(empty) as engine:
        seed_model_table(local_client(engine), ttl=False)
    unknown = cli("table", "describe", "--db", str(empty), "--json").json()
    assert unknown["layout"] == {"name": None, "from": "nothing: TTL is off and no record found"}


def test_table_create_for_each_layout(cli: Callable[..., Any], tmp_path: Path) -> None:
    db = str(tmp_path / "made.db")
    seed = cli("table", "create", "--db", db, "--table", "seeded", "--layout", "seed-001", "--json")
    assert seed.code == 0, seed.err
    info = seed.json()
    assert info["ttl"] == {"status": "ENABLED", "attribute": "expiresAt"}
    assert info["layout"] == {"name": "seed-001", "from": "named"} and info["problems"] == []
    plain = cli("table", "create", "--db", db, "--table", "plain", "--json").json()
    assert plain["ttl"]["attribute"] == "expires_at"
    assert cli("table", "describe", "--db", db, "--table", "plain", "--json").json()["layout"] == {
        "name": "default",
        "from": "TTL attribute",
    }
