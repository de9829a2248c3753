"""Storage: group commit, failure isolation within a batch, and cross-connection visibility."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from firstwrite.engine.errors import DynamoDBError, validation
from firstwrite.engine.storage import Storage, Writer, database

_DEFINITION = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
}


def _table(storage: Storage) -> int:
    return storage.write(lambda w: w.create_table("us-east-1", "tbl", _DEFINITION)).id


@pytest.fixture(params=["file", "memory"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    path = str(tmp_path / "s.db") if request.param == "file" else None
    store = Storage(path)
    yield store
    store.close()


def test_concurrent_writers_all_commit_each_in_exactly_one_batch(storage: Storage) -> None:
    table = _table(storage)
    batch_sizes: list[int] = []
    original = storage._run_batch

    def spy(batch: list) -> None:  # type: ignore[type-arg]
        batch_sizes.append(len(batch))
        original(batch)

    storage._run_batch = spy  # type: ignore[method-assign]

    def worker(n: int) -> None:
        for i in range(100):
            key = f"{n}-{i}".encode()
            storage.write(lambda w, key=key: w.put(table, key, b"", 1, {"pk": {"S": key.decode()}}))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    count, _ = storage.read(lambda r: r.table_stats(table))
    assert count == 800
    assert sum(batch_sizes) == 800  # every write ran in exactly one batch


def test_a_dynamodb_error_fails_only_its_own_call(storage: Storage) -> None:
    table = _table(storage)
    results: dict[str, object] = {}
    barrier = threading.Barrier(3)

    def ok(w: Writer) -> str:
        w.put(table, b"good", b"", 1, {"pk": {"S": "good"}})
        return "ok"

    def bad(w: Writer) -> str:
        raise DynamoDBError("ConditionalCheckFailedException", "The conditional request failed")

    def run(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        barrier.wait()
        try:
            results[name] = storage.write(fn)
        except DynamoDBError as exc:
            results[name] = exc.code

    threads = [
        threading.Thread(target=run, args=(n, f))
        for n, f in (("ok1", ok), ("bad", bad), ("ok2", ok))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"ok1": "ok", "ok2": "ok", "bad": "ConditionalCheckFailedException"}
    assert storage.read(lambda r: r.get(table, b"good")) == {"pk": {"S": "good"}}


def test_an_unexpected_error_rolls_back_the_whole_batch(storage: Storage) -> None:
    table = _table(storage)

    def broken(w: Writer) -> None:
        w.put(table, b"half", b"", 1, {"pk": {"S": "half"}})
        raise KeyError("bug after a write")

    with pytest.raises(DynamoDBError) as err:
        storage.write(broken)
    assert err.value.code == "InternalServerError"
    assert storage.read(lambda r: r.get(table, b"half")) is None


def test_a_second_storage_on_the_same_file_sees_committed_writes(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    first, second = Storage(path), Storage(path)
    try:
        table = _table(first)
        first.write(lambda w: w.put(table, b"k", b"", 1, {"pk": {"S": "k"}}))
        assert second.read(lambda r: r.get(table, b"k")) == {"pk": {"S": "k"}}
        assert second.read(lambda r: r.table("us-east-1", "tbl")) is not None
    finally:
        first.close()
        second.close()


def test_reopening_a_file_keeps_data_and_durability_full_works(tmp_path: Path) -> None:
    path = str(tmp_path / "durable.db")
    store = Storage(path, durability="full")
    table = _table(store)
    store.write(lambda w: w.put(table, b"k", b"", 1, {"pk": {"S": "k"}}))
    store.close()
    reopened = Storage(path)
    try:
        assert reopened.read(lambda r: r.get(table, b"k")) == {"pk": {"S": "k"}}
    finally:
        reopened.close()


def test_a_savepoint_undoes_writes_made_before_a_refusal(storage: Storage) -> None:
    table = _table(storage)

    def refuse_after_writing(w: Writer) -> None:
        w.put(table, b"undone", b"", 1, {"pk": {"S": "undone"}})
        raise DynamoDBError("ValidationException", "refused by a hook")

    with pytest.raises(DynamoDBError, match="refused by a hook"):
        storage.write(refuse_after_writing, savepoint=True)
    assert storage.read(lambda r: r.get(table, b"undone")) is None
    # The connection is still usable and later writes commit.
    storage.write(lambda w: w.put(table, b"after", b"", 1, {"pk": {"S": "after"}}))
    assert storage.read(lambda r: r.get(table, b"after")) is not None


def test_a_catalog_row_read_in_a_rolled_back_write_is_not_remembered(storage: Storage) -> None:
    """A rollback gives the table id back (AUTOINCREMENT's counter rolls back too): a row read
    inside the rolled-back write must not answer for the next table that gets the id."""

    def refused(w: Writer) -> None:
        w.create_table("us-east-1", "gone", _DEFINITION)
        assert w.table("us-east-1", "gone") is not None  # read back inside the transaction
        raise validation("refused after writing")

    with pytest.raises(DynamoDBError):
        storage.write(refused, savepoint=True)
    ranged = {
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
    }
    created = storage.write(lambda w: w.create_table("us-east-1", "kept", ranged))
    row = storage.read(lambda r: r.table("us-east-1", "kept"))
    assert row is not None and row.id == created.id
    assert (row.name, row.key_schema.range_name) == ("kept", "sk")
    assert storage.read(lambda r: r.table("us-east-1", "gone")) is None


def _batch_kinds(storage: Storage) -> list[list[bool]]:
    """Each batch the storage commits from now on, as its slots' ``background`` flags."""
    batches: list[list[bool]] = []
    original = storage._run_batch

    def spy(batch: list) -> None:  # type: ignore[type-arg]
        batches.append([slot.background for slot in batch])
        original(batch)

    storage._run_batch = spy  # type: ignore[method-assign]
    return batches


def test_a_background_write_waits_its_turn_then_runs_alone_in_its_own_thread(
    storage: Storage,
) -> None:
    table = _table(storage)
    batches = _batch_kinds(storage)
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []
    runners: dict[str, int] = {}

    def first(w: Writer) -> None:
        entered.set()
        release.wait(10)

    def call(name: str, background: bool) -> None:
        def fn(w: Writer) -> int:
            w.put(table, name.encode(), b"", 1, {"pk": {"S": name}})
            order.append(name)
            return threading.get_ident()

        runner = storage.write(fn, background=background)
        runners[name] = runner
        assert not background or runner == threading.get_ident()

    def queued(count: int) -> None:
        for _ in range(1000):
            if len(storage._pending) == count:
                return
            threading.Event().wait(0.005)
        raise AssertionError(f"{count} writes never queued")

    leader = threading.Thread(target=storage.write, args=(first,))
    leader.start()
    assert entered.wait(10)
    threads = [threading.Thread(target=call, args=("background", True))]
    threads[0].start()
    queued(1)
    for name in ("w1", "w2"):
        threads.append(threading.Thread(target=call, args=(name, False)))
        threads[-1].start()
    queued(3)
    release.set()
    for t in [leader, *threads]:
        t.join(10)
    # Its turn: after the write running when it queued, before the writers queued after it; in
    # a transaction of its own, in its own thread; the writers after it still share one.
    assert order[0] == "background" and sorted(order[1:]) == ["w1", "w2"]
    assert [False] in batches and [True] in batches and [False, False] in batches
    assert all(kinds == [True] for kinds in batches if True in kinds)
    count, _ = storage.read(lambda r: r.table_stats(table))
    assert count == 3


def test_background_and_concurrent_writers_all_commit_never_batched_together(
    storage: Storage,
) -> None:
    table = _table(storage)
    batches = _batch_kinds(storage)

    def writer(prefix: str, background: bool) -> None:
        for i in range(150):
            key = f"{prefix}{i}".encode()
            storage.write(
                lambda w, key=key: w.put(table, key, b"", 1, {"pk": {"S": key.decode()}}),
                background=background,
            )

    threads = [threading.Thread(target=writer, args=(f"w{n}-", False)) for n in range(4)]
    threads += [threading.Thread(target=writer, args=(f"b{n}-", True)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    count, _ = storage.read(lambda r: r.table_stats(table))
    assert count == 900
    assert sum(len(kinds) for kinds in batches) == 900  # every write in exactly one batch
    assert all(kinds == [True] for kinds in batches if True in kinds)
    assert storage._pending == [] and storage._backgrounds == 0


def test_a_resting_background_write_lets_writers_go_then_the_next_writer_hands_it_the_lead(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The storage's clock is the test's (no timed assertion), and no fallback timer fires.
    now = [100.0]
    monkeypatch.setattr(database, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(database, "_REST_FALLBACK_S", 600.0)
    table = _table(storage)
    batches = _batch_kinds(storage)
    order: list[str] = []
    handed: list[bool] = []
    real_rest = storage._rest

    def rest(until: float) -> bool:
        handed.append(real_rest(until))
        return handed[-1]

    monkeypatch.setattr(storage, "_rest", rest)

    def put(name: str) -> None:
        def fn(w: Writer) -> None:
            w.put(table, name.encode(), b"", 1, {"pk": {"S": name}})
            order.append(name)

        storage.write(fn)

    entered, release = threading.Event(), threading.Event()

    def first(w: Writer) -> None:
        entered.set()
        release.wait(10)
        order.append("first")

    runner: list[int] = []

    def background(w: Writer) -> None:
        order.append("background")
        runner.append(threading.get_ident())

    leader = threading.Thread(target=storage.write, args=(first,))
    leader.start()
    assert entered.wait(10)
    sweeper = threading.Thread(
        target=storage.write, args=(background,), kwargs={"background": True, "rest_until": 101.0}
    )
    sweeper.start()
    for _ in range(1000):
        if storage._rest_until == 101.0:
            break
        threading.Event().wait(0.005)
    release.set()
    leader.join(10)
    for name in ("w1", "w2", "w3"):  # resting, it is in nobody's way
        put(name)
    assert order == ["first", "w1", "w2", "w3"] and sweeper.is_alive()
    now[0] = 101.0
    put("w4")  # coming after the rest's end, it hands the lead on and waits behind it
    sweeper.join(10)
    assert order == ["first", "w1", "w2", "w3", "background", "w4"]
    assert handed == [True] and runner == [sweeper.ident]
    assert batches[-2:] == [[True], [False]]
    assert not storage._leading and storage._rest_until == 0.0
    put("w5")  # and the lead came back
    assert order[-1] == "w5"


def test_resting_background_writes_among_busy_writers_all_commit_and_leave_no_lead_behind(
    storage: Storage,
) -> None:
    # Hand-overs at arrival and at a finish with writers queued, racing for real.
    table = _table(storage)
    batches = _batch_kinds(storage)

    def writer(prefix: str) -> None:
        for i in range(200):
            key = f"{prefix}{i}".encode()
            storage.write(lambda w, key=key: w.put(table, key, b"", 1, {"pk": {"S": key.decode()}}))

    def sweeper() -> None:
        for i in range(100):
            key = f"b{i}".encode()
            storage.write(
                lambda w, key=key: w.put(table, key, b"", 1, {"pk": {"S": key.decode()}}),
                background=True,
                rest_until=time.monotonic() + 0.0002,
            )

    threads = [threading.Thread(target=writer, args=(f"w{n}-",)) for n in range(4)]
    threads.append(threading.Thread(target=sweeper))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    count, _ = storage.read(lambda r: r.table_stats(table))
    assert count == 900
    assert sum(len(kinds) for kinds in batches) == 900
    assert all(kinds == [True] for kinds in batches if True in kinds)
    assert storage._pending == [] and not storage._leading and not storage._granted
    assert storage._rest_until == 0.0
