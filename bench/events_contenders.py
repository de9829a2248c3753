"""The event benchmark's SQS batch contenders: firstwrite's SQSBatch, Powertools, the bare calls.

Each handles one SQS event of :data:`BATCH` records per op (:class:`BatchContender`), on the
client of one :class:`Shared` engine: fresh keys on a first delivery, the same stored batch on a
redelivery. :mod:`.events` times them, :mod:`.events_instructions` counts their instructions.
"""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path
from typing import Any

from ._common import Contender, create_table
from .engine_bound import boto3_client

BATCH = 10
TIME_TARGET = 0.8  # firstwrite time per record <= 0.8x Powertools
OURS = "firstwrite SQSBatch"
POWERTOOLS = "Powertools BatchProcessor"
BOUND = "bare DynamoDB calls"
SCENARIOS = ("first delivery", "redelivery (replay)")


def sqs_event(keys: list[str], receive_count: int = 1) -> dict[str, Any]:
    """An SQS event (Lambda's shape) of one message per key; ``receive_count``: how many times
    SQS has delivered each (above 1 on a redelivery)."""
    return {
        "Records": [
            {
                "messageId": f"m-{key}",
                "receiptHandle": f"rh-{key}",
                "body": json.dumps({"order_id": key, "amount": 10}),
                "attributes": {"ApproximateReceiveCount": str(receive_count)},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
                "awsRegion": "us-east-1",
            }
            for key in keys
        ]
    }


class Shared:
    """One engine file, one boto3 client bound to it in process."""

    def __init__(self, directory: Path) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.engine.binding.sync import bind

        self.engine = Engine(directory / "events.db", durability="normal")
        self.client = bind(boto3_client(), self.engine)

    def create_table(self, name: str, key: str, *, ttl_attribute: str | None = None) -> None:
        create_table(self.client, name, key, ttl_attribute=ttl_attribute)


class BatchContender(Contender):
    """One batch of 10 records per op: fresh keys (first delivery) or the same keys (replay)."""

    def __init__(self, shared: Shared, scenario: str) -> None:
        self.shared, self.scenario = shared, scenario
        self.prefix = uuid.uuid4().hex[:8]
        self.replayed = [f"{self.prefix}-r-{j}" for j in range(BATCH)]

    def keys(self, i: int) -> list[str]:
        if self.scenario == SCENARIOS[0]:
            return [f"{self.prefix}-{i}-{j}" for j in range(BATCH)]
        return self.replayed

    def setup(self) -> None:
        self.prepare()
        if self.scenario != SCENARIOS[0]:
            self.handle(sqs_event(self.replayed))  # stored once; every op replays it

    def prepare(self) -> None:
        raise NotImplementedError

    def handle(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def op(self, i: int) -> None:
        self.handle(sqs_event(self.keys(i), 1 if self.scenario == SCENARIOS[0] else 2))


def _ship(order: dict[str, Any]) -> dict[str, Any]:
    return {"shipped": order["order_id"]}


class Ours(BatchContender):
    name = OURS

    def prepare(self) -> None:
        from firstwrite.events import SQSBatch
        from firstwrite.idempotency import Idempotency, IdempotencyConfig

        table = f"fw-{self.prefix}"
        guard = Idempotency(IdempotencyConfig(table_name=table), client=self.shared.client)
        guard.ensure_table()
        self.batch = SQSBatch(guard, key="order_id")

    def handle(self, event: dict[str, Any]) -> None:
        response = self.batch.handle(event, None, self._record)  # type: ignore[arg-type]
        if response["batchItemFailures"]:
            raise AssertionError(f"{OURS} reported {response}")

    @staticmethod
    def _record(record: Any) -> object:
        return _ship(json.loads(record["body"]))


class Powertools(BatchContender):
    name = POWERTOOLS

    def prepare(self) -> None:
        from aws_lambda_powertools.utilities.batch import (
            BatchProcessor,
            EventType,
            process_partial_response,
        )
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )

        warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")
        table = f"pt-{self.prefix}"
        self.shared.create_table(table, "id", ttl_attribute="expiration")
        persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=self.shared.client)
        config = IdempotencyConfig(event_key_jmespath="order_id", payload_validation_jmespath="@")
        ship = idempotent_function(
            data_keyword_argument="order", persistence_store=persistence, config=config
        )(_ship)
        processor = BatchProcessor(event_type=EventType.SQS)

        def record_handler(record: Any) -> object:
            return ship(order=json.loads(record.body))

        def handle(event: dict[str, Any]) -> None:
            response = process_partial_response(event, record_handler, processor, None)
            if response["batchItemFailures"]:
                raise AssertionError(f"{POWERTOOLS} reported {response}")

        self.handle = handle  # type: ignore[method-assign]


class Bare(BatchContender):
    """The calls every implementation must make per record, and nothing else."""

    name = BOUND

    def prepare(self) -> None:
        self.table = f"bare-{self.prefix}"
        self.shared.create_table(self.table, "pk", ttl_attribute="expires_at")
        self.refused = self.shared.client.exceptions.ConditionalCheckFailedException

    def handle(self, event: dict[str, Any]) -> None:
        client, table = self.shared.client, self.table
        for record in event["Records"]:
            key = {"pk": {"S": json.loads(record["body"])["order_id"]}}
            try:
                client.put_item(
                    TableName=table,
                    Item={**key, "status": {"S": "PENDING"}, "expires_at": {"N": "4102444800"}},
                    ConditionExpression="attribute_not_exists(pk)",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except self.refused:
                continue  # replay: the stored item came back
            client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #s = :c, #r = :r",
                ConditionExpression="#s = :p",
                ExpressionAttributeNames={"#s": "status", "#r": "result"},
                ExpressionAttributeValues={
                    ":c": {"S": "COMPLETED"},
                    ":p": {"S": "PENDING"},
                    ":r": {"S": record["body"]},
                },
            )
