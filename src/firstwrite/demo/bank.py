"""The demo's DynamoDB side: its tables, the seeded accounts, the reads and the writes.

A payment's writes commit together with its idempotency key (variant 3: one
``TransactWriteItems``). Plain boto3 low-level calls, so it runs unchanged on the local engine
and on DynamoDB. Amounts are integers in minor units (1250 = 12.50).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("firstwrite.demo")

ACCOUNTS = "demo-accounts"
PAYMENTS = "demo-payments"
ATTEMPTS = "demo-processor-attempts"  # the simulated card processor's attempt counter
TABLES = (ACCOUNTS, PAYMENTS, ATTEMPTS)


@dataclass(frozen=True, slots=True)
class Account:
    id: str
    owner: str
    balance: int
    currency: str
    flaky: bool = False  # its processor fails the first attempt of every payment


SEED = (
    Account("acct_alice", "Alice", 100_000, "EUR"),
    Account("acct_bob", "Bob", 5_000, "EUR"),
    Account("acct_flaky", "Flaky Processor Ltd", 100_000, "EUR", flaky=True),
)


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


class Bank:
    """The demo's reads and writes over one boto3 DynamoDB client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    # -- setup ---------------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the tables that are missing (on-demand) and seed the accounts that are
        missing; existing accounts keep their balance across restarts."""
        existing = set(self._table_names())
        for table in TABLES:
            if table not in existing:
                self.client.create_table(
                    TableName=table,
                    KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                    BillingMode="PAY_PER_REQUEST",
                )
        for table in TABLES:
            self.client.get_waiter("table_exists").wait(
                TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
            )
        for account in SEED:
            try:
                self.client.put_item(
                    TableName=ACCOUNTS,
                    Item={
                        "id": _s(account.id),
                        "owner": _s(account.owner),
                        "balance": _n(account.balance),
                        "currency": _s(account.currency),
                        "flaky": {"BOOL": account.flaky},
                    },
                    ConditionExpression="attribute_not_exists(id)",
                )
            except self.client.exceptions.ConditionalCheckFailedException:
                pass  # seeded on an earlier run: its balance is the truth now

    def _table_names(self) -> list[str]:
        names: list[str] = []
        for page in self.client.get_paginator("list_tables").paginate():
            names.extend(page.get("TableNames", []))
        return names

    # -- reads ---------------------------------------------------------------------------------

    def account(self, account_id: str) -> dict[str, Any] | None:
        item = self._get(ACCOUNTS, account_id)
        if item is None:
            return None
        return {
            "id": item["id"]["S"],
            "owner": item["owner"]["S"],
            "balance": int(item["balance"]["N"]),
            "currency": item["currency"]["S"],
            "flaky": item.get("flaky", {}).get("BOOL", False),
        }

    def payment(self, payment_id: str) -> dict[str, Any] | None:
        item = self._get(PAYMENTS, payment_id)
        return None if item is None else payment_of(item)

    def _get(self, table: str, key: str) -> dict[str, Any] | None:
        response = self.client.get_item(TableName=table, Key={"id": _s(key)}, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    # -- writes --------------------------------------------------------------------------------

    def processor_attempt(self, payment_id: str) -> int:
        """Count one attempt at the card processor for ``payment_id``; returns its number."""
        response = self.client.update_item(
            TableName=ATTEMPTS,
            Key={"id": _s(payment_id)},
            UpdateExpression="ADD attempts :one",
            ExpressionAttributeValues={":one": _n(1)},
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"]["attempts"]["N"])

    def charge_items(self, payment: dict[str, Any]) -> list[dict[str, Any]]:
        """The business writes of a payment (to commit with its idempotency key): debit the
        account if it holds enough in the payment's currency, and record the payment unless a
        payment with its id exists (a retry after a crash must not charge twice)."""
        return [
            {
                "Update": {
                    "TableName": ACCOUNTS,
                    "Key": {"id": _s(payment["account"])},
                    "UpdateExpression": "SET balance = balance - :amount",
                    "ConditionExpression": (
                        "attribute_exists(id) AND balance >= :amount AND currency = :currency"
                    ),
                    "ExpressionAttributeValues": {
                        ":amount": _n(payment["amount"]),
                        ":currency": _s(payment["currency"]),
                    },
                }
            },
            {
                "Put": {
                    "TableName": PAYMENTS,
                    "Item": item_of(payment),
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            },
        ]


DEBIT, RECORD = 0, 1  # the index of each write in charge_items()


def new_payment(
    payment_id: str, account: str, amount: int, currency: str, description: str
) -> dict[str, Any]:
    return {
        "id": payment_id,
        "account": account,
        "amount": amount,
        "currency": currency,
        "description": description,
        "status": "succeeded",
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
    }


def item_of(payment: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _s(payment["id"]),
        "account": _s(payment["account"]),
        "amount": _n(payment["amount"]),
        "currency": _s(payment["currency"]),
        "description": _s(payment["description"]),
        "status": _s(payment["status"]),
        "created_at": _s(payment["created_at"]),
    }


def payment_of(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item["id"]["S"],
        "account": item["account"]["S"],
        "amount": int(item["amount"]["N"]),
        "currency": item["currency"]["S"],
        "description": item["description"]["S"],
        "status": item["status"]["S"],
        "created_at": item["created_at"]["S"],
    }
