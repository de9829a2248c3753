"""Example idempotency records in every state, written by the layer itself.

They live in one dedicated table, :data:`EXAMPLES_TABLE`, and nowhere else: seeding never reads
or writes any other table. On a fresh database (the table does not exist yet) the console seeds
it when it is created; "Re-seed" on the overview page empties that table and seeds it again
(leases and retention run out on the engine's clock, so the examples age like real records).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig, Metrics

log = logging.getLogger("firstwrite.console")

EXAMPLES_TABLE = "firstwrite-console-examples"
_CONFIG = IdempotencyConfig(
    table_name=EXAMPLES_TABLE, lease=3600, retention=7 * 86400, client_retry_ceiling=86400
)
# For the record that expires soon: short retention (its clients retry for a minute at most).
_SHORT = _CONFIG.with_(retention=120, client_retry_ceiling=60, lease=30)


class CardDeclined(Exception):
    """The example's final failure (its type name is what the record stores)."""

    idempotency_retryable = False


@dataclass(frozen=True, slots=True)
class Example:
    key: str
    state: str
    how: str


EXAMPLES: tuple[Example, ...] = (
    Example("example-in-progress", "PENDING", "claimed, lease of one hour"),
    Example("example-abandoned", "PENDING", "claimed with a 20 s lease that runs out"),
    Example("example-completed", "COMPLETED", "claimed, then completed with a small result"),
    Example(
        "example-completed-compressed",
        "COMPLETED",
        "a result over 4 KB, stored zlib-compressed as binary",
    ),
    Example("example-failed-retryable", "FAILED (retryable)", "failed with a retryable error"),
    Example("example-failed-final", "FAILED (final)", "failed for good: replayed to duplicates"),
    Example("example-expiring", "COMPLETED", "retention of 2 minutes: watch it expire"),
)


def table_exists(client: Any) -> bool:
    try:
        client.describe_table(TableName=EXAMPLES_TABLE)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return False
        raise
    return True


def seed(client: Any, clock: Any, metrics: Metrics | None = None, *, fresh_only: bool) -> int:
    """Write the example records; returns how many. With ``fresh_only`` nothing happens when
    the examples table already exists (the database is not fresh)."""
    if fresh_only and table_exists(client):
        return 0
    guard = Idempotency(_CONFIG, client=client, clock=clock, metrics=metrics)
    guard.ensure_table()
    _stream_on(client)
    _empty(client)
    short = Idempotency(_SHORT, client=client, clock=clock, metrics=metrics)
    payload = {"amount": 1999, "currency": "EUR"}

    def claim(key: str, lease: float | None = None, g: Idempotency = guard) -> Claim:
        outcome = g.claim(key, {**payload, "key": key}, lease=lease)
        if not isinstance(outcome, Claim):  # emptied just above: only a concurrent re-seed
            raise RuntimeError(f"{key} is already claimed (is another re-seed running?)")
        return outcome

    claim("example-in-progress")
    claim("example-abandoned", lease=20)
    guard.complete(
        claim("example-completed"), {"charge_id": "ch_3MtwBw", "amount": 1999, "status": "paid"}
    )
    guard.complete(
        claim("example-completed-compressed"),
        {"statement": [{"line": i, "amount": 1999, "memo": "monthly plan"} for i in range(200)]},
    )
    guard.fail(
        claim("example-failed-retryable"),
        TimeoutError("the card network did not answer"),
        retryable=True,
    )
    guard.fail(claim("example-failed-final"), CardDeclined("insufficient funds"), retryable=False)
    short.complete(claim("example-expiring", g=short), {"charge_id": "ch_short", "amount": 500})
    log.info("seeded %d example records into %s", len(EXAMPLES), EXAMPLES_TABLE)
    return len(EXAMPLES)


def _stream_on(client: Any) -> None:
    """Streams on, so the table page shows stream settings as well as TTL."""
    table = client.describe_table(TableName=EXAMPLES_TABLE)["Table"]
    if not table.get("StreamSpecification", {}).get("StreamEnabled"):
        client.update_table(
            TableName=EXAMPLES_TABLE,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )


def _empty(client: Any) -> None:
    """Delete every item of the examples table (and only of it)."""
    paginator = client.get_paginator("scan")
    key_names = [
        k["AttributeName"]
        for k in client.describe_table(TableName=EXAMPLES_TABLE)["Table"]["KeySchema"]
    ]
    for page in paginator.paginate(TableName=EXAMPLES_TABLE):
        for item in page.get("Items", []):
            client.delete_item(TableName=EXAMPLES_TABLE, Key={k: item[k] for k in key_names})
