"""The point-in-time crash proof: SIGKILL a server mid-write with recovery on; after a restart,
a restore to a moment before the kill gives exactly the writes acknowledged up to it.

The server's clock is frozen an hour in the past and moved forward one second per *phase*:
writer threads each make their phase's writes (a put of a new item, an update of the thread's
counter, a delete of the item put two phases before), then meet at a barrier while the clock
moves on. So every write of phase ``s`` is stamped ``base + s``, and "the moment
``base + s + 0.5``" is well defined: it has every write of phases up to ``s`` and none after.
The server is killed during some phase; a new server on the same file (its clock, kept frozen
in the file, reset to the real one, an hour later) restores the table to the middle of every phase and compares each with the state
the acknowledged writes imply. In the phase the kill cut short, the one write each thread had
in flight may or may not be there; every acknowledged one must.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from botocore.exceptions import ClientError

from engine.storage.test_crash import client_for
from engine_process import KillSwitch, sigkill

THREADS = 3
KILL_AFTER_PHASES = 12  # the kill comes during this phase or the next
TABLE = "ledger"
BASE_AGO_S = 3600.0  # the frozen clock starts this long before the real one


def item_key(name: str) -> dict[str, Any]:
    return {"pk": {"S": name}}


class Writers:
    """THREADS writers, phase by phase, each remembering its acknowledged writes in order
    as (phase, op, key, value) and the one it had in flight when the server died."""

    def __init__(self, url: str, base: float) -> None:
        self.url = url
        self.base = base
        self.killed = KillSwitch()
        self.phase = 0
        self.acked: dict[int, list[tuple[int, str, str, int]]] = {t: [] for t in range(THREADS)}
        self.in_flight: dict[int, tuple[int, str, str, int] | None] = dict.fromkeys(range(THREADS))
        self.unexpected: list[str] = []
        self.phase_done = threading.Event()
        self.barrier = threading.Barrier(THREADS, action=self._next_phase)
        self.threads = [threading.Thread(target=self._run, args=(t,)) for t in range(THREADS)]

    def _next_phase(self) -> None:
        """Run by the last thread to reach the barrier: every write of the phase is
        acknowledged; move the server's clock on by one second."""
        self.phase += 1
        answer = httpx.post(
            f"{self.url}/_firstwrite/clock", json={"freeze": True, "set": self.base + self.phase}
        )
        assert answer.status_code == 200
        if self.phase >= KILL_AFTER_PHASES:
            self.phase_done.set()

    def _run(self, thread: int) -> None:
        client = client_for(self.url)
        try:
            while True:
                phase = self.phase
                for op, name, value in (
                    ("put", f"k-{thread}-{phase}", phase),
                    ("update", f"c-{thread}", phase),
                    ("delete", f"k-{thread}-{phase - 2}", 0),
                ):
                    self.in_flight[thread] = (phase, op, name, value)
                    if op == "put":
                        client.put_item(
                            TableName=TABLE, Item={**item_key(name), "v": {"N": str(value)}}
                        )
                    elif op == "update":
                        client.update_item(
                            TableName=TABLE,
                            Key=item_key(name),
                            UpdateExpression="SET v = :v",
                            ExpressionAttributeValues={":v": {"N": str(value)}},
                        )
                    else:
                        client.delete_item(TableName=TABLE, Key=item_key(name))
                    self.acked[thread].append((phase, op, name, value))
                    self.in_flight[thread] = None
                self.barrier.wait(60)
        except threading.BrokenBarrierError:
            return
        except (ClientError, Exception) as exc:  # after the kill every call fails
            if not self.killed.explains_a_failure_now():
                self.unexpected.append(repr(exc))
            self.barrier.abort()


def apply(state: dict[str, int], op: tuple[int, str, str, int]) -> None:
    _phase, kind, name, value = op
    if kind == "delete":
        state.pop(name, None)
    else:
        state[name] = value


def states_at(writers: Writers, phase: int) -> list[dict[str, int]]:
    """Every state the table may show at ``base + phase + 0.5``: the writes acknowledged up to
    that phase, plus, for each thread whose in-flight write belongs to it, with or without
    that write."""
    candidates: list[dict[str, int]] = [{}]
    for thread in range(THREADS):
        mine: dict[str, int] = {}
        for op in writers.acked[thread]:
            if op[0] <= phase:
                apply(mine, op)
        options = [mine]
        flight = writers.in_flight[thread]
        if flight is not None and flight[0] <= phase:
            with_it = dict(mine)
            apply(with_it, flight)
            options.append(with_it)
        candidates = [{**c, **o} for c in candidates for o in options]
    return candidates


def test_a_point_in_time_restore_after_sigkill_has_exactly_the_acknowledged_writes(
    tmp_path: Path, cli_server: Callable[..., Any]
) -> None:
    db = tmp_path / "pitr-crash.db"
    server = cli_server(db_path=db)
    base = float(int(httpx.get(f"{server.url}/_firstwrite/clock").json()["now"] - BASE_AGO_S))
    try:
        assert (
            httpx.post(
                f"{server.url}/_firstwrite/clock", json={"freeze": True, "set": base}
            ).status_code
            == 200
        )
        setup = client_for(server.url)
        setup.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        setup.update_continuous_backups(
            TableName=TABLE,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )
        writers = Writers(server.url, base)
        for thread in writers.threads:
            thread.start()
        assert writers.phase_done.wait(120), "the writers never got through their phases"
        sigkill(server.process, writers.killed)
        for thread in writers.threads:
            thread.join(60)
            assert not thread.is_alive()
    finally:
        server.stop(signal.SIGKILL)

    assert writers.unexpected == []
    last = writers.phase
    assert last >= KILL_AFTER_PHASES

    restarted = cli_server(db_path=db)
    try:
        # The file kept the frozen clock (the engine's clock survives a restart); the new
        # server goes back to the real one, an hour on, when every phase is restorable.
        kept = httpx.get(f"{restarted.url}/_firstwrite/clock").json()
        assert kept["frozen"] and kept["now"] >= base + last, kept
        reset = httpx.post(f"{restarted.url}/_firstwrite/clock", json={"reset": True})
        assert reset.status_code == 200
        check = client_for(restarted.url)
        for phase in range(last + 1):
            target = f"{TABLE}-at-{phase}"
            check.restore_table_to_point_in_time(
                SourceTableName=TABLE, TargetTableName=target, RestoreDateTime=base + phase + 0.5
            )
            items = check.scan(TableName=target, ConsistentRead=True)["Items"]
            restored = {i["pk"]["S"]: int(i["v"]["N"]) for i in items}
            candidates = states_at(writers, phase)
            assert restored in candidates, f"phase {phase}: {restored} not in {candidates}"
            if phase < last:  # a whole phase: exactly one state
                assert len(candidates) == 1
    finally:
        restarted.stop()
