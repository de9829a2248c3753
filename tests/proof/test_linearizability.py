"""The linearizability proof: random concurrent histories, checked by :mod:`lincheck`.

Clients race on a few hot keys per group (conditional Put/Update/Delete, consistent Get,
two-key transactions, idempotency claims through the layer) from threads of this process and
from spawned processes, and every call is recorded with its invocation and completion times.
The whole history must be linearizable against the sequential model of DynamoDB.

Targets: a real ``firstwrite engine serve`` over HTTP in both durability modes (``normal``
answers on the event loop; ``full`` runs calls on the thread pool with group commit), the engine
in process (every process opens the database file itself: SQLite's lock is the only arbiter),
and moto's server as a reference point. ``FIRSTWRITE_PROOF=long`` runs longer histories.

Negative controls, in every run: a deterministic history with a write planted behind the
recorder's back, and an engine with a fault injected (its conditions always pass), both
recorded and checked as the races are, must be rejected.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from lincheck import Op, Verdict, check
from proofkit import (
    LONG,
    proof_summary,  # noqa: F401  (lists the numbers at the end)
    report,
    scale,
    summary_ms,
)
from workload import (
    Spec,
    create_tables,
    make_client,
    make_clients,
    run_clients,
    run_process,
    start_barrier,
)

from independent_dynamodb import moto_server

pytestmark = pytest.mark.slow

THREADS = 3  # clients on threads of this process
PROCESSES = 2  # worker processes...
THREADS_PER_PROCESS = 3  # ...each with this many clients
OPS_PER_CLIENT = scale(60, 1000)
SECONDS = scale(20.0, 120.0)  # a bound: clients stop at this deadline whatever their count


# Two mixes of calls: "mixed" spreads them over two groups of three keys (half of them
# transactions), "hot" puts them all on one group (most of them transactions).
MIXES: dict[str, dict[str, Any]] = {
    "mixed": {"groups": 2, "transactions": 0.5},
    "hot": {"groups": 1, "transactions": 0.8},
}


def race(target: dict[str, Any], tag: str, mix: str, barrier: Path) -> tuple[list[Op], list[str]]:
    """Create the tables on ``target``, run every client against it, return the history."""
    spec = Spec(
        target=target,
        table=f"lin-{tag}",
        idem_table=f"lin-idem-{tag}",
        ops_per_client=OPS_PER_CLIENT,
        seed=time.time_ns(),
        barrier=str(barrier),
        **MIXES[mix],
    )
    create_tables(make_client(target), spec)
    names = [[f"p{p}.t{t}" for t in range(THREADS_PER_PROCESS)] for p in range(PROCESSES)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(PROCESSES, mp_context=context) as pool:
        futures = [pool.submit(run_process, spec, group) for group in names]
        mine = make_clients(spec, [f"main.t{t}" for t in range(THREADS)])
        start, deadline = start_barrier(barrier, PROCESSES, SECONDS)
        ops, errors = run_clients(mine, start, deadline)
        for future in futures:
            more_ops, more_errors = future.result(timeout=SECONDS + 120)
            ops += more_ops
            errors += more_errors
    return ops, errors


def concurrency(ops: list[Op]) -> tuple[int, int]:
    """(the most calls in flight at one instant, how many calls overlapped a call of another
    process): evidence that the history is a race and not a queue."""
    events = sorted(
        [(op.invoked, 0, i) for i, op in enumerate(ops)]
        + [(op.completed or op.invoked, 1, i) for i, op in enumerate(ops)]
    )
    in_flight: set[int] = set()
    crossed: set[int] = set()
    peak = 0
    for _, kind, i in events:
        if kind == 1:
            in_flight.discard(i)
            continue
        process = ops[i].client.split(".")[0]
        others = {j for j in in_flight if ops[j].client.split(".")[0] != process}
        if others:
            crossed |= others | {i}
        in_flight.add(i)
        peak = max(peak, len(in_flight))
    return peak, len(crossed)


def checked(ops: list[Op]) -> tuple[Verdict, float]:
    started = time.perf_counter()
    verdict = check(ops)
    return verdict, time.perf_counter() - started


def kinds(ops: list[Op]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in ops:
        outcome = "no-answer" if op.outcome is None else op.outcome[0]
        name = f"{type(op.call).__name__}:{outcome}"
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def record(name: str, ops: list[Op], errors: list[str], verdict: Verdict, seconds: float) -> None:
    latencies = [(op.completed - op.invoked) / 1e9 for op in ops if op.completed is not None]
    report(
        "linearizability",
        target=name,
        ops=len(ops),
        clients=THREADS + PROCESSES * THREADS_PER_PROCESS,
        peak_in_flight=concurrency(ops)[0],
        crossed_processes=concurrency(ops)[1],
        groups=verdict.groups,
        largest_group=verdict.largest_group,
        states_explored=verdict.states_explored,
        check_seconds=round(seconds, 2),
        linearizable=verdict.ok,
        no_answer=len(errors),
        no_answer_kinds=error_kinds(errors),
        outcomes=kinds(ops),
        latency=summary_ms(latencies),
    )


def error_kinds(errors: list[str]) -> dict[str, int]:
    """Calls without an answer, by the error code (or exception) they got instead."""
    counts: dict[str, int] = {}
    for error in errors:
        found = re.search(r"An error occurred \((\w+)\)", error) or re.search(r": (\w+)\(", error)
        name = found.group(1) if found else "other"
        counts[name] = counts.get(name, 0) + 1
    return counts


def assert_meaningful(ops: list[Op]) -> None:
    """The history exercised what it claims to: contention, both branches of every call."""
    seen = kinds(ops)
    for needed in (
        "Put:ok",
        "Put:failed",
        "Update:ok",
        "Update:failed",
        "Delete:ok",
        "TxWrite:ok",
        "TxWrite:cancelled",
        "TxGet:items",
        "Claim:claimed",
        "Claim:replay",
        "Complete:ok",
    ):
        assert seen.get(needed, 0) > 0, f"no {needed} in {seen}"
    peak, crossed = concurrency(ops)
    assert peak >= 3 and crossed >= len(ops) // 10, f"a queue, not a race: {peak}, {crossed}"


@pytest.mark.parametrize(
    ("durability", "mix"), [("normal", "mixed"), ("full", "mixed"), ("normal", "hot")]
)
def test_served_engine_is_linearizable(
    cli_server: Callable[..., Any], durability: str, mix: str, tmp_path: Path
) -> None:
    server = cli_server("--durability", durability, db_path=tmp_path / "lin.db")
    ops, errors = race({"url": server.url}, f"{durability}-{mix}", mix, tmp_path)
    assert errors == [], errors[:5]
    verdict, seconds = checked(ops)
    record(f"engine-http-{durability}-{mix}", ops, errors, verdict, seconds)
    assert verdict.ok, verdict.explanation
    assert_meaningful(ops)
    assert server.process.poll() is None
    assert "Traceback" not in server.log()


def test_engine_in_process_is_linearizable(tmp_path: Path) -> None:
    # Every process (and this one) opens its own Engine on the file: boto3 bound in process.
    ops, errors = race({"db": str(tmp_path / "shared.db")}, "file", "mixed", tmp_path)
    assert errors == [], errors[:5]
    verdict, seconds = checked(ops)
    record("engine-in-process-file-mixed", ops, errors, verdict, seconds)
    assert verdict.ok, verdict.explanation
    assert_meaningful(ops)


# --- every run proves the checker can fail ----------------------------------------------------
# Through the same recorder (workload.Client) and checker as the races above, on the engine in
# process, deterministically: one client, a fixed seed, calls one after another. If either
# history were accepted, a checker (or recorder) that accepts everything would pass the races.

PLANTED_SEED = 40


def sequential_history(spec: Spec, calls: int, plant: Callable[[int], None]) -> list[Op]:
    """``calls`` calls of one client of ``spec`` in a row, recorded; ``plant(n)`` before the
    n-th (a write the history does not show, or nothing)."""
    create_tables(make_client(spec.target), spec)
    (client,) = make_clients(spec, ["main.t0"])
    for n in range(calls):
        plant(n)
        group = client.rng.randrange(spec.groups)
        client._record(client._random_call(group))
    assert client.errors == [], client.errors[:5]
    return client.ops


def test_a_planted_write_the_history_does_not_show_is_rejected(tmp_path: Path) -> None:
    """A write nobody recorded (as a replica or a lost-and-replayed request would make) changes
    a key mid-history: what the recorded client reads next is an outcome no recorded order
    gives, and the checker must say so, naming the key."""
    spec = Spec(
        target={"db": str(tmp_path / "planted.db")},
        table="planted",
        idem_table="planted-idem",
        groups=1,
        seed=PLANTED_SEED,
        transactions=0.0,
    )
    ghost = make_client(spec.target)

    def plant(n: int) -> None:
        if n == 20:
            for key in ("g0-k0", "g0-k1", "g0-k2"):
                ghost.put_item(
                    TableName=spec.table,
                    Item={"pk": {"S": key}, "ver": {"N": "77"}, "val": {"S": "planted"}},
                )

    ops = sequential_history(spec, 40, plant)
    assert check(ops[:20]).ok  # the same history before the plant is fine
    verdict = check(ops)
    record("planted-violation", ops, [], verdict, 0.0)
    assert not verdict.ok
    assert set(verdict.failing_keys) <= {"g0-k0", "g0-k1", "g0-k2"} and verdict.failing_keys


def _ignoring_conditions(operation: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``operation`` with the request's ConditionExpression (and the values only it used)
    dropped: an engine whose conditional writes always go through."""

    def faulty(ctx: Any) -> Any:
        params = {
            k: v
            for k, v in ctx.params.items()
            if k not in ("ConditionExpression", "ExpressionAttributeValues")
        }
        values = {
            name: value
            for name, value in ctx.params.get("ExpressionAttributeValues", {}).items()
            if name != ":expected"  # workload._condition's only value
        }
        if values:
            params["ExpressionAttributeValues"] = values
        return operation(dataclasses.replace(ctx, params=params))

    return faulty


