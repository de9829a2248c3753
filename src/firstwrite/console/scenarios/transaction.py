"""Scenario 4: a transaction cancelled.

The claim and the business writes commit together or not at all; the cancellation reasons, item
by item, decide the layer's outcome."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from firstwrite.idempotency import (
    BusinessConditionFailedError,
    Claim,
    IdempotencyConfig,
    Replay,
)

from .stage import Exchange, Stage, Step

TABLE = "payments-idempotency"
ACCOUNTS = "accounts"
ACCOUNT = {"pk": {"S": "acct-1"}}
BALANCE = 100
REASONS_METRIC = "transact_write_cancellations_total"


def debit(amount: int) -> dict[str, Any]:
    """The business write: take ``amount`` from the account, only if the balance covers it."""
    return {
        "Update": {
            "TableName": ACCOUNTS,
            "Key": ACCOUNT,
            "UpdateExpression": "SET balance = balance - :amt",
            "ConditionExpression": "balance >= :amt",
            "ExpressionAttributeValues": {":amt": {"N": str(amount)}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def explain(step: Step, stage: Stage) -> list[str]:
    """Each cancellation reason of the step's last TransactWriteItems, with what it means."""
    cancelled = [
        e
        for e in step.events
        if isinstance(e, Exchange) and e.code == "TransactionCanceledException"
    ]
    if not cancelled:
        return []
    body = cancelled[-1].response if isinstance(cancelled[-1].response, Mapping) else {}
    reasons: Sequence[Mapping[str, Any]] = body.get("CancellationReasons") or []
    codes = []
    for index, reason in enumerate(reasons):
        code = str(reason.get("Code"))
        codes.append(code)
        what = (
            "the claim (Put on the idempotency table)"
            if index == 0
            else f"business item {index - 1} (the debit)"
        )
        if code == "None":
            meaning = "this item's condition held; it was rolled back with the others"
        elif code == "ConditionalCheckFailed" and index == 0:
            meaning = "the key is already claimed: a duplicate (the stored record came back)"
        elif code == "ConditionalCheckFailed":
            meaning = "your business condition failed: nothing was written, the key stays free"
        else:
            meaning = "transient (conflict or throttling): safe to retry, nothing was written"
        stage.note(f"reason [{index}] {what}: {code}: {meaning}")
    return codes


def run(stage: Stage) -> str:
    config = IdempotencyConfig(table_name=TABLE)
    client = stage.client()
    guard = stage.guard(config, client=client)
    with stage.step(
        "Setting the stage",
        f"The idempotency table, and an accounts table holding acct-1 with a balance of {BALANCE}.",
    ):
        guard.ensure_table()
        client.create_table(
            TableName=ACCOUNTS,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(TableName=ACCOUNTS, Item={**ACCOUNT, "balance": {"N": str(BALANCE)}})
        stage.watch("account acct-1", ACCOUNTS, ACCOUNT)
        stage.watch_record("the record of payment-1", config, "payment-1")
        stage.watch_record("the record of payment-2", config, "payment-2")

    with stage.step(
        "A payment larger than the balance",
        "claim_with sends one TransactWriteItems: the claim (a conditional Put) and the debit "
        "(an Update with balance >= :amt). The debit's condition fails, so DynamoDB cancels the "
        "whole transaction and says why, item by item.",
    ) as refused:
        try:
            guard.claim_with("payment-1", [debit(150)], payload={"amount": 150})
            business: BusinessConditionFailedError | None = None
        except BusinessConditionFailedError as exc:
            business = exc
            stage.note(f"the layer raised BusinessConditionFailedError: {exc}")
        first_codes = explain(refused, stage)

    after_failure = stage.read(ACCOUNTS, ACCOUNT)
    with stage.step(
        "A payment the balance covers",
        "The claim and the debit commit together; the receipt is stored with a fenced update.",
    ):
        claim = guard.claim_with("payment-2", [debit(30)], payload={"amount": 30})
        assert isinstance(claim, Claim)
        guard.complete(claim, {"payment": "payment-2", "debited": 30})
        stage.note("claimed with the debit, then completed")

    with stage.step(
        "The same payment again",
        "A retry of payment-2. This time the claim item's condition fails: reason [0] is "
        "ConditionalCheckFailed with the stored record (ALL_OLD), so the layer replays the "
        "receipt and the debit is not applied twice.",
    ) as duplicate:
        again = guard.claim_with("payment-2", [debit(30)], payload={"amount": 30})
        if isinstance(again, Replay):
            stage.note(f"the layer replayed the stored receipt: {again.value()}")
        second_codes = explain(duplicate, stage)

    final = stage.read(ACCOUNTS, ACCOUNT)

    def balance(item: Mapping[str, Any] | None) -> int | None:
        return None if item is None else int(item["balance"]["N"])

    stage.check(
        "the cancelled transaction gave reasons [None, ConditionalCheckFailed]",
        first_codes == ["None", "ConditionalCheckFailed"],
        shown_by=refused,
    )
    stage.check(
        "mapped to BusinessConditionFailedError for business item 0",
        business is not None and list(business.reasons) == [0],
        shown_by=refused,
    )
    stage.check(
        f"nothing was written: no record of payment-1, the balance still {BALANCE}",
        stage.record(config, "payment-1") is None and balance(after_failure) == BALANCE,
        shown_by=refused,
    )
    stage.check(
        "the duplicate's reasons were [ConditionalCheckFailed, None], mapped to a replay",
        second_codes == ["ConditionalCheckFailed", "None"] and isinstance(again, Replay),
        shown_by=duplicate,
    )
    stage.check(
        "the account was debited exactly once", balance(final) == BALANCE - 30, shown_by=duplicate
    )
    stage.check(
        f"{REASONS_METRIC} counted business_condition_failed and duplicate",
        stage.metrics.total(
            REASONS_METRIC, transact_write_cancellation_reason="business_condition_failed"
        )
        == 1
        and stage.metrics.total(REASONS_METRIC, transact_write_cancellation_reason="duplicate")
        == 1,
    )
    return (
        "The transaction held: a failed business condition cancelled the claim with it (nothing "
        "orphaned), and a duplicate was recognised from reason [0] and replayed without a "
        "second debit."
    )


STORY = (
    "A payment claims its key and debits an account in one TransactWriteItems (the layer's "
    "third variant). The debit's condition fails and the whole transaction is cancelled; then a "
    "payment goes through and its retry is cancelled by the claim instead. Each time the "
    "cancellation reasons are read item by item."
)
STAGE = (
    "a scratch engine with its clock frozen at t0",
    "an idempotency table and an accounts table",
    f"account acct-1 with a balance of {BALANCE}",
)
