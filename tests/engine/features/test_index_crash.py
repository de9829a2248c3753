"""The crash proof for secondary indexes: SIGKILL a server while clients write to a table with
three GSIs (one with a multi-attribute key) and an LSI, and while another GSI (its sort key two
attributes) is being backfilled; after a restart every index agrees exactly with its table,
entry for entry, projection included.

Index entries are written in the transaction of the item write that changes them, and a
backfill's cursor in the transaction of the entries it wrote, so no kill can leave an index
ahead of, behind, or different from its table. Acknowledged writes surviving the kill is
test_crash.py's proof; this one checks what the indexes show of whatever survived.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from index_model import assert_indexes_agree

from engine.storage.test_crash import client_for

TABLE = "crash-indexes"
THREADS = 4
SEEDED = 6000
ACKS_BEFORE_KILL = 300
KILL_AFTER_S = 20.0


def _index(name: str, keys: list[tuple[str, str]], projection: dict[str, Any]) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": a, "KeyType": k} for a, k in keys],
        "Projection": projection,
    }


def _item(rng: random.Random, pk: str, sk: int) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": {"S": pk},
        "sk": {"N": str(sk)},
        "v": {"S": "x" * rng.randint(0, 200)},
    }
    if rng.random() < 0.8:
        item["tenant"] = {"S": f"t{rng.randint(0, 9)}"}
    if rng.random() < 0.8:
        item["ts"] = {"N": str(rng.randint(-50, 50))}
    if rng.random() < 0.7:
        item["rank"] = {"N": str(rng.randint(0, 20))}
    if rng.random() < 0.5:
        item["late"] = {"S": f"l{rng.randint(0, 3)}"}
    return item


def _active(client: Any, index: str) -> bool:
    described = client.describe_table(TableName=TABLE)["Table"]["GlobalSecondaryIndexes"]
    return any(i["IndexName"] == index and i["IndexStatus"] == "ACTIVE" for i in described)


class Writers:
    """Threads writing every kind of change that touches the indexes, until the kill."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.killed = threading.Event()
        self.lock = threading.Lock()
        self.acks = 0
        self.unexpected: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(t,)) for t in range(THREADS)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(60)
            assert not thread.is_alive()

    def _run(self, thread: int) -> None:
        client = client_for(self.url)
        rng = random.Random(thread)
        while True:
            pk, sk = f"p{rng.randint(0, 40)}", rng.randint(0, 5)
            key = {"pk": {"S": pk}, "sk": {"N": str(sk)}}
            choice = rng.random()
            try:
                if choice < 0.35:
                    client.put_item(TableName=TABLE, Item=_item(rng, pk, sk))
                elif choice < 0.6:
                    client.update_item(
                        TableName=TABLE,
                        Key=key,
                        UpdateExpression="SET tenant = :t, ts = :n REMOVE #r",
                        ExpressionAttributeNames={"#r": "rank"},
                        ExpressionAttributeValues={
                            ":t": {"S": f"t{rng.randint(0, 9)}"},
                            ":n": {"N": str(rng.randint(-50, 50))},
                        },
                    )
                elif choice < 0.75:
                    client.delete_item(TableName=TABLE, Key=key)
                else:
                    other = {"pk": {"S": f"q{thread}-{rng.randint(0, 20)}"}, "sk": {"N": "0"}}
                    client.transact_write_items(
                        TransactItems=[
                            {"Put": {"TableName": TABLE, "Item": _item(rng, pk, sk)}},
                            {"Delete": {"TableName": TABLE, "Key": other}},
                        ]
                    )
            except Exception as exc:  # after the kill every call fails: that ends the thread
                if not self.killed.is_set():
                    with self.lock:
                        self.unexpected.append(repr(exc))
                return
            with self.lock:
                self.acks += 1


