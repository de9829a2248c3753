"""The TTL sweeper sharing an engine with its writers: slices in turn with them, the index
re-checked rather than obeyed, and a sweep killed mid-way (a real process, SIGKILL)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.engine.item_keys import item_key

NOW = 1_750_000_000.0


def create(ddb: Any, name: str, *, stream: bool = False) -> None:
    extra: dict[str, Any] = {}
    if stream:
        extra["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "p", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "p", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    ddb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"}
    )


def put_many(ddb: Any, name: str, prefix: str, count: int, expires: float) -> None:
    for low in range(0, count, 25):
        requests = [
            {"PutRequest": {"Item": {"p": {"S": f"{prefix}{i}"}, "expires": {"N": str(expires)}}}}
            for i in range(low, min(low + 25, count))
        ]
        ddb.batch_write_item(RequestItems={name: requests})


def keys(ddb: Any, name: str) -> set[str]:
    pages = ddb.get_paginator("scan").paginate(TableName=name)
    return {item["p"]["S"] for page in pages for item in page["Items"]}


@pytest.mark.parametrize("stream", [False, True], ids=["statements", "through-hooks"])
def test_a_sweep_shares_the_engine_with_a_writer_slice_by_slice(
    tmp_path: Path, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Engine(tmp_path / "ttl.db", ttl_config=TTLConfig(sweep_interval=None)) as engine:
        engine.clock.freeze(NOW)
        ddb = local_client(engine)
        create(ddb, "tbl", stream=stream)
        put_many(ddb, "tbl", "old", 1500, NOW - 60)
        put_many(ddb, "tbl", "live", 100, NOW + 60)
        storage = engine.storage
        sweeps: list[int] = []
        mixed: list[list[bool]] = []
        original = storage._run_batch

        def spy(batch: list) -> None:  # type: ignore[type-arg]
            kinds = [slot.background for slot in batch]
            if any(kinds):
                sweeps.append(1)
                if len(kinds) > 1:
                    mixed.append(kinds)
            original(batch)

        monkeypatch.setattr(storage, "_run_batch", spy)
        swept: list[Any] = []
        sweeper = threading.Thread(target=lambda: swept.extend(engine.ttl.sweep_now()))
        sweeper.start()
        written = 0
        while sweeper.is_alive() or written < 50:
            ddb.put_item(
                TableName="tbl", Item={"p": {"S": f"new{written}"}, "expires": {"N": str(NOW)}}
            )
            written += 1
        sweeper.join()
        assert sorted(d.key["p"]["S"] for d in swept) == sorted(f"old{i}" for i in range(1500))
        assert keys(ddb, "tbl") == {f"live{i}" for i in range(100)} | {
            f"new{i}" for i in range(written)
        }
        assert len(sweeps) > 1 and mixed == []  # in slices, none shared with the writer's calls


@pytest.mark.parametrize("stream", [False, True], ids=["statements", "through-hooks"])
def test_an_index_entry_that_disagrees_with_its_item_is_repaired_not_obeyed(
    tmp_path: Path, stream: bool
) -> None:
    with Engine(tmp_path / "ttl.db", ttl_config=TTLConfig(sweep_interval=None)) as engine:
        engine.clock.freeze(NOW)
        ddb = local_client(engine)
        create(ddb, "tbl", stream=stream)
        assert engine.ttl.sweep_now() == []  # the index's backfill, done before the corruption
        put_many(ddb, "tbl", "k", 3, NOW + 60)
        ddb.put_item(TableName="tbl", Item={"p": {"S": "plain"}})
        # A writer that bypassed the hooks (none does): entries say due, or due for an item
        # without the attribute, one says nothing for an item that is due.
        row = engine.storage.cached_table("us-east-1", "tbl")
        assert row is not None

        def corrupt(w: Any) -> None:
            for name in ("k0", "plain"):
                w.ttl_set(row.id, *item_key(row.key_schema, {"p": {"S": name}}), NOW - 30)
            w.ttl_clear(row.id, *item_key(row.key_schema, {"p": {"S": "k1"}}))

        engine.storage.write(corrupt)
        assert engine.ttl.sweep_now() == []
        assert keys(ddb, "tbl") == {"k0", "k1", "k2", "plain"}
        engine.clock.advance(61)
        # k0's entry points at its real expiry again; k1's stays missing (no sweep scans).
        assert sorted(d.key["p"]["S"] for d in engine.ttl.sweep_now()) == ["k0", "k2"]
        assert keys(ddb, "tbl") == {"k1", "plain"}


_SWEEP = textwrap.dedent(
    """
    import sys, threading
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client
    from firstwrite.engine.features.ttl import TTLConfig
    with Engine(sys.argv[1], ttl_config=TTLConfig(sweep_interval=None)) as engine:
        writing = threading.Event()
        def write():  # a writer carrying the sweep's pieces when the kill lands
            ddb = local_client(engine)
            for n in range(10**9):
                ddb.put_item(TableName="tbl", Item={"p": {"S": f"w{n}"}})
                writing.set()
        if sys.argv[2] == "writers":
            threading.Thread(target=write, daemon=True).start()
            writing.wait()
        print("sweeping", flush=True)
        engine.ttl.sweep_now()
        print("done", flush=True)
    """
)


@pytest.mark.parametrize("writers", ["idle", "writers"])
def test_a_sweep_killed_mid_way_leaves_items_and_index_consistent(
    tmp_path: Path, writers: str
) -> None:
    path = tmp_path / "killed.db"
    expired, live = 20_000, 500
    with Engine(path, ttl_config=TTLConfig(sweep_interval=None)) as engine:
        ddb = local_client(engine)
        create(ddb, "tbl")
        engine.ttl.sweep_now()  # the (empty) table's backfill: the child only deletes
        now = engine.clock.now()
        put_many(ddb, "tbl", "old", expired, now - 60)
        put_many(ddb, "tbl", "live", live, now + 3600)
    child = subprocess.Popen(
        [sys.executable, "-c", _SWEEP, str(path), writers], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "sweeping\n"
        watcher = sqlite3.connect(path)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # The items with an expiry (the writers' have none, and add to the items as the
            # sweep takes from them): a few slices in.
            (count,) = watcher.execute("SELECT count(*) FROM ttl_expiry").fetchone()
            if count < expired + live - 500:
                break
            time.sleep(0.002)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    (entries,) = watcher.execute("SELECT count(*) FROM ttl_expiry").fetchone()
    (written,) = watcher.execute(
        "SELECT count(*) FROM items i WHERE NOT EXISTS (SELECT 1 FROM ttl_expiry e "
        "WHERE i.table_id = e.table_id AND i.pk = e.pk AND i.sk = e.sk)"
    ).fetchone()
    (items,) = watcher.execute("SELECT count(*) FROM items").fetchone()
    left = items - written  # the writers' items have no expiry: no entry
    assert live < left < expired + live, "the kill did not land mid-sweep"
    # Every item still has its entry, and every entry its item: no slice was half applied.
    (orphans,) = watcher.execute(
        "SELECT count(*) FROM ttl_expiry e WHERE NOT EXISTS "
        "(SELECT 1 FROM items i WHERE i.table_id = e.table_id AND i.pk = e.pk AND i.sk = e.sk)"
    ).fetchone()
    watcher.close()
    assert (entries, orphans) == (left, 0)
    with Engine(path, ttl_config=TTLConfig(sweep_interval=None)) as engine:
        swept = engine.ttl.sweep_now()
        assert len(swept) == left - live
        after = keys(local_client(engine), "tbl")
        assert after == {f"live{i}" for i in range(live)} | {f"w{n}" for n in range(written)}
        assert (written > 0) == (writers == "writers")
