"""Issue 29: firstwrite.events against Powertools' batch processor, and the pollers' records/s.

Per-record time of an SQS batch of 10 records (the Lambda event shape), first delivery and
redelivery (every record replayed), for ``SQSBatch`` and for Powertools' ``BatchProcessor``
with an ``idempotent_function`` record handler on its ``DynamoDBPersistenceLayer``: both on the
same boto3 client bound in process to one engine file. The bound is the bare DynamoDB calls
each record must make (a conditional PutItem and an UpdateItem; on redelivery one refused
PutItem returning the stored item), on the same client. Then records/s of the boto3 and the
aiobotocore SQS pollers draining a queue on moto's SQS server against the local engine.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._common import (
    REPO,
    Section,
    Series,
    Settings,
    Table,
    Target,
    package_version,
    profile_contender,
    run_interleaved,
    scratch_dir,
    try_import,
)
from .events_contenders import (
    BATCH,
    BOUND,
    OURS,
    POWERTOOLS,
    SCENARIOS,
    TIME_TARGET,
    Bare,
    BatchContender,
    Ours,
    Powertools,
    Shared,
)
from .events_instructions import tables as instruction_tables


def _per_record(series: list[Series]) -> list[Series]:
    """Batches/s to µs per record."""
    return [
        Series(s.name, [1e6 / (v * BATCH) for v in s.values], unit="µs/record", note=s.note)
        for s in series
    ]


# -- the pollers' throughput -------------------------------------------------------------------


def _brokers() -> Any:
    """The test suite's broker starters (tests/brokers.py): moto's SQS server, RabbitMQ."""
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import brokers

    return brokers


def _sqs_kwargs(url: str) -> dict[str, str]:
    return {
        "endpoint_url": url,
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }


def _fill(sqs: Any, queue_url: str, n: int) -> None:
    for start in range(0, n, 10):
        entries = [
            {"Id": str(j), "MessageBody": json.dumps({"order_id": uuid.uuid4().hex})}
            for j in range(min(10, n - start))
        ]
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)


def _pollers(settings: Settings, log: Callable[[str], None], directory: Path) -> Table:
    import boto3

    from firstwrite.events.async_sqs_poller import AsyncSQSPoller
    from firstwrite.events.sqs_poller import SQSPoller
    from firstwrite.idempotency import AsyncIdempotency, Idempotency, IdempotencyConfig
    from firstwrite.idempotency.aio import ThreadedClient

    shared = Shared(directory)
    config = IdempotencyConfig(table_name="pollers")
    guard = Idempotency(config, client=shared.client)
    guard.ensure_table()
    aguard = AsyncIdempotency(config, client=ThreadedClient(shared.client))
    n = 30 if settings.quick else 300
    moto = _brokers().start_moto(directory)
    sqs = boto3.client("sqs", **_sqs_kwargs(moto.url))
    sync_series = Series("SQSPoller (boto3)", unit="ops/s", note="records/s")
    async_series = Series("AsyncSQSPoller (aiobotocore)", unit="ops/s", note="records/s")

    def drain_sync(queue_url: str) -> float:
        poller = SQSPoller(sqs, queue_url, guard, lambda m: None, wait=0)
        done, start = 0, time.perf_counter()
        while done < n:
            done += sum(r.acknowledged for r in poller.poll_once().results)
        return done / (time.perf_counter() - start)

    async def drain_async(queue_url: str) -> float:
        from aiobotocore.session import get_session

        async def nothing(message: Any) -> None:
            return None

        async with get_session().create_client("sqs", **_sqs_kwargs(moto.url)) as client:
            poller = AsyncSQSPoller(client, queue_url, aguard, nothing, wait=0)
            done, start = 0, time.perf_counter()
            while done < n:
                done += sum(r.acknowledged for r in (await poller.poll_once()).results)
            return done / (time.perf_counter() - start)

    try:
        for rep in range(min(settings.reps, 3)):  # seconds per rep: three are enough
            for series, drain in (
                (sync_series, drain_sync),
                (async_series, lambda url: asyncio.run(drain_async(url))),
            ):
                url = sqs.create_queue(QueueName=f"bench-{uuid.uuid4().hex[:10]}")["QueueUrl"]
                _fill(sqs, url, n)
                series.values.append(drain(url))
            log(
                f"    rep {rep + 1}: sync={sync_series.values[-1]:,.0f} "
                f"async={async_series.values[-1]:,.0f} records/s"
            )
    finally:
        moto.stop()
        shared.engine.close()
    return Table(
        title=f"SQS pollers draining {n} messages (moto server, local engine), records/s",
        series=[sync_series, async_series],
        ours=[sync_series.name, async_series.name],
        notes=[
            "Batches of 10, long poll off (`wait=0`), a handler that does nothing: the "
            "consumer's own cost per message plus moto's (receive, delete) and the engine's."
        ],
    )


def _rabbitmq(settings: Settings, log: Callable[[str], None], directory: Path) -> Table:
    """Records/s of one RabbitMQConsumer draining a queue on Debian's rabbitmq-server."""
    import pika

    from firstwrite.events.rabbitmq import RabbitMQConsumer
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    n = 30 if settings.quick else 300
    title = f"RabbitMQ consumer draining {n} messages (rabbitmq-server, local engine), records/s"
    brokers = _brokers()
    if not brokers.rabbitmq_available():
        why = "rabbitmq-server is not installed"
        return Table(title=title, series=[], skipped={"RabbitMQConsumer": why})
    shared = Shared(directory)
    guard = Idempotency(IdempotencyConfig(table_name="rabbitmq"), client=shared.client)
    guard.ensure_table()
    broker = brokers.start_rabbitmq()
    params = pika.ConnectionParameters("127.0.0.1", broker.port)
    series = Series("RabbitMQConsumer (pika)", unit="ops/s", note="records/s, prefetch 10")

    def drain() -> float:
        queue = f"bench-{uuid.uuid4().hex[:10]}"
        connection = pika.BlockingConnection(params)
        channel = connection.channel()
        channel.queue_declare(queue)
        for i in range(n):
            body = json.dumps({"order_id": uuid.uuid4().hex}).encode()
            channel.basic_publish("", queue, body, pika.BasicProperties(message_id=f"{queue}-{i}"))
        connection.close()
        ran: list[object] = []
        consumer = RabbitMQConsumer(params, queue, guard, ran.append, prefetch=10)
        worker = threading.Thread(target=consumer.run)
        start = time.perf_counter()
        worker.start()
        deadline = time.monotonic() + 120
        while len(ran) < n:
            if time.monotonic() > deadline or not worker.is_alive():
                consumer.stop()
                raise RuntimeError(f"the consumer ran {len(ran)} of {n} messages")
            time.sleep(0.002)
        took = time.perf_counter() - start
        consumer.stop()
        worker.join(30)
        return n / took

    try:
        for rep in range(min(settings.reps, 3)):
            series.values.append(drain())
            log(f"    rep {rep + 1}: rabbitmq={series.values[-1]:,.0f} records/s")
    finally:
        broker.stop()
        shared.engine.close()
    return Table(
        title=title,
        series=[series],
        ours=[series.name],
        notes=[
            "One consumer thread, `prefetch=10`, a handler that only records the delivery: the "
            "consumer's own cost per message (claim, complete, ack) plus the broker's and the "
            "engine's. Timed from the consumer's start until its handler has run every message "
            "(the connection's set-up included)."
        ],
    )


