"""Durability ``full``: nothing is answered before an fsync of the WAL covers it.

The engine fsyncs the WAL itself, after the commit and outside SQLite's write lock, so one
fsync can cover many writers' commits (storage/database.py). These tests watch the real fsyncs
(``os.fsync`` wrapped, still called) while real threads write to a real SQLite file: every
acknowledged write, every failed condition and every read must come after an fsync that covers
what it wrote or saw. The SIGKILL proof with 16 concurrent writers is in test_crash.py.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.features.indexes.maintenance import IndexConfig
from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.engine.storage import database

TABLE = "durable"


class FsyncSpy:
    """``os.fsync``, recording each call's file and when it returned (optionally slowed)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.real = os.fsync
        self.delay = delay
        self.lock = threading.Lock()
        self.calls: list[tuple[int, float]] = []  # (inode, returned at)

    def __call__(self, fd: int) -> None:
        if self.delay:
            time.sleep(self.delay)
        self.real(fd)
        with self.lock:
            self.calls.append((os.fstat(fd).st_ino, time.monotonic()))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> FsyncSpy:
    spy = FsyncSpy()
    monkeypatch.setattr(database.os, "fsync", spy)
    return spy


@pytest.fixture
def full(tmp_path: Path) -> Iterator[Engine]:
    # No background threads (the TTL sweeper, the index poller): each tick's read waits for an
    # fsync of what it saw, from its own thread, outside any deferred block, so a tick landing
    # inside a test (every second, and sooner or later on a slow machine) adds fsyncs it counts.
    with Engine(
        tmp_path / "full.db",
        durability="full",
        ttl_config=TTLConfig(sweep_interval=None),
        index_config=IndexConfig(background=False),
    ) as engine:
        DirectClient(engine).create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield engine


def _wal_inode(engine: Engine) -> int:
    return os.stat(f"{engine.path}-wal").st_ino


def _await_items(engine: Engine, count: int) -> None:
    """Wait until ``count`` items are committed, read with a connection of our own (committed
    is not durable: this read does not wait for any fsync)."""
    conn = sqlite3.connect(str(engine.path))
    try:
        while conn.execute("SELECT count(*) FROM items").fetchone()[0] < count:
            time.sleep(0.005)
    finally:
        conn.close()


