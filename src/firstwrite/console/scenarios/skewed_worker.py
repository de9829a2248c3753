"""Scenario 10: a worker whose clock runs ahead, kept off a live claim by DynamoDB's clock.

The engine's clock is DynamoDB's; each worker's clock is the engine's, skewed
(``engine.clock.skewed``): the engine dates its answers from its own clock, as DynamoDB does,
and each guard reads DynamoDB's time from the ``Date`` of its answers (docs/guarantees.md,
"Clocks"). Without that estimate, a worker whose clock runs ahead of the owner's remaining
lease takes the live claim over.
"""

from __future__ import annotations

from firstwrite.idempotency import (
    Claim,
    ClockSkewError,
    ClockSkewPolicy,
    IdempotencyConfig,
    InProgressError,
    Status,
)

from .stage import Stage

TABLE = "orders-idempotency"
KEY, TWIN = "order-1001", "order-1002"
LEASE = 30.0
WORKED = 20.0  # seconds A works before the contenders come: 10 s of its lease left
AHEAD = 12.0  # B's clock: ahead by more than A's remaining lease, within max_offset
FAR = 40.0  # C's clock: past max_offset (half the lease: 15 s)
PAYLOAD = {"order": 1001, "amount": 1999}
OFFSET_GAUGE = "firstwrite_clock_offset_seconds"


