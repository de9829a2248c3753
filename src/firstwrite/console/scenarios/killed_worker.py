"""Scenario 9: a worker killed after the charge, its takeover refused, then reconciled.

Worker A runs what ``guard.run`` runs for a claim (the claim, then the work: a recovery point
and the provider's charge) and is killed before the completion: its process writes nothing
more. Its lease runs out; a worker without a ``reconcile`` hook is refused, one with a hook asks
the provider by the mark's reference and completes the record with the charge it finds
(docs/recovery.md).
"""

from __future__ import annotations

from typing import Any

from firstwrite.http.problems import answer_for, retry_after_seconds
from firstwrite.idempotency import (
    Claim,
    IdempotencyConfig,
    Interrupted,
    NotDone,
    Reconciled,
    RecoveryPoint,
    RecoveryRequiredError,
    Replay,
    Status,
    recovery_point,
)

from .stage import Stage

TABLE = "payments-idempotency"
KEY = "order-2041"
AMOUNT = 4900
PAYLOAD = {"order": 2041, "amount": AMOUNT, "currency": "EUR"}
REFERENCE = f"pay-{KEY}"  # passed to the provider as its idempotency key
LEASE = 30.0
METRIC = "firstwrite_recovery_takeovers_total"


class PaymentProvider:
    """Stands in for a payment API that keeps each charge by the idempotency key it was sent
    (as Stripe keeps requests by ``Idempotency-Key``); counts the charge requests it gets."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.charges: dict[str, dict[str, Any]] = {}
        self.requests = 0

    def charge(self, reference: str, amount: int) -> dict[str, Any]:
        self.requests += 1
        if reference in self.charges:
            self.stage.note(f"payment provider: {reference} was charged before, answered again")
            return self.charges[reference]
        charge = {"charge": f"ch_{len(self.charges) + 1:04d}", "amount": amount, "paid": True}
        self.charges[reference] = charge
        self.stage.note(
            f"payment provider: card charged {amount}, {charge['charge']} ({reference})"
        )
        return charge

    def find(self, reference: str) -> dict[str, Any] | None:
        """The charge made with ``reference``, if any (a read: charges nothing)."""
        found = self.charges.get(reference)
        self.stage.note(f"payment provider: lookup {reference} → {found or 'no charge'}")
        return found


def run(stage: Stage) -> str:
    config = IdempotencyConfig(table_name=TABLE, lease=LEASE)
    provider = PaymentProvider(stage)
    ran: dict[str, int] = {}

    def pay(worker: str) -> Any:
        def work() -> dict[str, Any]:
            ran[worker] = ran.get(worker, 0) + 1
            recovery_point("charge", REFERENCE)  # before the call: "the charge may happen now"
            return provider.charge(REFERENCE, AMOUNT)

        return work

    def reconcile(interrupted: Interrupted) -> Reconciled | NotDone:
        stage.note(
            f"reconcile hook: {interrupted.key} was interrupted after "
            f"{', '.join(f'{p.step} ({p.reference})' for p in interrupted.points)}"
        )
        asked.append(interrupted)
        found = provider.find(interrupted.last.reference or "")
        return Reconciled(found) if found is not None else NotDone()

    asked: list[Interrupted] = []
    with stage.actor("worker A"):
        worker_a = stage.guard(config)
        worker_a.ensure_table()
    with stage.actor("worker B"):
        worker_b = stage.guard(config)  # no reconcile hook
    with stage.actor("worker C"):
        worker_c = stage.guard(config, reconcile=reconcile)
    stage.watch_record(f"the record of {KEY}", config, KEY)

    with (
        stage.step(
            "Worker A claims, marks, charges, and is killed",
            f"Worker A does what guard.run does for {KEY}, one call at a time: the claim "
            f"(PENDING, {LEASE:g} s lease), then the work. The work first marks a recovery point "
            f"(guard.mark(claim, 'charge', '{REFERENCE}'), the call recovery_point() makes inside "
            "guard.run): one fenced UpdateItem appending the mark to the claim. Then it calls the "
            "provider with the same reference as its idempotency key. The card is charged, and "
            "the process is killed (SIGKILL) before the completion is written.",
        ) as killed,
        stage.actor("worker A"),
    ):
        claim_a = worker_a.claim(KEY, PAYLOAD)
        assert isinstance(claim_a, Claim)
        worker_a.mark(claim_a, "charge", REFERENCE)  # recovery_point() in guard.run's work
        provider.charge(REFERENCE, AMOUNT)
        stage.note("SIGKILL: worker A is gone; it writes nothing more, the record stays PENDING")
    item = stage.read(TABLE, claim_a.key) or {}
    marks = [RecoveryPoint.from_value(v) for v in item.get("marks", {}).get("L", [])]
    stage.note(f"the record carries the mark: {[(p.step, p.reference) for p in marks]}")

    with stage.step(
        "The lease runs out",
        "Nobody renews or completes the claim: the lease simply ends on the engine's clock.",
    ):
        stage.advance(
            LEASE + 2, "A is dead"
        )  # past the lease on DynamoDB's clock, dated to the second

    with (
        stage.step(
            "Worker B retries, without a reconcile hook",
            "The client retries on worker B. The lease is over, but the claim's condition "
            "(#lease < :now_ms AND attribute_not_exists(#mk)) refuses a record carrying a "
            "recovery point, and the refusal returns the record with its mark. With no hook to "
            "ask, B writes nothing and does not rerun the charge blind: RecoveryRequiredError, "
            "retryable.",
        ) as refused_step,
        stage.actor("worker B"),
    ):
        refusal: RecoveryRequiredError | None = None
        try:
            worker_b.run(KEY, pay("B"), payload=PAYLOAD)
            stage.note("B ran the work again (the charge was rerun blind!)")
        except RecoveryRequiredError as exc:
            refusal = exc
            stage.note(f"RecoveryRequiredError: {exc}")
            answer = answer_for(exc)
            if answer is not None:
                stage.note(
                    f"over HTTP: {answer.problem.status} {answer.problem.type_uri}, "
                    f"Retry-After {retry_after_seconds(answer.retry_after or 0)} s"
                )
    requests_after_b = provider.requests
    after_b = stage.record(config, KEY)
    http = None if refusal is None else answer_for(refusal)

    with (
        stage.step(
            "Worker C retries, with a reconcile hook",
            "Worker C's guard has a reconcile hook. Its claim is refused the same way; it then "
            "takes the record over as it saw it (a PutItem fenced on A's owner and version, "
            "carrying the mark in the same write, so the key is never without it) and, instead "
            "of running the work, calls the hook with the marks: the hook asks the provider by "
            f"the mark's reference ({REFERENCE}), finds A's charge and answers "
            "Reconciled(charge). The record is completed with it; C's caller gets it as a replay.",
        ) as reconciled_step,
        stage.actor("worker C"),
    ):
        answer_c = worker_c.run(KEY, pay("C"), payload=PAYLOAD)
        stage.note(f"C answers its caller: {answer_c}")

    with (
        stage.step(
            "Another duplicate, anywhere",
            "A last retry reaches worker B again: the record is COMPLETED now, so even a guard "
            "without a hook simply replays it.",
        ) as replayed_step,
        stage.actor("worker B"),
    ):
        replay = worker_b.claim(KEY, PAYLOAD)
        if isinstance(replay, Replay):
            stage.note(f"a replay of the {replay.status.value} record: {replay.value()}")

    final = stage.record(config, KEY)
    charge = provider.charges.get(REFERENCE)
    stage.check(
        "A's charge went through and its recovery point (charge, the provider reference) is on "
        "the PENDING record it left",
        charge is not None and [(p.step, p.reference) for p in marks] == [("charge", REFERENCE)],
        shown_by=killed,
    )
    stage.check(
        "without a hook, B's retry was refused with RecoveryRequiredError (HTTP 503 "
        "recovery-required, retryable)",
        refusal is not None
        and http is not None
        and http.problem.status == 503
        and http.problem.type_uri.endswith(":recovery-required"),
        shown_by=refused_step,
    )
    stage.check(
        "B's refusal ran nothing: the provider got no second charge request",
        "B" not in ran and requests_after_b == 1,
        shown_by=refused_step,
    )
    stage.check(
        "B's refusal wrote nothing: the record is still A's, with its mark",
        after_b is not None and after_b.owner == claim_a.owner,
        shown_by=refused_step,
    )
    stage.check(
        f"{METRIC}{{outcome=refused}} counted B's refusal",
        stage.metrics.total(METRIC, outcome="refused") == 1,
        shown_by=refused_step,
    )
    stage.check(
        "C's reconcile hook was asked with A's mark and found the charge by its reference",
        len(asked) == 1 and asked[0].last.reference == REFERENCE and "C" not in ran,
        shown_by=reconciled_step,
    )
    stage.check(
        "the record is COMPLETED with the provider's charge, and C's caller got that charge",
        final is not None
        and final.status is Status.COMPLETED
        and charge is not None
        and charge["charge"] in str(final.result)
        and answer_c == charge,
        shown_by=reconciled_step,
    )
    stage.check(
        f"{METRIC}{{outcome=reconciled}} counted C's takeover",
        stage.metrics.total(METRIC, outcome="reconciled") == 1,
        shown_by=reconciled_step,
    )
    stage.check(
        "a later duplicate is a plain replay of the charge",
        isinstance(replay, Replay) and replay.completed and replay.value() == charge,
        shown_by=replayed_step,
    )
    stage.check(
        "the card was charged exactly once (one charge request, one charge)",
        provider.requests == 1 and len(provider.charges) == 1,
        shown_by=replayed_step,
    )
    return (
        "Charged once: the killed worker's recovery point kept its takeover from rerunning the "
        "charge; without a hook the retry was refused, with one the provider was asked by the "
        "reference and the record completed with the charge it had made."
    )


STORY = (
    "A worker marks a recovery point, charges the card through a payment provider and is killed "
    "before it records the completion. Once its lease is over, a retry without a reconcile hook "
    "is refused instead of charging again; a retry with one asks the provider by the mark's "
    "reference and completes the record with the charge it finds (docs/recovery.md)."
)
STAGE = (
    "a scratch engine with its clock frozen at t0",
    f"one idempotency table, lease {LEASE:g} s",
    "a payment provider keeping each charge by its idempotency reference, as Stripe does",
    "three workers, each a guard with its own boto3 client; only worker C has a reconcile hook",
    f"the engine clock advanced {LEASE + 2:g} s after worker A is killed",
)
