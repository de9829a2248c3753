"""Writers carrying the TTL sweep (storage/chores.py): the writer leading a batch deletes a piece
of the due items in its own transaction. Real threads and a real second process race a sweep;
failures are injected into the chore and into the batch around it."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.features import ttl as ttl_module
from firstwrite.engine.features.ttl import Expired, TTLConfig

NOW = 1_750_000_000.0


def create(ddb: Any, name: str, *, stream: bool = False) -> str | None:
    extra: dict[str, Any] = {}
    if stream:
        extra["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
    described = ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "p", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "p", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )["TableDescription"]
    ddb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"}
    )
    return described.get("LatestStreamArn")


def put_due(ddb: Any, name: str, count: int, prefix: str = "old") -> list[str]:
    """``count`` due items, each expiring a second after the previous one: the sweep deletes
    them in that order."""
    names = [f"{prefix}{i:05d}" for i in range(count)]
    for low in range(0, count, 25):
        requests = [
            {"PutRequest": {"Item": {"p": {"S": n}, "expires": {"N": str(NOW - 10_000 + i)}}}}
            for i, n in enumerate(names[low : low + 25], start=low)
        ]
        ddb.batch_write_item(RequestItems={name: requests})
    return names


def keys(ddb: Any, name: str) -> set[str]:
    pages = ddb.get_paginator("scan").paginate(TableName=name)
    return {item["p"]["S"] for page in pages for item in page["Items"]}


def names(expired: list[Expired]) -> list[str]:
    return [e.key["p"]["S"] for e in expired]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with Engine(tmp_path / "chores.db", ttl_config=TTLConfig(sweep_interval=None)) as engine:
        engine.clock.freeze(NOW)
        yield engine


def spy_pieces(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(thread name, items) of every committed sweep piece, in commit order."""
    pieces: list[tuple[str, int]] = []
    real = ttl_module._SweepChore.committed

    def committed(chore: Any, piece: Any, seq: int) -> None:
        if piece[0]:
            pieces.append((threading.current_thread().name, len(piece[0])))
        real(chore, piece, seq)

    monkeypatch.setattr(ttl_module._SweepChore, "committed", committed)
    return pieces


def post(engine: Engine) -> Any:
    """Post a sweep's chore on ``engine`` as ``sweep_now`` does (the caller withdraws it)."""
    chore = ttl_module._SweepChore(engine.ttl)
    engine.storage.post_chore(chore)
    return chore