def run(stage: Stage) -> str:
    config = IdempotencyConfig(table_name=TABLE, lease=LEASE)
    blind = IdempotencyConfig(
        table_name=TABLE, lease=LEASE, clock_skew=ClockSkewPolicy(enabled=False)
    )
    with stage.actor("worker A"):
        worker_a = stage.guard(config)
        worker_a.ensure_table()
    with stage.actor("worker B"):
        worker_b = stage.guard(config, skew=AHEAD)
    with stage.actor("worker B, estimate off"):
        unguarded_b = stage.guard(blind, skew=AHEAD)
    with stage.actor("worker C"):
        worker_c = stage.guard(config, skew=FAR)
    stage.watch_record(f"the record of {KEY}", config, KEY)
    stage.watch_record(f"the record of {TWIN} (the same story, estimate off)", config, TWIN)

    with (
        stage.step(
            "Worker A claims two orders",
            f"Two conditional PutItems. Both records are PENDING, owned by A, each with a "
            f"{LEASE:g} s lease on DynamoDB's clock (A's clock is right). {TWIN} tells the "
            "same story as the other, to show what happens without the estimate.",
        ),
        stage.actor("worker A"),
    ):
        claim_a = worker_a.claim(KEY, PAYLOAD)
        twin_a = worker_a.claim(TWIN, PAYLOAD)
        assert isinstance(claim_a, Claim) and isinstance(twin_a, Claim)
        stage.note(f"A charges the card for both and is still working: {LEASE - WORKED:g} s left")
    stage.advance(WORKED, "A works")

    with (
        stage.step(
            "Without the estimate: B's clock says the lease is over",
            f"B's clock runs {AHEAD:g} s ahead, more than the {LEASE - WORKED:g} s left of A's "
            f"lease. Comparing the lease with its own clock (ClockSkewPolicy(enabled=False)), B "
            f"sends a claim whose :now_ms is past A's lease end: the condition lets it take "
            f"{TWIN} over while A is alive and working. A duplicate charge.",
        ) as hazard,
        stage.actor("worker B, estimate off"),
    ):
        stolen = unguarded_b.claim(TWIN, PAYLOAD)
        taken_live = isinstance(stolen, Claim) and stolen.taken_over
        stage.note(
            f"B took the live claim over (taken_over={taken_live}) and charges the card again"
            if taken_live
            else "B did not get the claim"
        )

    with (
        stage.step(
            "With the estimate (the default): B reads DynamoDB's clock",
            "The same request from B, whose guard estimates its offset from the Date of every "
            "answer. Its first claim takes no live lease over; the stored record comes back "
            "with the answer, dated by DynamoDB: B's clock is about "
            f"{AHEAD:g} s ahead, so on DynamoDB's clock A's lease is alive. B is told to retry.",
        ) as corrected,
        stage.actor("worker B"),
    ):
        try:
            worker_b.claim(KEY, PAYLOAD, wait=0)
            b_answer = "claimed (wrong)"
        except InProgressError as exc:
            b_answer = "in progress"
            stage.note(
                f"InProgressError: A's lease has {exc.lease_remaining:.0f} s left on "
                "DynamoDB's clock (give or take the Date's second)"
            )
        b_estimate = worker_b.clock_estimate()
        if b_estimate is not None:
            stage.note(_estimated("B", b_estimate.offset, b_estimate.uncertainty))

    with stage.step(
        "Worker A stalls past its lease",
        "A long pause: its lease runs out on DynamoDB's clock (A wrote its end from the latest "
        "DynamoDB time it could be, up to a second late). Whoever takes the key over now must "
        "judge that on DynamoDB's clock too.",
    ):
        stage.advance(LEASE - WORKED + 2, "A stalls")

    with (
        stage.step(
            "A worker whose clock is too far off is refused",
            f"C's clock runs {FAR:g} s ahead: more than max_offset (half the lease, "
            f"{LEASE / 2:g} s) from DynamoDB's. Its answer shows the lease over, but an estimate "
            "that far off is not trusted for a takeover: ClockSkewError, retryable (503 with "
            "Retry-After in HTTP), counted, and the offset gauge shows how far off C is.",
        ) as refusal,
        stage.actor("worker C"),
    ):
        refused: ClockSkewError | None = None
        try:
            worker_c.claim(KEY, PAYLOAD, wait=0)
            stage.note("C took the key over (it should have been refused)")
        except ClockSkewError as exc:
            refused = exc
            stage.note(f"ClockSkewError: {exc}")
        gauge = stage.metrics.gauges.get(OFFSET_GAUGE)
        if gauge is not None:
            stage.note(f"{OFFSET_GAUGE} = {gauge:+.1f}")

    with (
        stage.step(
            "B takes the key over, on DynamoDB's clock",
            f"B's clock is {AHEAD:g} s off, within max_offset: trusted. Its clock moved since "
            "its last answer (to B, a step), so its first claim takes nothing live over; that "
            "answer's Date renews the estimate, the lease is over on DynamoDB's clock, and B's "
            "second claim is a takeover. B completes the order.",
        ) as takeover,
        stage.actor("worker B"),
    ):
        claim_b: Claim | None = None
        try:
            taken = worker_b.claim(KEY, PAYLOAD, wait=0)
        except InProgressError:
            stage.note("B was told 'in progress' (someone else holds the key)")
        else:
            claim_b = taken if isinstance(taken, Claim) else None
        if claim_b is not None:
            stage.note(f"B holds the claim (taken_over={claim_b.taken_over})")
            worker_b.complete(claim_b, {"charge": "ch_B", "amount": 1999})

    final = stage.record(config, KEY)
    stage.check(
        f"without the estimate, B ({AHEAD:+g} s) took a live claim over: the hazard",
        taken_live,
        shown_by=hazard,
    )
    stage.check(
        f"with the estimate, B ({AHEAD:+g} s) was told 'in progress' while A's lease was alive",
        b_answer == "in progress",
        shown_by=corrected,
    )
    stage.check(
        f"B's estimate put its clock {AHEAD:g} s ahead of DynamoDB's (within a second)",
        b_estimate is not None and abs(b_estimate.offset + AHEAD) <= 1.0,
        shown_by=corrected,
    )
    stage.check(
        f"C ({FAR:+g} s, past max_offset) was refused with a retryable ClockSkewError",
        refused is not None and refused.retryable and refused.bound == LEASE / 2,
        shown_by=refusal,
    )
    stage.check(
        f"{OFFSET_GAUGE} showed C's offset (about {-FAR:g} s)",
        gauge is not None and abs(gauge + FAR) <= 1.0,
        shown_by=refusal,
    )
    stage.check(
        'firstwrite_claims_total{outcome="clock_skew_refused"} counted the refusal',
        stage.metrics.total("firstwrite_claims_total", outcome="clock_skew_refused") == 1,
        shown_by=refusal,
    )
    stage.check(
        "once the lease was over on DynamoDB's clock, B took the key over and completed it",
        claim_b is not None
        and claim_b.taken_over
        and final is not None
        and final.status is Status.COMPLETED
        and final.owner == claim_b.owner,
        shown_by=takeover,
    )
    return (
        "Leases were judged on DynamoDB's clock: the worker running ahead was kept off the live "
        "claim, the one too far off was refused, and only the estimate-less worker charged twice."
    )


def _estimated(who: str, offset: float, uncertainty: float) -> str:
    return (
        f"{who}'s estimate: DynamoDB's clock is {offset:+.1f} s from its own "
        f"(± {uncertainty:.1f} s, from the answers' Date)"
    )


STORY = (
    "A worker claims a key and is working. A second worker whose clock runs ahead, by more than "
    "the lease has left, retries the request: on its own clock the lease looks over. Without "
    "the estimate it takes the live claim over (a double charge); with it, it reads DynamoDB's "
    "clock from each answer's Date and is told to retry. A worker too far off is refused."
)
STAGE = (
    "a scratch engine with its clock frozen at t0: DynamoDB's clock",
    f"one idempotency table, lease {LEASE:g} s (max_offset: half of it)",
    f"worker A on the engine's clock; worker B on engine.clock.skewed({AHEAD:g}); worker C on "
    f"engine.clock.skewed({FAR:g}); B once more with ClockSkewPolicy(enabled=False)",
    f"the engine clock advanced {WORKED:g} s while A works, then past A's lease",
)
