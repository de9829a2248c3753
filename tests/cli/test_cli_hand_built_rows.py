"""``firstwrite keys`` and ``firstwrite table describe`` on a table filled by hand with seed 001's
four-attribute rows (no ``owner``), in the lower-case vocabulary."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from firstwrite.engine import Engine, local_client

TABLE = "firstwrite-idempotency"


def seed_model_table(client: Any) -> None:
    """The table as seed 001's model has it: ``pk`` S, TTL on ``expiresAt``."""
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(
        TableName=TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}
    )


def hand_filled(path: Path) -> str:
    now = int(time.time())
    with Engine(path) as engine:
        client = local_client(engine)
        seed_model_table(client)
        rows = {
            "paid": ("succeeded", {"resultId": {"S": "res-1"}}),
            "running": ("in_progress", {}),
            "broken": ("failed", {}),
        }
        for key, (word, extra) in rows.items():
            client.put_item(
                TableName=TABLE,
                Item={
                    "pk": {"S": f"IDEMPOTENCY#{key}"},
                    "status": {"S": word},
                    "claimedAt": {"N": str(now - 10)},
                    "expiresAt": {"N": str(now + 3600)},
                    **extra,
                },
            )
    return str(path)


def test_keys_list_and_get_show_hand_built_rows(cli: Callable[..., Any], tmp_path: Path) -> None:
    db = hand_filled(tmp_path / "hand.db")
    listed = cli("keys", "list", "--db", db, "--json")
    assert listed.code == 0, listed.err
    records = {r["key"]: r for r in listed.json()["records"]}
    assert {k: (r["state"], r["layout"], r["hand_built"]) for k, r in records.items()} == {
        "paid": ("COMPLETED", "seed-001", True),
        "running": ("PENDING", "seed-001", True),
        "broken": ("FAILED", "seed-001", True),
    }
    assert records["broken"]["retryable"] is True and records["paid"]["owner"] is None
    assert records["paid"]["result"]["summary"] == '"res-1"'
    shown = cli("keys", "get", "running", "--db", db)
    assert shown.code == 0, shown.err
    assert "none (a hand-built row" in shown.out and "PENDING" in shown.out


def test_keys_delete_of_a_hand_built_row_holds_it_as_seen(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    db = hand_filled(tmp_path / "hand.db")
    deleted = cli("keys", "delete", "broken", "--db", db, "--yes", "--json")
    assert deleted.code == 0, deleted.err
    assert cli("keys", "get", "broken", "--db", db).code != 0


def test_table_describe_names_the_layout_and_vocabulary(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    db = hand_filled(tmp_path / "hand.db")
    described = cli("table", "describe", "--db", db, "--json")
    assert described.code == 0, described.err
    info = described.json()
    assert info["layout"]["name"] == "seed-001"
    assert info["vocabulary"] == {"words": ["lower"], "hand_built": 3}
    text = cli("table", "describe", "--db", db).out
    assert "vocabulary     in_progress/succeeded/failed (3 hand-built row(s)" in text
