"""Scenario 1: lease expiry and takeover, and the fence that refuses the stale worker."""

from __future__ import annotations

from firstwrite.idempotency import (
    Claim,
    IdempotencyConfig,
    InProgressError,
    LostClaimError,
    Status,
)

from .stage import Stage

TABLE = "orders-idempotency"
KEY = "order-1001"
LEASE = 30.0
PAYLOAD = {"order": 1001, "amount": 1999}


def run(stage: Stage) -> str:
    config = IdempotencyConfig(table_name=TABLE, lease=LEASE)
    with stage.actor("worker A"):
        worker_a = stage.guard(config)
        worker_a.ensure_table()
    with stage.actor("worker B"):
        worker_b = stage.guard(config)
    stage.watch_record(f"the record of {KEY}", config, KEY)

    with (
        stage.step(
            "Worker A claims the key",
            f"One conditional PutItem. The record is PENDING, owned by A, with a {LEASE:g} s lease.",
        ),
        stage.actor("worker A"),
    ):
        claim_a = worker_a.claim(KEY, PAYLOAD)
        assert isinstance(claim_a, Claim)
        stage.note(f"A holds the claim, fencing token …{claim_a.owner[-8:]}:{claim_a.version}")

    with (
        stage.step(
            "A duplicate arrives while A works",
            "Worker B gets the same request. The claim's condition fails and the stored record comes "
            "back with the answer: the lease is alive, so B is told to retry later.",
        ) as duplicate,
        stage.actor("worker B"),
    ):
        try:
            worker_b.claim(KEY, PAYLOAD)
            early = "claimed (wrong)"
        except InProgressError as exc:
            early = "in progress"
            stage.note(f"InProgressError: retry after {exc.retry_after:.0f} s")

    with stage.step(
        "Worker A stalls past its lease",
        "A long garbage-collection pause, a lost network, a frozen VM: A is alive but silent. "
        "Nothing is written; the lease simply runs out on the engine's clock (DynamoDB's: A "
        "wrote its end from the latest DynamoDB time it could be, up to a second late).",
    ):
        stage.advance(LEASE + 2, "A stalls")

    with (
        stage.step(
            "Worker B takes over",
            "The same request again. The lease is over, so the claim condition "
            "(#lease < :now_ms with the same fingerprint) lets B claim the key: a takeover. "
            "B's claim says so (taken_over), because A may have done part of the work.",
        ) as takeover,
        stage.actor("worker B"),
    ):
        claim_b = worker_b.claim(KEY, PAYLOAD)
        assert isinstance(claim_b, Claim)
        stage.note(
            f"B holds the claim (taken_over={claim_b.taken_over}), "
            f"fencing token …{claim_b.owner[-8:]}:{claim_b.version}"
        )
        worker_b.complete(claim_b, {"charge": "ch_B", "amount": 1999})
        stage.note("B ran the side effect and completed the record")

    with (
        stage.step(
            "Worker A wakes up and tries to complete",
            "A finishes its work and sends its completion, fenced by its owner token and version. "
            "The fence (#own = :own AND attribute_exists(#lease)) fails: B owns the record now.",
        ) as late,
        stage.actor("worker A"),
    ):
        try:
            worker_a.complete(claim_a, {"charge": "ch_A", "amount": 1999})
            refused: LostClaimError | None = None
            stage.note("A's completion was written (the fence did not hold!)")
        except LostClaimError as exc:
            refused = exc
            stage.note(f"LostClaimError: {exc}")

    final = stage.record(config, KEY)
    stage.check(
        "the duplicate during A's lease was answered 'in progress'",
        early == "in progress",
        shown_by=duplicate,
    )
    stage.check("B's claim after the lease is a takeover", claim_b.taken_over, shown_by=takeover)
    stage.check(
        "A's stale completion was refused with LostClaimError", refused is not None, shown_by=late
    )
    stage.check(
        "the record holds B's completion, untouched by A",
        final is not None
        and final.status is Status.COMPLETED
        and final.owner == claim_b.owner
        and "ch_B" in str(final.result),
        shown_by=late,
    )
    stage.check(
        "firstwrite_lost_claims_total{operation=complete} counted it",
        stage.metrics.total("firstwrite_lost_claims_total", operation="complete") == 1,
        shown_by=late,
    )
    return (
        "The fence held: the stale worker's completion was refused and the record keeps the "
        "new owner's result."
    )


STORY = (
    "A worker claims a key and stalls. Its lease runs out, a second worker takes the key over "
    "and completes it. When the first worker comes back, its completion is refused by the fence."
)
STAGE = (
    "a scratch engine with its clock frozen at t0",
    f"one idempotency table, lease {LEASE:g} s",
    "two workers with their own boto3 clients, each an Idempotency guard",
    f"the engine clock advanced {LEASE + 2:g} s to stall worker A",
)
