"""The crash proof, repeated: SIGKILL the server again and again under concurrent load.

Each cycle starts ``firstwrite engine serve`` on the same database file and port, checks what the
previous kill left, then loads it from every side at once and kills it with SIGKILL:

* tests/engine/storage/test_crash.py's writers: PutItems, and transfers between accounts as
  TransactWriteItems (with ``--durability full`` concurrent writers share commits: group
  commit);
* TTL: items expiring while the engine clock is driven forward, swept (``--ttl-sweep-interval
  0.05``) into a stream as the server dies, on a table with a global secondary index (index
  maintenance);
* replication: writes from two regions to a global table, queued and applied as it dies;
* the idempotency layer: worker processes (never killed) running every key once, riding
  through the crashes on the layer's own retries.

After every restart: every acknowledged write present, every transaction whole, both replicas
equal and holding every acknowledged write (after a flush), every TTL item present or removed
with exactly one REMOVE record (and every item with its INSERT record), the GSI holding exactly
the table's items. At the end: the clock
is moved past every expiry and the sweeper must delete every TTL item left (the expiry index
survived), every layer key is COMPLETED, its side effect ran exactly once (the line in an
fsynced file), and its business write, committed with its completion, exactly once.
docs/guarantees.md promises both while workers stay alive, which they do here.

Short form: a few cycles per durability mode; ``FIRSTWRITE_PROOF=long``: at least 20.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from crash_load import (
    BUSINESS_TABLE,
    CRASH_TABLE,
    GLOBAL_TABLE,
    IDEM_TABLE,
    REGIONS,
    TTL_INDEX,
    TTL_TABLE,
    ClockDriver,
    ReplicaWriters,
    TtlWriters,
    admin,
    client,
    create_tables,
    free_port,
    layer_worker,
    scan,
    stream_records,
)
from proofkit import (
    proof_summary,  # noqa: F401  (lists the numbers at the end)
    report,
    scale,
)

from engine.storage.test_crash import ACCOUNTS, INITIAL_BALANCE, Writers, assert_survived, key
from engine_process import HttpServer, sigkill, start_server
from firstwrite.idempotency import Idempotency, IdempotencyConfig, Status

pytestmark = [pytest.mark.slow, pytest.mark.crash]

CYCLES = scale(2, 20)
ACKS_PER_CYCLE = scale(60, 300)  # writer acknowledgements before the kill is armed...
KILL_WITHIN_S = 0.3  # ...then it comes at a random instant within this
CYCLE_LIMIT_S = 20.0  # or after this, whatever the count
LAYER_WORKERS = 2  # processes, each running every key (so each key is raced by both)
SWEEP_WAIT_S = 60.0


class Run:
    """Everything acknowledged so far, over all cycles."""

    def __init__(self) -> None:
        self.writers: list[Writers] = []
        self.ttl: dict[str, dict[str, Any]] = {}
        self.replicated: dict[str, dict[str, Any]] = {}
        self.acks = Counter[str]()
        self.in_flight_at_kill = 0


def serve(db: Path, durability: str, port: int) -> HttpServer:
    return start_server(
        db, "--durability", durability, "--port", str(port), "--ttl-sweep-interval", "0.05"
    )


def verify(url: str, run: Run) -> None:
    """What must hold after any restart."""
    snapshot = scan(url, CRASH_TABLE)
    assert_survived(snapshot.get, CRASH_TABLE, run.writers)

    admin(url, "replication", {"flush": True})
    replicas = [scan(url, GLOBAL_TABLE, region) for region in REGIONS]
    for pk_, item in run.replicated.items():
        for region, replica in zip(REGIONS, replicas, strict=True):
            assert replica.get(pk_) == item, f"acknowledged {pk_} missing in {region}"
    assert replicas[0] == replicas[1], "the replicas diverged"

    # The TTL sweeper (every 0.05 s) may delete items between two scans, and only deletes
    # (no writer runs now): the index, scanned between two scans of its table, holds every item
    # the later scan has and none the earlier one lacks, each as the table has it.
    items = scan(url, TTL_TABLE)
    indexed = scan(url, TTL_TABLE, index=TTL_INDEX)
    after = scan(url, TTL_TABLE)
    assert after.items() <= indexed.items() <= items.items(), "the GSI differs from its table"
    records = stream_records(url, TTL_TABLE)
    inserts = Counter(
        r["dynamodb"]["Keys"]["pk"]["S"] for r in records if r["eventName"] == "INSERT"
    )
    removes = Counter(
        r["dynamodb"]["Keys"]["pk"]["S"] for r in records if r["eventName"] == "REMOVE"
    )
    for r in records:
        if r["eventName"] == "REMOVE":
            assert r.get("userIdentity", {}).get("Type") == "Service", r  # only TTL deletes
    assert {k for k, n in removes.items() if n > 1} == set(), "an item was removed twice"
    remaining = scan(url, TTL_TABLE)  # after the records: each REMOVE read was made before it
    assert set(removes) & set(remaining) == set(), "an item with a REMOVE record is still there"
    assert set(inserts) >= set(items), "an item without its INSERT record"
    assert set(inserts) <= set(items) | set(removes), "an INSERT record without its item"
    for pk_, item in run.ttl.items():
        if pk_ in items:
            assert items[pk_] == item
        else:
            assert removes[pk_] == 1, f"acknowledged {pk_} vanished without a TTL REMOVE"
    run.acks["ttl_removed"] = len(removes)


def cycle(url: str, server: HttpServer, run: Run, number: int, rng: random.Random) -> None:
    admin(url, "replication", {"lag": 0.05})
    writers = Writers(url, CRASH_TABLE, first_thread=number * 10)
    ttl = TtlWriters(url, number)
    replicas = ReplicaWriters(url, number)
    clock = ClockDriver(url)
    loads = [writers, ttl, replicas, clock]
    clock.start()
    for load in loads[:3]:
        load.start()
    deadline = time.monotonic() + CYCLE_LIMIT_S
    while writers.acks < ACKS_PER_CYCLE and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(rng.random() * KILL_WITHIN_S)
    sigkill(server.process, *(load.killed for load in loads))
    server.stop()
    for load in loads:
        load.join()
    assert writers.unexpected == [] and ttl.unexpected == [] and replicas.unexpected == []
    assert writers.acks > 0 and ttl.acked and replicas.acked, "a load made no progress"
    answered = len(writers.acked_puts) + len(writers.acked_transfers)
    answered += len(writers.cancelled_transfers)
    attempted = sum(writers.attempted_puts.values()) + sum(writers.attempted_transfers.values())
    run.in_flight_at_kill += attempted - answered
    run.writers.append(writers)
    run.ttl.update(ttl.acked)
    run.replicated.update(replicas.acked)
    run.acks["puts"] += len(writers.acked_puts)
    run.acks["transactions"] += len(writers.acked_transfers)
    run.acks["cancelled"] += len(writers.cancelled_transfers)
    run.acks["ttl_puts"] += len(ttl.acked)
    run.acks["replicated_puts"] += len(replicas.acked)
    run.acks["clock_advanced_s"] += int(clock.advanced)


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_every_acknowledgement_survives_repeated_sigkill(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "crash.db"
    effects = tmp_path / "side-effects.log"
    port = free_port()
    rng = random.Random()
    server = serve(db, durability, port)
    url = server.url
    run = Run()
    stop = tmp_path / "stop-layer"
    started = time.monotonic()
    phases: defaultdict[str, float] = defaultdict(float)
    pool = ProcessPoolExecutor(LAYER_WORKERS, mp_context=multiprocessing.get_context("spawn"))
    try:
        create_tables(url)
        setup = client(url)
        for account in range(ACCOUNTS):
            setup.put_item(
                TableName=CRASH_TABLE,
                Item={**key(f"acct-{account}"), "bal": {"N": str(INITIAL_BALANCE)}},
            )
        deadline = time.time() + CYCLES * (CYCLE_LIMIT_S + 30) + 120
        workers = [
            pool.submit(layer_worker, url, seed, str(effects), str(stop), deadline)
            for seed in range(LAYER_WORKERS)
        ]
        for number in range(CYCLES):
            if number:
                mark = time.monotonic()
                server = serve(db, durability, port)
                phases["restart"] += time.monotonic() - mark
                mark = time.monotonic()
                verify(url, run)
                phases["verify"] += time.monotonic() - mark
            mark = time.monotonic()
            cycle(url, server, run, number, rng)
            phases["load"] += time.monotonic() - mark
        server = serve(db, durability, port)
        verify(url, run)

        stop.touch()
        outcomes: Counter[str] = Counter()
        began = 0
        for worker in workers:
            worked = worker.result(timeout=deadline - time.time() + 60)
            began = max(began, worked.pop("keys"))
            outcomes.update(worked)
        assert outcomes["pending"] == 0, outcomes
        assert outcomes["retries"] >= CYCLES, f"the layer never met a crash: {outcomes}"
        layer_keys = [f"{v}-{i}" for v in ("run", "with") for i in range(began)]

        # Past every expiry: the sweeper must find every TTL item left (its index survived).
        admin(url, "clock", {"advance": 4 * 3600.0})
        sweep_deadline = time.monotonic() + SWEEP_WAIT_S
        while scan(url, TTL_TABLE) and time.monotonic() < sweep_deadline:
            time.sleep(0.2)
        assert scan(url, TTL_TABLE) == {}, "TTL items the sweeper never found"
        assert scan(url, TTL_TABLE, index=TTL_INDEX) == {}, "GSI entries of deleted items"
        verify(url, run)

        lines = Counter(effects.read_text().split())
        run_keys = [k for k in layer_keys if k.startswith("run-")]
        assert {k: lines[k] for k in run_keys} == dict.fromkeys(run_keys, 1)
        assert set(lines) == set(run_keys)
        business = scan(url, BUSINESS_TABLE)
        with_keys = [k for k in layer_keys if k.startswith("with-")]
        counts = {k: int(business[f"count-{k}"]["n"]["N"]) for k in with_keys}
        assert counts == dict.fromkeys(with_keys, 1), "a business write applied twice or never"
        guard = Idempotency(IdempotencyConfig(table_name=IDEM_TABLE), client=setup)
        statuses = Counter(guard.get(k).status for k in layer_keys)  # type: ignore[union-attr]
        assert statuses == {Status.COMPLETED: len(layer_keys)}
        assert len(scan(url, IDEM_TABLE)) == len(layer_keys)
    finally:
        Path(f"{stop}.abort").touch()  # ends the workers at once if the test failed
        pool.shutdown(wait=False, cancel_futures=True)
        server.stop(signal.SIGKILL)
    report(
        CRASH_TABLE,
        durability=durability,
        cycles=CYCLES,
        seconds=round(time.monotonic() - started, 1),
        phase_seconds={k: round(v, 1) for k, v in phases.items()},
        writes_in_flight_at_kills=run.in_flight_at_kill,
        acknowledged=dict(run.acks),
        layer_keys=len(layer_keys),
        layer_outcomes=dict(outcomes),
        side_effects=sum(lines.values()),
    )