def _count_instructions(section: Section, settings: Settings, log: Callable[[str], None]) -> None:
    """The batch scenarios again in instructions per record (callgrind), with each library's
    calls alone: what a gap to the target is made of, whatever the machine's load."""
    counted, why = instruction_tables(settings, log)
    section.tables += counted
    if why is not None:
        section.method.append(f"Instructions per record (callgrind): not measured: {why}.")


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    method = [
        "One engine file (`durability='normal'`) and one boto3 client bound to it in process, "
        "shared by every contender. firstwrite: `SQSBatch(guard, key='order_id')` (defaults "
        f"otherwise). Powertools {package_version('aws-lambda-powertools')}: `BatchProcessor"
        "(EventType.SQS)` with `process_partial_response`, its record handler calling an "
        "`idempotent_function` on `DynamoDBPersistenceLayer(boto3_client=...)` with "
        "`event_key_jmespath='order_id'`, `payload_validation_jmespath='@'`.",
        f"One op is one SQS event of {BATCH} records (Lambda's shape, no context); reported per "
        "record. First delivery: fresh keys, `ApproximateReceiveCount` 1. Redelivery: the same "
        "stored batch every time, so every record is replayed, with `ApproximateReceiveCount` 2 "
        "as SQS sends a redelivered message (firstwrite reads a batch's redelivered records in "
        "one `BatchGetItem` and replays those stored done without a claim; Powertools ignores "
        "the count).",
        f"`{BOUND}`: per record, the conditional PutItem and the UpdateItem (first delivery) or "
        "the one refused PutItem with `ALL_OLD` (replay) that an implementation claiming each "
        "record must make (a batch read of the redelivered records beats it).",
        "**Instructions (callgrind)**: the same scenarios in one child process under valgrind's "
        "callgrind, which counts only inside the measured pieces (`bench/_callgrind.py`): per "
        "contender, 2 pieces of 20 batches after 3 uncounted. Besides the three contenders, "
        "each library's **calls alone**: its DynamoDB calls for one batch, recorded, replayed "
        "on the same client with none of its code around them (fresh key values per batch on "
        "a first delivery): what it would cost if its own work were free. Instruction counts "
        "do not move with the machine's load.",
    ]
    section = Section("events", "Event sources: SQS batches and pollers (issue 29)", method)
    _, why = try_import("aws_lambda_powertools.utilities.batch", "BatchProcessor")
    with scratch_dir("events-") as directory:
        shared = Shared(directory)
        try:
            for scenario in SCENARIOS:
                log(f"  {scenario}")
                contenders: list[BatchContender] = [Ours(shared, scenario), Bare(shared, scenario)]
                if why is None:
                    contenders.insert(1, Powertools(shared, scenario))
                series, skipped = run_interleaved(contenders, settings, log=log)
                if why is not None:
                    skipped[POWERTOOLS] = why
                table = Table(
                    title=f"SQS batch of {BATCH}, {scenario}: time per record",
                    series=_per_record(series),
                    ours=[OURS],
                    targets=[Target(OURS, POWERTOOLS, maximum=TIME_TARGET, bound=BOUND)],
                    skipped=skipped,
                )
                section.tables.append(table)
                if not settings.quick:
                    profiled = Ours(shared, scenario)
                    profiled.setup()
                    section.profiles[f"{OURS}, {scenario}"] = profile_contender(profiled, 200)
        finally:
            shared.engine.close()
        if why is None:
            _count_instructions(section, settings, log)
        for measure, name in ((_pollers, "SQS pollers"), (_rabbitmq, "RabbitMQConsumer")):
            try:
                section.tables.append(measure(settings, log, directory))
            except Exception as exc:  # a broker that cannot start is a row, not a failed bench
                section.tables.append(
                    Table(
                        title=f"{name}, records/s",
                        series=[],
                        skipped={name: f"{type(exc).__name__}: {exc}"},
                    )
                )
    return section
