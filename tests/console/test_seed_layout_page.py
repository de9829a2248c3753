"""The console's table view on seed 001's record layout: records of either layout, in one table,
decoded by the layer's record view and marked with the layout they were read in."""

from __future__ import annotations

import re

import httpx

from firstwrite.engine import local_client
from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig, RecordLayout

from .conftest import Server


def test_the_table_page_decodes_seed_and_default_records(
    http: httpx.Client, console_server: Server
) -> None:
    client = local_client(console_server.engine)
    client.create_table(  # seed 001's model, by hand
        TableName="seeded",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    seed = Idempotency(
        IdempotencyConfig(table_name="seeded", layout=RecordLayout.seed_001()), client=client
    )
    seed.run("paid", lambda: {"charge": "ch_seed"})
    claim = seed.claim("flaky")
    assert isinstance(claim, Claim)
    seed.fail(claim, ValueError("try later"), retryable=True)
    seed.claim("running")
    Idempotency(IdempotencyConfig(table_name="seeded"), client=client).run("old", lambda: 1)

    page = http.get("/tables/seeded").text
    rows = re.findall(r'data-state="([^"]+)" data-layout="([^"]+)"', page)
    assert sorted(rows) == [
        ("COMPLETED", "default"),
        ("COMPLETED", "seed-001"),
        ("FAILED (retryable)", "seed-001"),
        ("PENDING", "seed-001"),
    ]
    assert "ch_seed" in page  # the result, read from resultId
    assert "4 of the 4 items on this page are idempotency records" in page


def test_the_table_page_shows_hand_built_rows(http: httpx.Client, console_server: Server) -> None:
    import time

    client = local_client(console_server.engine)
    client.create_table(
        TableName="by-hand",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    now = int(time.time())
    for key, word in (("a", "succeeded"), ("b", "in_progress"), ("c", "FAILED")):
        client.put_item(
            TableName="by-hand",
            Item={
                "pk": {"S": f"IDEMPOTENCY#{key}"},
                "status": {"S": word},
                "claimedAt": {"N": str(now)},
                "expiresAt": {"N": str(now + 3600)},
                **({"resultId": {"S": "receipt-77"}} if key == "a" else {}),
            },
        )
    page = http.get("/tables/by-hand").text
    rows = re.findall(r'data-state="([^"]+)" data-layout="([^"]+)"', page)
    assert sorted(rows) == [
        ("COMPLETED (hand-built)", "seed-001"),
        ("FAILED (retryable, hand-built)", "seed-001"),
        ("PENDING (hand-built)", "seed-001"),
    ]
    assert "receipt-77" in page
    assert "3 of the 3 items on this page are idempotency records" in page
