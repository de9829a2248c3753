"""The crash proof: SIGKILL a server mid-write; every acknowledged write survives, no
transaction is half-applied.

While client threads write to a ``firstwrite engine serve`` process, it is killed with SIGKILL.
A new server on the same file must then show:

* every PutItem that got a 200 (each writes its own item, so each is checked one by one);
* every TransactWriteItems that got a 200: each moves value between two accounts *and* puts a
  transfer-log item, all in one transaction;
* no half-applied transaction: the balances equal the initial balances plus exactly the
  transfers whose log item exists (so the total is unchanged too), and no transfer that was
  answered "cancelled" left a log item.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from engine_process import KillSwitch, sigkill
from firstwrite.engine.binding.sync import dummy_session

ACCOUNTS = 6
INITIAL_BALANCE = 100
PUT_THREADS = 3
TRANSFER_THREADS = 3
ACKS_BEFORE_KILL = 400  # kill once this many writes were acknowledged (or after KILL_AFTER_S)
KILL_AFTER_S = 20.0
CLIENT_CONFIG = Config(retries={"max_attempts": 0}, connect_timeout=5, read_timeout=30)


def client_for(url: str) -> Any:
    session = boto3.session.Session(botocore_session=dummy_session("us-east-1"))
    return session.client("dynamodb", endpoint_url=url, config=CLIENT_CONFIG)


def key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}}


def transfer_request(
    table: str, thread: int, n: int
) -> tuple[dict[str, Any], tuple[int, int, int]]:
    src = (thread + n) % ACCOUNTS
    dst = (src + 1 + n % (ACCOUNTS - 1)) % ACCOUNTS
    amount = 1 + (n * 7 + thread) % 30
    values = {":v": {"N": str(amount)}}
    request = {
        "TransactItems": [
            {
                "Update": {
                    "TableName": table,
                    "Key": key(f"acct-{src}"),
                    "UpdateExpression": "SET bal = bal - :v",
                    "ConditionExpression": "bal >= :v",
                    "ExpressionAttributeValues": values,
                }
            },
            {
                "Update": {
                    "TableName": table,
                    "Key": key(f"acct-{dst}"),
                    "UpdateExpression": "SET bal = bal + :v",
                    "ExpressionAttributeValues": values,
                }
            },
            {
                "Put": {
                    "TableName": table,
                    "Item": {
                        **key(f"tx-{thread}-{n}"),
                        "src": {"N": str(src)},
                        "dst": {"N": str(dst)},
                        "amount": {"N": str(amount)},
                    },
                }
            },
        ]
    }
    return request, (src, dst, amount)


class Writers:
    """Client threads that write until the server dies, remembering what was acknowledged.

    Thread numbers start at ``first_thread`` (they name the items): give each run on one table
    its own range (tests/proof/test_crash_cycles.py runs one per crash cycle).
    """

    def __init__(
        self, url: str, table: str, first_thread: int = 0, put_threads: int = PUT_THREADS
    ) -> None:
        self.url = url
        self.table = table
        self.killed = KillSwitch()
        self.lock = threading.Lock()
        self.acks = 0
        self.acked_puts: list[tuple[int, int]] = []
        self.attempted_puts: dict[int, int] = {}  # thread -> writes attempted
        self.acked_transfers: set[tuple[int, int]] = set()
        self.cancelled_transfers: set[tuple[int, int]] = set()
        self.attempted_transfers: dict[int, int] = {}
        self.unexpected: list[str] = []
        first = first_thread
        self.threads = [
            threading.Thread(target=self._puts, args=(first + t,)) for t in range(put_threads)
        ] + [
            threading.Thread(target=self._transfers, args=(first + t,))
            for t in range(TRANSFER_THREADS)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(60)
            assert not thread.is_alive()

    def _failed(self, exc: Exception) -> None:
        # After the kill every call fails (reset, refused): that only ends the thread.
        if not self.killed.explains_a_failure_now():
            with self.lock:
                self.unexpected.append(repr(exc))

    def _puts(self, thread: int) -> None:
        client = client_for(self.url)
        n = 0
        while True:
            self.attempted_puts[thread] = n + 1
            try:
                client.put_item(
                    TableName=self.table,
                    Item={**key(f"put-{thread}-{n}"), "n": {"N": str(n)}},
                )
            except Exception as exc:
                self._failed(exc)
                return
            with self.lock:
                self.acked_puts.append((thread, n))
                self.acks += 1
            n += 1

    def _transfers(self, thread: int) -> None:
        client = client_for(self.url)
        n = 0
        while True:
            self.attempted_transfers[thread] = n + 1
            request, _ = transfer_request(self.table, thread, n)
            try:
                client.transact_write_items(**request)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "TransactionCanceledException":
                    self._failed(exc)
                    return
                with self.lock:
                    self.cancelled_transfers.add((thread, n))
            except Exception as exc:
                self._failed(exc)
                return
            else:
                with self.lock:
                    self.acked_transfers.add((thread, n))
                    self.acks += 1
            n += 1


def assert_survived(
    get: Callable[[str], dict[str, Any] | None], table: str, runs: Sequence[Writers]
) -> None:
    """After a restart (``get`` reads an item consistently): every write the ``runs`` had
    acknowledged is there, and the transfers are whole (each account's balance is what the
    logged transfers imply, no cancelled one applied)."""
    balances = [INITIAL_BALANCE] * ACCOUNTS
    for writers in runs:
        for thread, n in writers.acked_puts:
            assert get(f"put-{thread}-{n}") == {**key(f"put-{thread}-{n}"), "n": {"N": str(n)}}
        committed: set[tuple[int, int]] = set()
        for thread, attempts in writers.attempted_transfers.items():
            for n in range(attempts):
                log = get(f"tx-{thread}-{n}")
                if log is None:
                    continue
                _, (src, dst, amount) = transfer_request(table, thread, n)
                assert (int(log["src"]["N"]), int(log["dst"]["N"])) == (src, dst)
                assert int(log["amount"]["N"]) == amount
                balances[src] -= amount
                balances[dst] += amount
                committed.add((thread, n))
        assert writers.acked_transfers <= committed, "an acknowledged transaction was lost"
        assert not (writers.cancelled_transfers & committed), "a cancelled transaction applied"
    stored = []
    for account in range(ACCOUNTS):
        item = get(f"acct-{account}")
        assert item is not None
        stored.append(int(item["bal"]["N"]))
    # Each account's balance is exactly what the logged transfers imply: no transaction
    # applied its update without its log item, or half of its updates.
    assert stored == balances
    assert sum(stored) == INITIAL_BALANCE * ACCOUNTS


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize(
    ("durability", "put_threads"),
    # full with 16 concurrent writers: commits then fsyncs outside the write lock, shared by
    # many writers (group fsync); every acknowledged write must still be there.
    [("full", PUT_THREADS), ("normal", PUT_THREADS), ("full", 16 - TRANSFER_THREADS)],
)
def test_acknowledged_writes_survive_sigkill(
    tmp_path: Path, cli_server: Callable[..., Any], durability: str, put_threads: int
) -> None:
    db = tmp_path / "crash.db"
    table = "crash"
    server = cli_server("--durability", durability, db_path=db)
    try:
        setup = client_for(server.url)
        setup.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for account in range(ACCOUNTS):
            setup.put_item(
                TableName=table,
                Item={**key(f"acct-{account}"), "bal": {"N": str(INITIAL_BALANCE)}},
            )
        writers = Writers(server.url, table, put_threads=put_threads)
        writers.start()
        deadline = time.monotonic() + KILL_AFTER_S
        while writers.acks < ACKS_BEFORE_KILL and time.monotonic() < deadline:
            time.sleep(0.01)
        sigkill(server.process, writers.killed)
        writers.join()
    finally:
        server.stop(signal.SIGKILL)

    assert writers.unexpected == []
    assert writers.acks >= min(ACKS_BEFORE_KILL, 50), "too few writes before the kill"
    assert writers.acked_transfers, "no transaction was acknowledged before the kill"
    answered = len(writers.acked_puts) + len(writers.acked_transfers)
    answered += len(writers.cancelled_transfers)
    attempted = sum(writers.attempted_puts.values()) + sum(writers.attempted_transfers.values())
    assert attempted > answered, "the kill caught no write in flight"

    restarted = cli_server(db_path=db)
    try:
        check = client_for(restarted.url)

        def get(pk: str) -> dict[str, Any] | None:
            item: dict[str, Any] | None = check.get_item(
                TableName=table, Key=key(pk), ConsistentRead=True
            ).get("Item")
            return item

        assert_survived(get, table, [writers])
    finally:
        restarted.stop()
