"""Scenario 2: the TTL race.

A completed record expires, the sweeper lags, late duplicates arrive before and after the
sweep; the layer refuses both, the second thanks to the tombstone the TTL audit wrote from the
stream."""

from __future__ import annotations

import collections
from typing import Any

from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.idempotency import (
    ConfigurationError,
    IdempotencyConfig,
    LateRetryError,
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


def make_stage(slug: str, shared: Metrics | None) -> Stage:
    # No background sweeper: the scenario runs each sweep itself, on the engine's clock.
    return Stage(slug, shared, ttl=TTLConfig(sweep_interval=None, lag=TTL_LAG))


def run(stage: Stage) -> str:
    ran: collections.Counter[str] = collections.Counter()
    refused: dict[str, LateRetryError] = {}

    def ship(key: str, payload: dict[str, Any]) -> None:
        def side_effect() -> dict[str, Any]:
            ran[key] += 1
            stage.note(f"side effect: {key} shipped (run {ran[key]})")
            return {"shipment": f"{key}-{ran[key]}"}

        try:
            guard.run(key, side_effect, payload=payload)
        except LateRetryError as exc:
            refused[key] = exc
            stage.note(f"LateRetryError: {exc}")

    with stage.step(
        "The configuration guards the window",
        "A record must outlive every client retry: retention shorter than the clients' retry "
        "ceiling is refused before any request runs.",
    ) as too_short:
        try:
            IdempotencyConfig(table_name=TABLE, retention=300, client_retry_ceiling=CEILING)
            short_refused = False
        except ConfigurationError as exc:
            short_refused = True
            stage.note(f"ConfigurationError: {exc}")

    config = IdempotencyConfig(
        table_name=TABLE,
        retention=RETENTION,
        client_retry_ceiling=CEILING,
        lease=30,
        refuse_late_retries=True,
    )
    client = stage.client()
    guard = stage.guard(config, client=client)
    audit = TtlAudit(config=config, client=client, metrics=stage.sink)
    with stage.step(
        "Two requests complete",
        f"Orders A and B are shipped at t0. Each record expires at t0 + {RETENTION:g} s "
        "(retention; up to a second later: ends are written from the latest DynamoDB time "
        "the answers' Date allows), and the table streams every change to the TTL audit. The guard refuses "
        "late retries (refuse_late_retries=True) instead of running them again.",
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
            ship(KEY_A, {"order": "A"})
        with stage.actor("client B"):
            ship(KEY_B, {"order": "B"})

    with stage.step(
        "A duplicate within retention",
        "Five minutes later client A retries: the record is there and alive, the stored "
        "result is replayed.",
    ) as within_step:
        stage.advance(300, "a retry 5 minutes later")
        with stage.actor("client A"):
            ship(KEY_A, {"order": "A"})
    within = ran[KEY_A] == 1 and KEY_A not in refused

    with stage.step(
        "Retention ends, the sweeper lags",
        "Past expires_at, DynamoDB's TTL deletes the item some time later (typically within "
        "48 hours), not at once. A sweep now deletes nothing: the records are expired but "
        "still in the table.",
    ) as lag_step:
        stage.advance(RETENTION - 300 + 2, "retention is over")
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
            "Client A retries once more, past retention. The claim condition has #exp < :now, so "
            "an expired record is no answer any more; whether TTL has deleted it does not matter. "
            "The same request past retention is a late retry: the layer counts it and, as "
            "configured, refuses it rather than ship order A again.",
        ) as late_a,
        stage.actor("client A"),
    ):
        ship(KEY_A, {"order": "A"})

    with stage.step(
        "The sweeper catches up",
        "An hour later the sweep deletes both records. The stream records a REMOVE for each, "
        "made by the TTL service (userIdentity dynamodb.amazonaws.com), with the old image. "
        "Nothing in the table remembers order B now.",
    ):
        stage.advance(TTL_LAG, "the sweeper's lag passes")
        deleted = stage.engine.ttl.sweep_now()
        stage.note(
            f"TTL sweep: {len(deleted)} item(s) deleted",
            kind="stage",
            code="engine.ttl.sweep_now()",
        )
    swept = len(deleted)

    with stage.step(
        "The TTL audit reads the stream",
        "TtlAudit turns each REMOVE made by TTL of a finished record into a tombstone under the "
        "same key (owner, fingerprint, status), kept for its window (7 days). It costs the "
        "request path nothing: a claim's condition fails on it, and the failure brings it back.",
    ) as audited:
        arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        with stage.actor("TTL audit"):
            audit.poll(stage.client(service="dynamodbstreams"), arn)
        stage.note(f"the audit wrote {audit.tombstones} tombstone(s)")

    with (
        stage.step(
            "A late duplicate after the sweep",
            "Client B retries now. Without the audit the record would simply be gone and the retry "
            "would look new. The claim fails on the tombstone instead: a late retry of a record TTL "
            "removed, counted as dynamo_ttl_delete_before_retry_total and refused.",
        ) as late_b,
        stage.actor("client B"),
    ):
        ship(KEY_B, {"order": "B"})

    with (
        stage.step(
            "A new request with the same key",
            "After retention a key is free for a different request: the tombstone only stops the "
            "same request (the same fingerprint) from running twice.",
        ) as reused,
        stage.actor("client C"),
    ):
        ship(KEY_B, {"order": "B", "note": "a new order that reuses the key"})

    late = "firstwrite_late_retries_total"
    stage.check(
        "a retention shorter than the retry ceiling was refused", short_refused, shown_by=too_short
    )
    stage.check(
        "within retention the duplicate was replayed (A shipped once)",
        within,
        shown_by=within_step,
    )
    stage.check(
        "the sweeper lagged: the expired records were still in the table",
        lagging,
        shown_by=lag_step,
    )
    stage.check(
        "past retention, with the record still there, the late retry was refused (LateRetryError)",
        KEY_A in refused and not refused[KEY_A].removed and ran[KEY_A] == 1,
        shown_by=late_a,
    )
    stage.check(
        "the sweep removed both records and the audit wrote a tombstone for each",
        swept == 2 and audit.tombstones == 2,
        shown_by=audited,
    )
    stage.check(
        "after the sweep, B's late retry was refused from the tombstone (B shipped once)",
        KEY_B in refused and refused[KEY_B].removed,
        shown_by=late_b,
    )
    stage.check("a different request reusing key B was accepted", ran[KEY_B] == 2, shown_by=reused)
    stage.check(
        f'{late}{{record="expired"}} and {{record="removed"}} counted one each; '
        "dynamo_ttl_delete_before_retry_total counted the removed one",
        stage.metrics.total(late, record="expired") == 1
        and stage.metrics.total(late, record="removed") == 1
        and stage.metrics.total("dynamo_ttl_delete_before_retry_total") == 1,
    )
    return (
        "The layer never let the sweeper decide: a late retry was refused while its expired "
        "record was still there and again after TTL removed it, from the tombstone the TTL audit "
        "wrote from the stream; a new request reusing the key still went through."
    )


STORY = (
    "Two orders complete. A duplicate within retention is replayed. Past retention, with the "
    "TTL sweeper lagging, a late duplicate finds the expired record still there; after the "
    "sweep another finds nothing but the tombstone the TTL audit wrote from the table's stream. "
    "Both are refused; a new request with the same key is not."
)
STAGE = (
    "a scratch engine with its clock frozen at t0, no background sweeper",
    f"TTL lag {TTL_LAG:g} s: the sweeper deletes an item that long after it expires",
    f"retention {RETENTION:g} s, client retry ceiling {CEILING:g} s, refuse_late_retries on",
    "a stream (NEW_AND_OLD_IMAGES) on the table, read by firstwrite.idempotency.TtlAudit",
)