@pytest.mark.parametrize("autocommit", [False, True])
def test_sixteen_writers_each_answered_after_an_fsync_covering_their_commit(
    full: Engine, spy: FsyncSpy, autocommit: bool
) -> None:
    storage = full.storage
    writes_per_thread = 40
    late: list[str] = []
    errors: list[BaseException] = []

    def writer(thread: int) -> None:
        try:
            for n in range(writes_per_thread):
                seq: list[int] = []

                def put(w: Any, key: str = f"{thread}-{n}", seq: list[int] = seq) -> None:
                    # The leader numbers its commit before running it: this write's commit.
                    seq.append(storage._commits)
                    row = storage.cached_table("us-east-1", TABLE)
                    w.put(row.id, key.encode(), b"", 1, {"pk": {"S": key}})

                storage.write(put, autocommit=autocommit)
                if storage._synced < seq[0]:
                    late.append(f"{thread}-{n}: answered at sync {storage._synced} < {seq[0]}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and late == []
    writes = 16 * writes_per_thread
    assert {inode for inode, _ in spy.calls} == {_wal_inode(full)}
    # Amortised: concurrent writers share fsyncs (each fsync covers every commit before it).
    assert 1 <= len(spy.calls) < writes
    assert storage._synced == storage._committed


def test_a_read_waits_for_the_fsync_of_a_write_it_sees(
    full: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = DirectClient(full)
    spy = FsyncSpy(delay=0.3)
    monkeypatch.setattr(database.os, "fsync", spy)
    writing = threading.Thread(
        target=client.put_item, kwargs={"TableName": TABLE, "Item": {"pk": {"S": "a"}}}
    )
    writing.start()
    # Read while the write's fsync is still running (it takes 0.3 s): committed, visible in
    # the WAL, not yet durable.
    _await_items(full, 1)
    item = client.get_item(TableName=TABLE, Key={"pk": {"S": "a"}}).get("Item")
    read_at = time.monotonic()
    writing.join(30)
    assert item == {"pk": {"S": "a"}}
    assert spy.calls and spy.calls[0][1] <= read_at  # not answered before the fsync ended


@pytest.mark.parametrize("hinted", [False, True])
def test_a_failed_condition_waits_for_the_fsync_of_the_write_it_saw(
    full: Engine, monkeypatch: pytest.MonkeyPatch, hinted: bool
) -> None:
    client = DirectClient(full)
    if hinted:
        # A failed condition leaves a hint: the next put with it reads the item first, and
        # fails from that read (items.conditional_write), outside the write path.
        fails = {"TableName": TABLE, "Item": {"pk": {"S": "x"}}}
        client.put_item(**fails)
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            client.put_item(**fails, ConditionExpression="attribute_not_exists(pk)")
    spy = FsyncSpy(delay=0.3)
    monkeypatch.setattr(database.os, "fsync", spy)
    put = {
        "TableName": TABLE,
        "Item": {"pk": {"S": "a"}},
        "ConditionExpression": "attribute_not_exists(pk)",
    }
    writing = threading.Thread(target=client.put_item, kwargs=put)
    writing.start()
    _await_items(full, 2 if hinted else 1)
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(**put)
    failed_at = time.monotonic()
    writing.join(30)
    assert spy.calls and spy.calls[0][1] <= failed_at


def test_deferred_calls_share_one_fsync_waited_for_after_the_block(
    full: Engine, spy: FsyncSpy
) -> None:
    client = DirectClient(full)
    with full.storage.deferred() as pending:
        for n in range(10):
            client.put_item(TableName=TABLE, Item={"pk": {"S": f"k{n}"}})
        assert spy.calls == []  # nothing waited inside the block
    assert pending is not None and pending.needed()
    pending.wait()
    assert len(spy.calls) == 1 and not pending.needed()
    assert full.storage._synced == full.storage._committed


def test_normal_durability_never_fsyncs_and_defers_nothing(tmp_path: Path, spy: FsyncSpy) -> None:
    with Engine(tmp_path / "normal.db", durability="normal") as engine:
        client = DirectClient(engine)
        client.list_tables()
        with engine.storage.deferred() as pending:
            client.list_tables()
        assert pending is None
    assert spy.calls == []


def test_after_a_failed_fsync_nothing_more_is_acknowledged(full: Engine) -> None:
    client = DirectClient(full)
    client.put_item(TableName=TABLE, Item={"pk": {"S": "before"}})
    storage = full.storage
    assert storage._wal_fd is not None
    os.close(storage._wal_fd)  # the next fsync fails with EBADF, a real OSError
    with pytest.raises(client.exceptions.InternalServerError):
        client.put_item(TableName=TABLE, Item={"pk": {"S": "during"}})
    with pytest.raises(client.exceptions.InternalServerError):
        client.put_item(TableName=TABLE, Item={"pk": {"S": "after"}})
    storage._wal_fd = None  # closed above: close() must not close a reused descriptor


class StuckFsync:
    """``os.fsync`` that blocks until :meth:`release` (a disk that stopped answering), then
    really syncs. ``entered`` is set once a call is blocked."""

    def __init__(self) -> None:
        self.real = os.fsync
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, fd: int) -> None:
        self.entered.set()
        self.gate.wait(60)
        self.real(fd)

    def release(self) -> None:
        self.gate.set()


def _other_table(client: DirectClient, name: str) -> None:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.put_item(TableName=name, Item={"pk": {"S": "b"}})


def test_reads_of_other_tables_do_not_wait_for_a_stuck_fsync(
    full: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27, finding 5 with durability ``full``: a write whose fsync is stuck holds up its
    own answer and every read that may have seen it, and no read of another table."""
    client = DirectClient(full)
    _other_table(client, "other")
    stuck = StuckFsync()
    monkeypatch.setattr(database.os, "fsync", stuck)
    put = {"TableName": TABLE, "Item": {"pk": {"S": "a"}}}
    writing = threading.Thread(target=client.put_item, kwargs=put)
    writing.start()
    reading_it = threading.Thread(
        target=client.get_item, kwargs={"TableName": TABLE, "Key": {"pk": {"S": "a"}}}
    )
    try:
        assert stuck.entered.wait(30)
        _await_items(full, 2)  # committed (visible in the WAL), its fsync stuck
        answers: list[Any] = []

        def reads() -> None:  # another client's reads of another table
            key = {"pk": {"S": "b"}}
            answers.append(client.get_item(TableName="other", Key=key)["Item"])
            answers.append(
                client.query(
                    TableName="other",
                    KeyConditionExpression="pk = :k",
                    ExpressionAttributeValues={":k": {"S": "b"}},
                )["Items"]
            )
            answers.append(client.scan(TableName="other")["Items"])
            answers.append(
                client.batch_get_item(RequestItems={"other": {"Keys": [key]}})["Responses"]
            )
            answers.append(client.describe_table(TableName="other")["Table"]["TableName"])

        reader = threading.Thread(target=reads)
        reader.start()
        reader.join(30)
        assert not reader.is_alive(), "a read of another table waited for the stuck fsync"
        assert answers == [
            {"pk": {"S": "b"}},
            [{"pk": {"S": "b"}}],
            [{"pk": {"S": "b"}}],
            {"other": [{"pk": {"S": "b"}}]},
            "other",
        ]
        # A read of the written table may see the write: it waits for its fsync.
        reading_it.start()
        reading_it.join(0.5)
        assert reading_it.is_alive() and writing.is_alive()
    finally:
        stuck.release()
        writing.join(30)
        if reading_it.is_alive() or reading_it.ident is not None:
            reading_it.join(30)
    assert not writing.is_alive() and not reading_it.is_alive()
    assert full.storage._synced == full.storage._committed


def test_a_read_after_another_tables_stuck_write_still_waits_for_its_own_tables_writes(
    full: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marks are per table, and a commit that changed anything but items (here a new
    table: the catalog) is one every read waits for."""
    client = DirectClient(full)
    _other_table(client, "other")
    storage = full.storage
    committed = storage._committed
    assert storage._marks[storage.cached_table("us-east-1", "other").id] == committed
    assert storage._seen_in([]) == storage._global < committed  # the put changed items only
    client.put_item(TableName=TABLE, Item={"pk": {"S": "x"}})
    table = storage.cached_table("us-east-1", TABLE).id
    assert storage._marks[table] == storage._committed > committed
    assert storage._seen_in([table]) == storage._committed
    client.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "x"}},
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "1"}},
    )
    client.create_table(
        TableName="third",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    assert storage._global == storage._committed  # the catalog changed: every read waits
