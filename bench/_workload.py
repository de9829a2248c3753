"""The conditional PutItem workload every engine benchmark shares.

``success``: fresh keys, ``attribute_not_exists(pk)`` holds, every put writes.
``failing``: the same existing key every time, every put fails the condition.
"""

from __future__ import annotations

from typing import Any

TABLE = "bench"
CONDITION = "attribute_not_exists(pk)"
EXISTING_KEY = "existing-key"
PAYLOAD = "x" * 100  # a small body, like an idempotency record
WORKLOADS = ("success", "failing")

KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRIBUTE_DEFINITIONS = [{"AttributeName": "pk", "AttributeType": "S"}]
CREATE_TABLE: dict[str, Any] = {
    "TableName": TABLE,
    "KeySchema": KEY_SCHEMA,
    "AttributeDefinitions": ATTRIBUTE_DEFINITIONS,
    "BillingMode": "PAY_PER_REQUEST",
}


def key(i: int) -> str:
    return f"key-{i:010d}"


def item(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "payload": {"S": PAYLOAD}, "n": {"N": "42"}}


def put_kwargs(pk: str) -> dict[str, Any]:
    return {"TableName": TABLE, "Item": item(pk), "ConditionExpression": CONDITION}


def pk_for(workload: str, i: int) -> str:
    return key(i) if workload == "success" else EXISTING_KEY