def test_an_engine_whose_conditions_always_pass_is_caught(
    tmp_path: Path, temp_operation: Callable[..., None]
) -> None:
    """A fault injected into the engine itself (PutItem, UpdateItem and DeleteItem write
    whatever their condition says) gives a real violation the checker finds: a create that
    wins over an existing item, an optimistic update of the wrong version."""
    from firstwrite.engine import operations

    for name in ("PutItem", "UpdateItem", "DeleteItem"):
        temp_operation(name, _ignoring_conditions(operations.DYNAMODB[name]))
    spec = Spec(
        target={"db": str(tmp_path / "faulty.db")},
        table="faulty",
        idem_table="faulty-idem",
        groups=1,
        seed=PLANTED_SEED,
        transactions=0.0,
    )
    ops = sequential_history(spec, 60, lambda n: None)
    assert not any(op.outcome is not None and op.outcome[0] == "failed" for op in ops)
    verdict = check(ops)
    record("faulty-engine", ops, [], verdict, 0.0)
    assert not verdict.ok, "an engine ignoring conditions passed the checker"


@pytest.fixture
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


MOTO_ROUNDS = scale(3, 5)


def test_moto_server_reference(moto_url: str, tmp_path: Path) -> None:
    """What the same clients find on moto's server (moto 5.x, the dev lock's), as a reference.

    Found so far, every time with the "hot" mix: moto is *not* linearizable under concurrency.
    Two clients both win a conditional create (``attribute_not_exists``), a cancelled
    transaction's writes become visible, a TransactGetItems sees half of a transaction, and
    TransactWriteItems sometimes answers 500 (``RuntimeError: dictionary changed size during
    iteration`` while it copies the table for its rollback). Its request handlers share the
    tables without a lock. The long form asserts that finding: if a moto release fixes it, it
    fails, and docs/reliability.md must be updated (the short form skips when its few rounds
    happen to find nothing). Extra evidence only: that a recorded history can be rejected is
    proved in every run, deterministically, by the planted-write and faulty-engine tests above.
    """
    violations = []
    for round_ in range(MOTO_ROUNDS):
        barrier = tmp_path / f"round{round_}"
        barrier.mkdir()
        ops, errors = race({"url": moto_url}, f"moto{round_}", "hot", barrier)
        verdict, seconds = checked(ops)
        record(f"moto-server-hot-round{round_}", ops, errors, verdict, seconds)
        if not verdict.ok:
            violations.append(verdict.explanation)
            if not LONG:
                break
    report("linearizability", target="moto-server", rounds=MOTO_ROUNDS, violations=len(violations))
    if not violations and not LONG:
        # Three short rounds do not always catch moto's races (a quiet, fast machine rarely
        # interleaves them); the long form's rounds always have, so it keeps the assertion.
        pytest.skip(f"moto's server showed no violation in {MOTO_ROUNDS} short rounds")
    assert violations, "moto's server was linearizable on every round: update the docs"
    print(violations[0])
