"""Scenario 6: replay. The same request twice: the same answer, one side effect."""

from __future__ import annotations

import itertools

from firstwrite.idempotency import IdempotencyConfig, PayloadMismatchError

from .stage import Exchange, Stage

TABLE = "payments-idempotency"
KEY = "payment-7f3a"
PAYLOAD = {"card": "4242-4242", "amount": 1999, "currency": "EUR"}


def run(stage: Stage) -> str:
    config = IdempotencyConfig(table_name=TABLE)
    guard = stage.guard(config)
    guard.ensure_table()
    stage.watch_record(f"the record of {KEY}", config, KEY)
    ids = itertools.count(1)
    charges: list[dict[str, object]] = []

    def charge_card() -> dict[str, object]:
        """The side effect: counted, so the page can show how often it really ran."""
        receipt = {
            "charge_id": f"ch_{next(ids):04d}",
            "amount": PAYLOAD["amount"],
            "status": "paid",
        }
        charges.append(receipt)
        stage.note(f"side effect: the card is charged ({receipt['charge_id']})")
        return receipt

    answers = []
    calls = []
    steps = []
    for attempt, (title, narrative) in enumerate(
        [
            (
                "The first request",
                "A conditional PutItem claims the key (PENDING), the card is charged, a fenced "
                "UpdateItem stores the receipt (COMPLETED): two writes.",
            ),
            (
                "The same request again",
                "A client retried: the same key, the same payload. The claim's condition fails and "
                "DynamoDB returns the stored record with the failure (ALL_OLD), so one write answers "
                "it: the stored receipt, and the card is not charged again.",
            ),
        ],
        start=1,
    ):
        with stage.step(title, narrative) as step:
            with stage.actor(f"request {attempt}"):
                answer = guard.run(KEY, charge_card, payload=PAYLOAD)
                stage.note(f"answer: {answer}")
            answers.append(answer)
            steps.append(step)
            calls.append([e for e in step.events if isinstance(e, Exchange)])

    with (
        stage.step(
            "The same key with a different request",
            "A client bug reuses the key for another amount. The fingerprint differs, so the layer "
            "refuses it (HTTP 422 in the middleware) instead of replaying an unrelated receipt.",
        ) as reused,
        stage.actor("request 3"),
    ):
        try:
            guard.run(KEY, charge_card, payload={**PAYLOAD, "amount": 5000})
            mismatch = False
        except PayloadMismatchError as exc:
            mismatch = True
            stage.note(f"PayloadMismatchError: {exc}")

    first, again = steps
    stage.check(
        "the duplicate got the same answer as the first request",
        answers[0] == answers[1],
        shown_by=again,
    )
    stage.check("the card was charged exactly once", len(charges) == 1, shown_by=again)
    stage.check(
        "the first request took two writes (claim, complete)",
        [e.operation for e in calls[0]] == ["PutItem", "UpdateItem"],
        shown_by=first,
    )
    stage.check(
        "the duplicate took one write, answered from the ALL_OLD record",
        [(e.operation, e.code) for e in calls[1]]
        == [("PutItem", "ConditionalCheckFailedException")],
        shown_by=again,
    )
    stage.check("the same key with another payload was refused", mismatch, shown_by=reused)
    return (
        "Replay held: the same request twice gave the same receipt, and the card was charged once."
    )


STORY = (
    "A payment request is sent twice, as a client retry would. The first one charges the card; "
    "the second gets the stored receipt from one conditional write. Then the key is reused with "
    "a different amount and refused."
)
STAGE = (
    "a scratch engine with its clock frozen at t0",
    "one idempotency table",
    "a guard and a side effect that counts how often it runs",
)
