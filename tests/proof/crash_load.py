"""The load of the crash proof beyond tests/engine/storage/test_crash.py's writers, and how to read
back what survived.

* :class:`TtlWriters` put items that expire while the engine clock is driven forward
  (:class:`ClockDriver`, through the admin API), so the TTL sweeper deletes items while the
  server is killed; the table has a stream, so every delete must leave its REMOVE record, and a
  global secondary index, which must hold exactly the table's items.
* :class:`ReplicaWriters` write to a global table from two regions, so replication is queued
  and applied while the server is killed.
* :func:`layer_worker` is a process of the idempotency layer (never killed; the server under it
  is) that runs key after key: ``guard.run`` with a side effect appended to a file, and
  ``claim`` + ``complete_with`` with a business write in the completion transaction.

Every writer stops at its first failure after the kill; a failure before it is ``unexpected``.
"""

from __future__ import annotations

import functools
import os
import random
import socket
import threading
import time
from collections import Counter
from typing import Any

import boto3
import httpx
from botocore.config import Config

from engine_process import KillSwitch

REGIONS = ("us-east-1", "eu-west-1")
CRASH_TABLE = "crash"  # tests/engine/storage/test_crash.py's writers' table
TTL_TABLE = "ttl"
TTL_INDEX = "by-n"  # a GSI on the TTL table: index maintenance under crashes
GLOBAL_TABLE = "global"
IDEM_TABLE = "crash-idem"
BUSINESS_TABLE = "business"
# Items expire an hour ahead of the wall clock, so that nothing expires by itself between
# cycles (a restart resets the engine clock); the driver moves the clock there during a cycle.
TTL_AHEAD_S = 3600.0
TTL_SPREAD_S = 600.0
PACE_S = 0.03  # between two new layer keys: steady traffic through the run, not a flood
CLIENT_CONFIG = Config(
    retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=30, max_pool_connections=8
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def client(url: str, region: str = "us-east-1", service: str = "dynamodb") -> Any:
    from firstwrite.engine.binding.sync import dummy_session

    session = boto3.session.Session(botocore_session=dummy_session(region))
    return session.client(service, region_name=region, endpoint_url=url, config=CLIENT_CONFIG)


def admin(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}/_firstwrite/{path}", json=body, timeout=30)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def pk(value: str) -> dict[str, Any]:
    return {"pk": {"S": value}}


def create_tables(url: str) -> None:
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    ddb = client(url)
    schema = {
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    ddb.create_table(
        TableName=TTL_TABLE,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        # A global secondary index kept in each write's (and each TTL delete's) transaction.
        GlobalSecondaryIndexes=[
            {
                "IndexName": TTL_INDEX,
                "KeySchema": [
                    {"AttributeName": "n", "KeyType": "HASH"},
                    {"AttributeName": "exp", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        **{
            **schema,
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "n", "AttributeType": "N"},
                {"AttributeName": "exp", "AttributeType": "N"},
            ],
        },
    )
    ddb.update_time_to_live(
        TableName=TTL_TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
    )
    ddb.create_table(TableName=CRASH_TABLE, **schema)
    ddb.create_table(TableName=GLOBAL_TABLE, **schema)
    ddb.update_table(
        TableName=GLOBAL_TABLE, ReplicaUpdates=[{"Create": {"RegionName": REGIONS[1]}}]
    )
    ddb.create_table(TableName=BUSINESS_TABLE, **schema)
    Idempotency(IdempotencyConfig(table_name=IDEM_TABLE), client=ddb).ensure_table()


class _Writers:
    """Threads that each put items until the first failure; acknowledged items are kept."""

    def __init__(self, threads: int) -> None:
        self.killed = KillSwitch()
        self.lock = threading.Lock()
        self.acked: dict[str, dict[str, Any]] = {}  # pk -> the item as written
        self.unexpected: list[str] = []
        self.threads = [threading.Thread(target=self._loop, args=(t,)) for t in range(threads)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(60)
            assert not thread.is_alive()

    def _loop(self, thread: int) -> None:
        n = 0
        while True:
            try:
                item = self.write(thread, n)
            except Exception as exc:
                if not self.killed.explains_a_failure_now():
                    with self.lock:
                        self.unexpected.append(repr(exc))
                return
            with self.lock:
                self.acked[item["pk"]["S"]] = item
            n += 1

    def write(self, thread: int, n: int) -> dict[str, Any]:
        raise NotImplementedError


class TtlWriters(_Writers):
    """Put items with an ``exp`` an hour or so ahead (engine time)."""

    def __init__(self, url: str, cycle: int, threads: int = 2) -> None:
        super().__init__(threads)
        self.ddb = [client(url) for _ in range(threads)]
        self.cycle = cycle
        self.rng = random.Random(cycle)

    def write(self, thread: int, n: int) -> dict[str, Any]:
        exp = int(time.time() + TTL_AHEAD_S + self.rng.random() * TTL_SPREAD_S)
        item = {**pk(f"ttl-{self.cycle}-{thread}-{n}"), "exp": {"N": str(exp)}, "n": {"N": str(n)}}
        self.ddb[thread].put_item(TableName=TTL_TABLE, Item=item)
        return item


class ReplicaWriters(_Writers):
    """Put items into the global table, one thread per region."""

    def __init__(self, url: str, cycle: int) -> None:
        super().__init__(len(REGIONS))
        self.ddb = [client(url, region) for region in REGIONS]
        self.cycle = cycle

    def write(self, thread: int, n: int) -> dict[str, Any]:
        item = {**pk(f"rep-{REGIONS[thread]}-{self.cycle}-{n}"), "n": {"N": str(n)}}
        self.ddb[thread].put_item(TableName=GLOBAL_TABLE, Item=item)
        return item


class ClockDriver:
    """Moves the engine clock an hour ahead, then on by ``step`` seconds every ``every``
    seconds, so the TTL sweeper keeps finding due items."""

    def __init__(self, url: str, step: float = 15.0, every: float = 0.02) -> None:
        self.url = url
        self.step = step
        self.every = every
        self.killed = KillSwitch()
        self.advanced = 0.0
        self.thread = threading.Thread(target=self._loop)

    def start(self) -> None:
        admin(self.url, "clock", {"advance": TTL_AHEAD_S})
        self.thread.start()

    def join(self) -> None:
        self.thread.join(60)

    def _loop(self) -> None:
        while not self.killed.wait(self.every):
            try:
                admin(self.url, "clock", {"advance": self.step})
            except httpx.HTTPError:
                return
            self.advanced += self.step


def scan(
    url: str, table: str, region: str = "us-east-1", index: str | None = None
) -> dict[str, dict[str, Any]]:
    """Every item of ``table`` (or of its GSI ``index``) by pk, all pages; consistent reads on
    the table (a GSI has none: the engine's see every write at once unless a fault says no)."""
    paginator = client(url, region).get_paginator("scan")
    items = {}
    read = {"IndexName": index} if index else {"ConsistentRead": True}
    for page in paginator.paginate(TableName=table, **read):
        for item in page["Items"]:
            items[item["pk"]["S"]] = item
    return items


def stream_records(url: str, table: str) -> list[dict[str, Any]]:
    """Every record of ``table``'s stream (one shard), oldest first."""
    arn = client(url).describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = client(url, service="dynamodbstreams")
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records += page["Records"]
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


# --- the idempotency layer's worker process ---------------------------------------------------


def _effect(path: str, key: str) -> str:
    """The side effect outside DynamoDB: one line appended and fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return f"done {key}"


def layer_worker(url: str, seed: int, effects: str, stop: str, deadline: float) -> Counter[str]:
    """Run keys ``run-0, with-0, run-1, with-1, ...`` through the layer until the file ``stop``
    exists, then finish the keys begun (every worker walks the same keys, so each key is raced
    by all of them); ``stop + ".abort"`` ends it at once (the test failed). Returns outcome
    counts; ``keys`` is how many pairs it began, ``pending`` how many keys the ``deadline``
    (wall clock) left undone.

    ``run-*`` keys: ``guard.run`` with :func:`_effect`. ``with-*`` keys: ``claim`` then
    ``complete_with`` adding 1 to the key's counter in the business table (exactly once: the
    write commits with the completion, fenced by the claim's owner). The layer's retry policy
    outlasts a restart of the server (a second or two), so a live worker never gives a claim up;
    ``retries`` counts the calls it retried (the crashes it rode through).
    """
    from firstwrite.idempotency import (
        Claim,
        Idempotency,
        IdempotencyConfig,
        InProgressError,
        MemoryMetrics,
        RetryPolicy,
    )

    retry = RetryPolicy(max_attempts=14, base=0.05, cap=1.0)  # sleeps up to ~10 s in all
    metrics = MemoryMetrics()
    config = IdempotencyConfig(table_name=IDEM_TABLE, retry=retry)
    guard = Idempotency(config, client=client(url), metrics=metrics)
    rng = random.Random(seed)
    pending: list[str] = []
    counts: Counter[str] = Counter()
    while time.time() < deadline and not os.path.exists(stop + ".abort"):
        if not os.path.exists(stop):
            pending += [f"run-{counts['keys']}", f"with-{counts['keys']}"]
            counts["keys"] += 1
            time.sleep(PACE_S)
        elif not pending:
            break
        key = pending.pop(0)
        try:
            if key.startswith("run-"):
                guard.run(key, functools.partial(_effect, effects, key), payload={"key": key})
            else:
                outcome = guard.claim(key, payload={"key": key})
                if isinstance(outcome, Claim):
                    count = {
                        "Update": {
                            "TableName": BUSINESS_TABLE,
                            "Key": pk(f"count-{key}"),
                            "UpdateExpression": "ADD n :one",
                            "ExpressionAttributeValues": {":one": {"N": "1"}},
                        }
                    }
                    guard.complete_with(outcome, [count], result=f"done {key}")
            counts["done"] += 1
        except InProgressError:
            counts["in_progress"] += 1
            pending.append(key)
            time.sleep(rng.random() * 0.02)
        except Exception as exc:  # the retries ran out: counted, and the key tried again
            counts[f"error:{type(exc).__name__}"] += 1
            pending.append(key)
            time.sleep(0.2)
    counts["pending"] = len(pending)
    counts["retries"] = int(metrics.total("firstwrite_dynamodb_retries_total"))
    return counts
