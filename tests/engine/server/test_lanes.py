"""Where the server runs engine calls: the lane (one thread, batches) and the byte budget."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.engine.server.lanes import ByteBudget, Lane, Pending

TABLE = {
    "TableName": "lane",
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}


def test_the_lane_runs_jobs_in_order_on_its_thread() -> None:
    lane = Lane(name="test-lane")
    try:

        async def main() -> list[object]:
            seen: list[tuple[int, str]] = []

            def job(n: int) -> int:
                seen.append((n, threading.current_thread().name))
                return n * n

            def fail() -> None:
                raise KeyError("boom")

            futures = [lane.submit(job, n) for n in range(50)]
            failing = lane.submit(fail)
            results = await asyncio.gather(*futures)
            with pytest.raises(KeyError):
                await failing
            assert seen == [(n, "test-lane") for n in range(50)]
            return list(results)

        assert asyncio.run(main()) == [n * n for n in range(50)]
        assert not lane.stuck()
    finally:
        lane.close()


def test_a_batch_waits_for_its_scope_on_another_thread_while_the_lane_goes_on(
    tmp_path: Path,
) -> None:
    # The real scope: an engine with durability full, its fsync held until released.
    # No TTL sweeper: its reads sync too, and an fsync held on its thread would let the test
    # see "held" before the lane has even run the write (then batched with the next call).
    engine = Engine(tmp_path / "full.db", durability="full", ttl_config=TTLConfig(None))
    client = DirectClient(engine)
    client.list_tables()
    release = threading.Event()
    storage = engine.storage
    real_sync = storage._sync
    held: list[int] = []

    def held_sync(seq: int) -> None:
        if threading.current_thread().name.endswith("-settler"):  # only the lane's settler
            held.append(seq)
            release.wait(30)
        real_sync(seq)

    storage._sync = held_sync  # type: ignore[method-assign]
    lane = Lane(scope=storage.deferred)
    try:

        async def main() -> None:
            write = lane.submit(lambda: client.create_table(**TABLE))
            while not held:  # the write's batch is waiting for its fsync on the settler
                await asyncio.sleep(0.01)
            assert not write.done()
            # The lane itself is free: a call touching no storage answers meanwhile.
            assert await lane.submit(lambda: "free") == "free"
            assert not write.done()
            release.set()
            assert (await write)["TableDescription"]["TableName"] == TABLE["TableName"]
            assert storage._synced >= held[0]

        asyncio.run(main())
    finally:
        release.set()
        lane.close()
        engine.close()


class _SyncedRightAfterLook:
    """A call's real wait (storage.Pending), but every "needed" answered True is followed at once
    by the real fsync, as when the fsync another thread runs ends just after the lane's look."""

    def __init__(self, real: Pending) -> None:
        self.real = real

    def needed(self) -> bool:
        answer = self.real.needed()
        if answer:
            self.real.wait()
        return answer

    def wait(self) -> None:
        self.real.wait()

    def split(self) -> Pending:
        return _SyncedRightAfterLook(self.real.split())


class _SplitsSyncRightAfterLook(_SyncedRightAfterLook):
    """The batch's own wait, looked at plainly; what each of its calls depends on (split)
    syncs right after the lane's look."""

    def needed(self) -> bool:
        return self.real.needed()


def test_a_call_whose_fsync_ends_while_the_lane_sorts_its_batch_is_answered(
    tmp_path: Path,
) -> None:
    # Found by the linearizability proof (durability full, a loaded machine): the lane looked
    # at each call's wait twice, once for "ready" and once for "left"; an fsync of another
    # thread ending between the two looks put the call in neither list, and its request got
    # no answer at all (the client's 30 s read timeout), while every other call was answered.
    engine = Engine(tmp_path / "full.db", durability="full", ttl_config=TTLConfig(None))
    client = DirectClient(engine)
    client.create_table(**TABLE)
    storage = engine.storage

    @contextlib.contextmanager
    def scope() -> Iterator[Pending | None]:
        with storage.deferred() as pending:
            yield None if pending is None else _SplitsSyncRightAfterLook(pending)

    lane = Lane(scope=scope)
    try:

        async def main() -> None:
            for n in range(5):
                item = {"pk": {"S": f"k{n}"}}
                put = lane.submit(lambda item=item: client.put_item(TableName="lane", Item=item))
                await asyncio.wait_for(put, 10)
                got = client.get_item(TableName="lane", Key=item, ConsistentRead=True)
                assert got["Item"] == item

        asyncio.run(main())
    finally:
        lane.close()
        engine.close()


def test_the_lane_says_when_it_is_stuck() -> None:
    lane = Lane()
    release = threading.Event()
    try:

        async def main() -> None:
            waiting = lane.submit(release.wait, 10)
            while not lane.stuck():
                await asyncio.sleep(0.01)
            release.set()
            assert await waiting is True
            while lane.stuck():
                await asyncio.sleep(0.01)

        asyncio.run(main())
    finally:
        release.set()
        lane.close()


def test_the_budget_admits_in_order_within_its_bytes() -> None:
    async def main() -> list[str]:
        budget = ByteBudget(100)
        events: list[str] = []
        gates = {name: asyncio.Event() for name in "abcd"}

        async def request(name: str, size: int) -> None:
            granted = await budget.acquire(size)
            events.append(f"+{name}")
            await gates[name].wait()
            events.append(f"-{name}")
            budget.release(granted)

        tasks = [
            asyncio.create_task(request("a", 60)),
            asyncio.create_task(request("b", 60)),  # waits: 60 + 60 > 100
            asyncio.create_task(request("c", 10)),  # waits behind b: first come, first served
            asyncio.create_task(request("d", 500)),  # more than the budget: runs alone
        ]
        await asyncio.sleep(0.01)
        assert events == ["+a"] and budget.available == 40
        gates["a"].set()
        await asyncio.sleep(0.01)
        assert events == ["+a", "-a", "+b", "+c"] and budget.available == 30
        gates["b"].set()
        gates["c"].set()
        await asyncio.sleep(0.01)
        assert events[-1] == "+d" and budget.available == 0
        gates["d"].set()
        await asyncio.gather(*tasks)
        assert budget.available == 100
        return events

    asyncio.run(main())


def test_a_cancelled_wait_gives_its_place_back() -> None:
    async def main() -> None:
        budget = ByteBudget(100)
        first = await budget.acquire(80)
        waiting = asyncio.create_task(budget.acquire(50))
        small = asyncio.create_task(budget.acquire(10))
        await asyncio.sleep(0.01)
        assert not waiting.done() and not small.done()  # small waits behind the 50
        waiting.cancel()
        await asyncio.sleep(0.01)
        assert small.done() and budget.available == 10  # admitted once the 50 left the queue
        budget.release(first)
        budget.release(small.result())
        assert budget.available == 100

    asyncio.run(main())