# --- threads racing a sweep ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "durability", "memory"),
    [
        (False, "normal", False),
        (True, "normal", False),
        (False, "full", False),
        (True, "normal", True),
    ],
    ids=["statements", "through-hooks", "durability-full", "in-memory"],
)
def test_writers_racing_a_sweep_carry_it_and_every_acknowledged_write_survives(
    tmp_path: Path, stream: bool, durability: Any, memory: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = None if memory else tmp_path / "race.db"
    config = TTLConfig(sweep_interval=None)
    with Engine(path, durability=durability, ttl_config=config) as engine:
        engine.clock.freeze(NOW)
        _race(engine, stream, monkeypatch)


def _race(engine: Engine, stream: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    ddb = local_client(engine)
    create(ddb, "tbl", stream=stream)
    engine.ttl.sweep_now()  # the index's backfill
    due = put_due(ddb, "tbl", 3000)
    pieces = spy_pieces(monkeypatch)
    swept: list[Expired] = []
    sweeper = threading.Thread(target=lambda: swept.extend(engine.ttl.sweep_now()), name="sweep")
    written: list[list[str]] = [[] for _ in range(3)]
    start = threading.Barrier(4)

    def write(n: int) -> None:
        start.wait()
        while sweeper.is_alive() or len(written[n]) < 20:
            name = f"new-{n}-{len(written[n])}"
            ddb.put_item(TableName="tbl", Item={"p": {"S": name}, "expires": {"N": str(NOW)}})
            written[n].append(name)  # acknowledged

    writers = [threading.Thread(target=write, args=(n,), name=f"writer{n}") for n in range(3)]
    for thread in writers:
        thread.start()
    start.wait()
    sweeper.start()
    for thread in [sweeper, *writers]:
        thread.join()
    # Every due item deleted exactly once, reported in deletion (expiry) order; every
    # acknowledged write is there (items expiring at NOW are not due: strictly before).
    assert names(swept) == due
    assert keys(ddb, "tbl") == {name for names_ in written for name in names_}
    # The writers carried pieces of it in their own transactions (the sweeper's own pieces
    # are only for an idle engine).
    carried = sum(items for thread, items in pieces if thread.startswith("writer"))
    assert carried > 0 and sum(items for _, items in pieces) == len(due)


_SWEEP_AND_WRITE = textwrap.dedent(
    """
    import json, sys, threading
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client
    from firstwrite.engine.features.ttl import TTLConfig
    path, tag = sys.argv[1], sys.argv[2]
    with Engine(path, ttl_config=TTLConfig(sweep_interval=None)) as engine:
        engine.clock.freeze(float(sys.argv[3]))
        ddb = local_client(engine)
        print("ready", flush=True)
        sys.stdin.readline()
        swept = []
        sweeper = threading.Thread(target=lambda: swept.extend(engine.ttl.sweep_now()))
        sweeper.start()
        written = []
        while sweeper.is_alive() or len(written) < 20:
            name = f"{tag}-{len(written)}"
            ddb.put_item(TableName="tbl", Item={"p": {"S": name}})
            written.append(name)
        sweeper.join()
        print(json.dumps({"swept": [e.key["p"]["S"] for e in swept], "written": written}))
    """
)


def test_two_processes_sweeping_one_file_with_writers_delete_each_item_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    with Engine(path, ttl_config=TTLConfig(sweep_interval=None)) as engine:
        engine.clock.freeze(NOW)
        ddb = local_client(engine)
        create(ddb, "tbl")
        engine.ttl.sweep_now()
        due = put_due(ddb, "tbl", 3000)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _SWEEP_AND_WRITE, str(path), tag, str(NOW)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    for child in children:  # go together
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        results.append(json.loads(out.splitlines()[-1]))
    swept = results[0]["swept"] + results[1]["swept"]
    assert sorted(swept) == due  # each due item deleted once, by one process or the other
    with Engine(path, ttl_config=TTLConfig(sweep_interval=None)) as engine:
        assert keys(local_client(engine), "tbl") == set(
            results[0]["written"] + results[1]["written"]
        )


# --- failures ------------------------------------------------------------------------------------


def test_a_piece_in_a_batch_that_rolls_back_is_not_reported_and_is_redone(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ddb = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
    create(ddb, "tbl")
    engine.ttl.sweep_now()
    due = put_due(ddb, "tbl", 40)
    chore = post(engine)
    storage = engine.storage
    real_conn = storage._writer_conn
    failures = [0]

    class FailingCommits:
        """The writer's connection, its first two COMMITs failing (as a full disk would)."""

        in_transaction = property(lambda self: real_conn.in_transaction)

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT" and failures[0] < 2:
                failures[0] += 1
                raise sqlite3.OperationalError("injected: the COMMIT fails")
            return real_conn.execute(sql, *args)

    monkeypatch.setattr(storage, "_writer_conn", FailingCommits())
    for n in range(2):
        with pytest.raises(ClientError, match="InternalServerError"):
            ddb.put_item(TableName="tbl", Item={"p": {"S": f"lost{n}"}})
    assert chore.deleted == [] and keys(ddb, "tbl") == set(due)  # both pieces rolled back
    n = 0
    while not chore.done.is_set() and n < 100:
        ddb.put_item(TableName="tbl", Item={"p": {"S": f"new{n}"}})
        n += 1
    assert chore.done.is_set() and chore.error is None and failures[0] == 2
    engine.storage.post_chore(None)
    assert names(chore.deleted) == due  # redone by later writers, each item once
    assert keys(ddb, "tbl") == {f"new{i}" for i in range(n)}


def test_a_chore_that_raises_never_fails_the_callers_write(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ddb = local_client(engine)
    create(ddb, "tbl")
    engine.ttl.sweep_now()
    due = put_due(ddb, "tbl", 40)
    pieces = spy_pieces(monkeypatch)
    real_piece = ttl_module.TimeToLive._piece
    calls = [0]

    def piece_then_fail(ttl: Any, w: Any, idle: bool) -> Any:
        result = real_piece(ttl, w, idle)
        calls[0] += 1
        if calls[0] == 2:  # after deleting its items: the savepoint must put them back
            raise RuntimeError("injected: the chore fails")
        return result

    monkeypatch.setattr(ttl_module.TimeToLive, "_piece", piece_then_fail)
    chore = post(engine)
    with caplog.at_level(logging.ERROR):
        for n in range(3):
            ddb.put_item(TableName="tbl", Item={"p": {"S": f"new{n}"}})
    assert "a chore failed" in caplog.text
    assert isinstance(chore.error, RuntimeError) and chore.done.is_set()
    # The first piece committed; the second was rolled back alone and the chore withdrawn,
    # so the third write carried nothing. Every caller's write is there.
    assert len(pieces) == 1
    left = set(due) - set(names(chore.deleted))
    assert keys(ddb, "tbl") == left | {"new0", "new1", "new2"}
    engine.storage.post_chore(None)  # already withdrawn: nothing to do
    # A sweep whose chore fails raises (the background sweeper logs it and retries).
    calls[0] = 0
    with pytest.raises(RuntimeError, match="injected"):
        engine.ttl.sweep_now()
    monkeypatch.setattr(ttl_module.TimeToLive, "_piece", real_piece)
    rest = names(engine.ttl.sweep_now())
    assert set(rest) <= left and keys(ddb, "tbl") == {"new0", "new1", "new2"}


def test_a_put_carrying_a_piece_reports_its_own_consumed_capacity(engine: Engine) -> None:
    ddb = local_client(engine)
    create(ddb, "tbl")
    engine.ttl.sweep_now()
    item = {"p": {"S": "x"}, "payload": {"S": "y" * 1500}}
    alone = ddb.put_item(TableName="tbl", Item=item, ReturnConsumedCapacity="TOTAL")
    put_due(ddb, "tbl", 40)
    chore = post(engine)
    carrying = ddb.put_item(
        TableName="tbl", Item={**item, "p": {"S": "z"}}, ReturnConsumedCapacity="TOTAL"
    )
    assert len(chore.deleted) > 0  # this very put deleted items in its transaction
    engine.storage.post_chore(None)
    assert (
        carrying["ConsumedCapacity"]
        == alone["ConsumedCapacity"]
        == {
            "TableName": "tbl",
            "CapacityUnits": 2.0,
        }
    )


def _records(engine: Engine, arn: str) -> list[dict[str, Any]]:
    streams = local_client(engine, service_name="dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    it = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records: list[dict[str, Any]] = []
    while it:
        page = streams.get_records(ShardIterator=it)
        if not page["Records"]:
            break
        records += page["Records"]
        it = page.get("NextShardIterator")
    return records


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs between any two (ids, sequence numbers, times)."""
    data = record["dynamodb"]
    return {
        "eventName": record["eventName"],
        "userIdentity": record.get("userIdentity"),
        "Keys": data["Keys"],
        "OldImage": data.get("OldImage"),
        "NewImage": data.get("NewImage"),
        "StreamViewType": data["StreamViewType"],
        "SizeBytes": data["SizeBytes"],
    }


def test_stream_records_of_carried_deletions_are_the_sweepers_own(engine: Engine) -> None:
    ddb = local_client(engine)
    arns = {name: create(ddb, name, stream=True) for name in ("own", "carried")}
    engine.ttl.sweep_now()
    put_due(ddb, "own", 30)
    swept = names(engine.ttl.sweep_now())  # idle engine: the sweeper's own pieces
    put_due(ddb, "carried", 30)
    chore = post(engine)
    n = 0
    while not chore.done.is_set() and n < 100:  # writers to another table carry this sweep
        ddb.put_item(TableName="own", Item={"p": {"S": f"new{n}"}})
        n += 1
    assert chore.done.is_set() and n > 1  # (done before its withdrawal, which carries one)
    engine.storage.post_chore(None)
    assert names(chore.deleted) == swept
    own, carried = (_records(engine, str(arns[name])) for name in ("own", "carried"))
    removes = [_comparable(r) for r in own if r["eventName"] == "REMOVE"]
    assert len(removes) == 30 and removes[0]["userIdentity"] == {
        "Type": "Service",
        "PrincipalId": "dynamodb.amazonaws.com",
    }
    assert [_comparable(r) for r in carried if r["eventName"] == "REMOVE"] == removes
