"""One consumer of the consumer chaos proof, in its own process: ``python chaos_consumer.py
<config.json>``, where the config names its ``kind`` (``sync`` or ``async`` SQS poller, or
``rabbitmq``), the engine server's URL and table, the broker (``sqs_url`` and ``queue_url``,
or ``rabbit_port`` and ``queue``), the ``effects`` file and its options.

Each message's body is JSON: ``id`` (the idempotency key; a duplicate publish repeats it),
``work`` (seconds the handler works before its side effect) and ``poison`` (the handler
raises, every time). The side effect is one line ``effect <id> <pid> <time>`` appended to the
effects file with ``fsync``; a poison message appends ``attempt <id> <pid> <time>`` instead,
and the consumer appends ``ready <kind> <pid> <time>`` once it is about to consume.
The consumer runs until SIGTERM (then it exits 0); its log (logger ``firstwrite.events``, INFO)
goes to stderr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any

import boto3

from firstwrite.idempotency import AsyncIdempotency, Idempotency, IdempotencyConfig
from firstwrite.idempotency.aio import ThreadedClient


def record(path: str, what: str, key: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{what} {key} {os.getpid()} {time.time():.6f}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def effect(config: dict[str, Any], body: dict[str, Any]) -> str:
    if body.get("poison"):
        record(config["effects"], "attempt", body["id"])
        raise RuntimeError(f"poison message {body['id']}")
    record(config["effects"], "effect", body["id"])
    return str(body["id"])


def client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def run_sync(config: dict[str, Any], guard_config: IdempotencyConfig) -> None:
    from firstwrite.events.sqs_poller import SQSPoller

    guard = Idempotency(guard_config, client=client("dynamodb", config["engine_url"]))

    def handler(message: dict[str, Any]) -> str:
        body = json.loads(message["Body"])
        time.sleep(body["work"])
        return effect(config, body)

    sqs = client("sqs", config["sqs_url"])
    poller = SQSPoller(sqs, config["queue_url"], guard, handler, **config["options"])
    record(config["effects"], "ready", config["kind"])
    poller.run()


def run_async(config: dict[str, Any], guard_config: IdempotencyConfig) -> None:
    from aiobotocore.session import get_session

    from firstwrite.events.async_sqs_poller import AsyncSQSPoller

    guard = AsyncIdempotency(
        guard_config, client=ThreadedClient(client("dynamodb", config["engine_url"]))
    )

    async def handler(message: dict[str, Any]) -> str:
        body = json.loads(message["Body"])
        await asyncio.sleep(body["work"])
        return effect(config, body)

    async def main() -> None:
        async with get_session().create_client(
            "sqs",
            endpoint_url=config["sqs_url"],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ) as sqs:
            poller = AsyncSQSPoller(sqs, config["queue_url"], guard, handler, **config["options"])
            record(config["effects"], "ready", config["kind"])
            await poller.run()

    asyncio.run(main())


def run_rabbitmq(config: dict[str, Any], guard_config: IdempotencyConfig) -> None:
    import pika

    from firstwrite.events.rabbitmq import Delivery, RabbitMQConsumer

    guard = Idempotency(guard_config, client=client("dynamodb", config["engine_url"]))

    def handler(delivery: Delivery) -> str:
        body = json.loads(delivery.body)
        time.sleep(body["work"])
        return effect(config, body)

    params = pika.ConnectionParameters("127.0.0.1", config["rabbit_port"], connection_attempts=1)
    consumer = RabbitMQConsumer(params, config["queue"], guard, handler, **config["options"])
    signal.signal(signal.SIGTERM, lambda signum, frame: consumer.stop())
    record(config["effects"], "ready", config["kind"])
    consumer.run()


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as source:
        config = json.load(source)
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s"
    )
    logging.getLogger("firstwrite.events").setLevel(logging.INFO)
    guard_config = IdempotencyConfig(table_name=config["table"])
    runners = {"sync": run_sync, "async": run_async, "rabbitmq": run_rabbitmq}
    runners[config["kind"]](config, guard_config)


if __name__ == "__main__":
    main()
