"""Scenario 2: the TTL race. A completed record expires, the sweeper lags, late duplicates
arrive before and after the sweep, and the TTL audit reads the stream."""

from __future__ import annotations

import collections
from typing import Any

from firstwrite.engine.ttl import TTLConfig
from firstwrite.idempotency import (
    ConfigurationError,
    IdempotencyConfig,
    Metrics,
    TtlAudit,
)

from .stage import Stage

TABLE = "orders-idempotency"
KEY_A = "order-A"
KEY_B = "order-B"
RETENTION = 600.0
CEILING = 600.0
TTL_LAG = 3600.0  # DynamoDB deletes within about 48 h; an hour is enough to show the window
AUDIT_WINDOW = RETENTION + 48 * 3600.0


def make_stage(slug: str, shared: Metrics | None) -> Stage:
    # No background sweeper: the scenario runs each sweep itself, on the engine's clock.
    return Stage(slug, shared, ttl=TTLConfig(sweep_interval=None, lag=TTL_LAG))


def run(stage: Stage) -> str:
    ran: collections.Counter[str] = collections.Counter()

    def ship(key: str) -> Any:
        def side_effect() -> dict[str, Any]:
            ran[key] += 1
            stage.note(f"side effect: {key} shipped (run {ran[key]})")
            return {"shipment": f"{key}-{ran[key]}"}

        return side_effect

    with stage.step(
        "The configuration guards the window",
        "A record must outlive every client retry: retention shorter than the clients' retry "
        "ceiling is refused before any request runs.",
    ):
        try:
            IdempotencyConfig(table_name=TABLE, retention=300, client_retry_ceiling=CEILING)
            refused = False
        except ConfigurationError as exc:
            refused = True
            stage.note(f"ConfigurationError: {exc}")

    config = IdempotencyConfig(
        table_name=TABLE, retention=RETENTION, client_retry_ceiling=CEILING, lease=30
    )
    client = stage.client()
    guard = stage.guard(config, client=client)
    with stage.step(
        "Two requests complete",
        f"Orders A and B are shipped at t0. Each record expires at t0 + {RETENTION:g} s "
        "(retention), and the table streams every change for the TTL audit.",
    ):
        stage.note(
            "stage: TTL on expires_at; stream NEW_AND_OLD_IMAGES; the sweeper deletes an item "
            f"{TTL_LAG:g} s after it expires",
            kind="stage",
            code=f"Engine(ttl_config=TTLConfig(sweep_interval=None, lag={TTL_LAG:g}))",
        )
        guard.ensure_table()
        client.update_table(
            TableName=TABLE,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        stage.watch_record(f"the record of {KEY_A}", config, KEY_A)
        stage.watch_record(f"the record of {KEY_B}", config, KEY_B)
        with stage.actor("client A"):
            guard.run(KEY_A, ship(KEY_A), payload={"order": "A"})
        with stage.actor("client B"):
            guard.run(KEY_B, ship(KEY_B), payload={"order": "B"})

    with stage.step(
        "A duplicate within retention",
        "Five minutes later client A retries: the record is there and alive, the stored "
        "result is replayed.",
    ):
        stage.advance(300, "a retry 5 minutes later")
        with stage.actor("client A"):
            guard.run(KEY_A, ship(KEY_A), payload={"order": "A"})
    within = ran[KEY_A] == 1

    with stage.step(
        "Retention ends, the sweeper lags",
        "Past expires_at, DynamoDB's TTL deletes the item some time later (typically within "
        "48 hours), not at once. A sweep now deletes nothing: the records are expired but "
        "still in the table.",
    ):
        stage.advance(RETENTION - 300 + 1, "retention is over")
        deleted = stage.engine.ttl.sweep_now()
        stage.note(
            f"TTL sweep: {len(deleted)} item(s) deleted (the sweeper lags {TTL_LAG:g} s)",
            kind="stage",
            code="engine.ttl.sweep_now()",
        )
    lagging = not deleted

    with (
        stage.step(
            "A late duplicate while the record is still there",
            "Client A retries once more, past retention. The claim condition has "
            "#exp < :now: an expired record counts as absent, exactly as if TTL had deleted it. "
            "The layer never lets the sweeper's timing decide the answer, so this is a new request "
            "and the side effect runs again. That is why retention must cover every client retry.",
        ),
        stage.actor("client A"),
    ):
        guard.run(KEY_A, ship(KEY_A), payload={"order": "A"})
    reclaimed = stage.metrics.total("firstwrite_claims_total", outcome="reclaimed_expired")

    with stage.step(
        "The sweeper catches up",
        "An hour later the sweep deletes B's record. The stream records a REMOVE made by the "
        "TTL service (userIdentity dynamodb.amazonaws.com), with the old image.",
    ):
        stage.advance(TTL_LAG, "the sweeper's lag passes")
        deleted = stage.engine.ttl.sweep_now()
        stage.note(
            f"TTL sweep: {len(deleted)} item(s) deleted",
            kind="stage",
            code="engine.ttl.sweep_now()",
        )

    with (
        stage.step(
            "A late duplicate after the sweep",
            "Client B retries now. The record is gone, so the claim is a first claim: the side "
            "effect runs again, and nothing in the table can tell.",
        ),
        stage.actor("client B"),
    ):
        guard.run(KEY_B, ship(KEY_B), payload={"order": "B"})

    with stage.step(
        "The TTL audit reads the stream",
        "TtlAudit notes every REMOVE made by TTL and reports a key claimed again within its "
        f"window of the first claim (here retention + 48 h = {AUDIT_WINDOW:g} s). It costs no "
        "call on the request path.",
    ):
        audit = TtlAudit(window=AUDIT_WINDOW, metrics=stage.sink)
        arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        with stage.actor("TTL audit"):
            audit.poll(stage.client(service="dynamodbstreams"), arn)
        stage.note(f"the audit detected {audit.detected} re-claim(s) after a TTL delete")

    stage.check("a retention shorter than the retry ceiling was refused", refused)
    stage.check("within retention the duplicate was replayed (A ran once)", within)
    stage.check("the sweeper lagged: the expired records were still in the table", lagging)
    stage.check(
        "past retention, the record still present was treated as absent (reclaimed_expired)",
        reclaimed == 1 and ran[KEY_A] == 2,
    )
    stage.check("after the sweep, B's late duplicate was a first claim", ran[KEY_B] == 2)
    stage.check(
        "the TTL audit reported B's re-claim (dynamo_ttl_delete_before_retry_total = 1)",
        audit.detected == 1 and stage.metrics.total("dynamo_ttl_delete_before_retry_total") == 1,
    )
    return (
        "The layer's answer depends on expires_at alone, never on when TTL deletes: within "
        "retention a duplicate is replayed, past it a duplicate is new whether or not the record "
        "was swept, and the TTL audit reported the re-claim after the sweep."
    )


STORY = (
    "Two orders complete. A duplicate within retention is replayed. Past retention, with the "
    "TTL sweeper lagging, a late duplicate finds the expired record still there; after the "
    "sweep another finds nothing. The TTL audit reads the table's stream and reports the "
    "re-claim of a key TTL had deleted."
)
STAGE = (
    "a scratch engine with its clock frozen at t0, no background sweeper",
    f"TTL lag {TTL_LAG:g} s: the sweeper deletes an item that long after it expires",
    f"retention {RETENTION:g} s, client retry ceiling {CEILING:g} s",
    "a stream (NEW_AND_OLD_IMAGES) on the table, read by firstwrite.idempotency.TtlAudit",
)