@pytest.mark.slow
@pytest.mark.crash
def test_indexes_agree_with_their_table_after_sigkill(
    tmp_path: Path, cli_server: Callable[..., Any]
) -> None:
    db = tmp_path / "crash-indexes.db"
    server = cli_server(db_path=db)
    try:
        setup = client_for(server.url)
        setup.create_table(
            TableName=TABLE,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
                {"AttributeName": "tenant", "AttributeType": "S"},
                {"AttributeName": "ts", "AttributeType": "N"},
                {"AttributeName": "rank", "AttributeType": "N"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                _index(
                    "by-tenant", [("tenant", "HASH"), ("ts", "RANGE")], {"ProjectionType": "ALL"}
                ),
                _index("by-ts", [("ts", "HASH")], {"ProjectionType": "KEYS_ONLY"}),
                # A multi-attribute key: two HASH and two RANGE attributes.
                _index(
                    "multi",
                    [("tenant", "HASH"), ("rank", "HASH"), ("ts", "RANGE"), ("pk", "RANGE")],
                    {"ProjectionType": "KEYS_ONLY"},
                ),
            ],
            LocalSecondaryIndexes=[
                _index(
                    "by-rank",
                    [("pk", "HASH"), ("rank", "RANGE")],
                    {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["tenant"]},
                )
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        rng = random.Random(99)
        for start in range(0, SEEDED, 25):
            setup.batch_write_item(
                RequestItems={
                    TABLE: [
                        {"PutRequest": {"Item": _item(rng, f"seed{n // 7}", n % 7)}}
                        for n in range(start, start + 25)
                    ]
                }
            )
        writers = Writers(server.url)
        writers.start()
        deadline = time.monotonic() + KILL_AFTER_S
        while writers.acks < ACKS_BEFORE_KILL and time.monotonic() < deadline:
            time.sleep(0.01)
        # Another GSI, backfilled from the table's items in the background while the writers
        # go on; killed as soon as its stored cursor shows the backfill half way. A backfill
        # that finished before the watch saw it is followed by another index (up to five).
        late: list[str] = []
        caught = False
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as watch:
            while not caught and len(late) < 5:
                late.append(f"late-{len(late)}")
                setup.update_table(
                    TableName=TABLE,
                    AttributeDefinitions=[{"AttributeName": "late", "AttributeType": "S"}],
                    GlobalSecondaryIndexUpdates=[
                        {
                            "Create": _index(
                                late[-1],
                                [("late", "HASH"), ("pk", "RANGE"), ("sk", "RANGE")],
                                {"ProjectionType": "KEYS_ONLY"},
                            )
                        }
                    ],
                )
                limit = time.monotonic() + 30
                while time.monotonic() < limit:
                    row = watch.execute("SELECT after_pk FROM index_backfill").fetchone()
                    if row is None and _active(setup, late[-1]):
                        break  # built before the watch saw it: try another
                    if row is not None and row[0] is not None:
                        caught = True
                        break
                    time.sleep(0.0005)
        writers.killed.set()
        os.kill(server.process.pid, signal.SIGKILL)
        assert server.process.wait(30) == -signal.SIGKILL
        writers.join()
    finally:
        server.stop(signal.SIGKILL)

    assert writers.unexpected == []
    assert writers.acks >= 50, "too few writes before the kill"
    assert caught, "no backfill was caught half way"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM index_backfill").fetchone()[0] == 1

    restarted = cli_server(db_path=db)
    try:
        check = client_for(restarted.url)
        deadline = time.monotonic() + 60
        while True:  # the restarted server resumes the backfill the kill interrupted
            indexes = check.describe_table(TableName=TABLE)["Table"]["GlobalSecondaryIndexes"]
            if all(i["IndexStatus"] == "ACTIVE" for i in indexes):
                break
            assert time.monotonic() < deadline, indexes
            time.sleep(0.05)
        assert [i["IndexName"] for i in indexes] == ["by-tenant", "by-ts", "multi", *late]
        checked = assert_indexes_agree(check, TABLE)
        assert checked > SEEDED  # every index was compared, entry by entry
    finally:
        restarted.stop()
