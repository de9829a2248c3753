"""Stands in for application code under test: it makes its own clients, as real code does,
and knows nothing of firstwrite."""

from __future__ import annotations

from typing import Any

import boto3

TABLE = "orders"

# Created at import time, before any redirect exists (credentials given, as an app's config
# would): the redirect must still answer it.
MODULE_CLIENT = boto3.client(
    "dynamodb",
    region_name="us-east-1",
    aws_access_key_id="AKIDLIBRARY",
    aws_secret_access_key="library-secret",
)


def create_orders_table() -> None:
    boto3.client("dynamodb").create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def place_order(order_id: str, amount: int) -> bool:
    """Record an order once; False if it already exists (a conditional put)."""
    client = boto3.client("dynamodb")
    try:
        client.put_item(
            TableName=TABLE,
            Item={"pk": {"S": order_id}, "amount": {"N": str(amount)}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def order_amount_via_resource(order_id: str) -> int | None:
    item = boto3.resource("dynamodb").Table(TABLE).get_item(Key={"pk": order_id}).get("Item")
    return None if item is None else int(item["amount"])


def order_ids_via_session(endpoint_url: str | None = None) -> list[str]:
    client = boto3.session.Session().client("dynamodb", endpoint_url=endpoint_url)
    return sorted(item["pk"]["S"] for item in client.scan(TableName=TABLE)["Items"])


def order_ids_via_module_client() -> list[str]:
    return sorted(item["pk"]["S"] for item in MODULE_CLIENT.scan(TableName=TABLE)["Items"])


async def order_count_async() -> int:
    from aiobotocore.session import get_session

    async with get_session().create_client("dynamodb") as client:
        response = await client.scan(TableName=TABLE, Select="COUNT")
        return int(response["Count"])


def stream_arns() -> list[str]:
    streams = boto3.client("dynamodbstreams").list_streams(TableName=TABLE)["Streams"]
    return [s["StreamArn"] for s in streams]


def s3_client() -> Any:
    return boto3.client("s3")
