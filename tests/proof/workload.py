"""Random concurrent histories against a DynamoDB: the clients of the linearizability proof.

A client issues random calls on a few hot keys (conditional Put/Update/Delete, consistent Get,
TransactWriteItems and TransactGetItems over two keys of a group, and idempotency claims through
``firstwrite.idempotency``) and records each one as a :class:`lincheck.Op` with its invocation and
completion times on ``time.monotonic_ns()``, which every process on the machine shares. Clients
run as threads of this process or of worker processes (spawned, so they share nothing but the
target); :func:`run_process` is the worker's entry point and returns its ops pickled.

A target is where the calls go: ``{"url": ...}`` over HTTP (a served engine, moto's server) or
``{"db": ...}`` for an engine opened in process on a database file (each process its own).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from lincheck import (
    ALWAYS,
    UNKNOWN,
    Action,
    Call,
    Check,
    Claim,
    Complete,
    Cond,
    Delete,
    Get,
    Item,
    Op,
    Put,
    TxGet,
    TxWrite,
    Update,
)

REGION = "us-east-1"
CLIENT_CONFIG = Config(
    retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=30, max_pool_connections=4
)


@dataclass(frozen=True)
class Spec:
    """What every client of one run does: the same tables and keys, its own random seed."""

    target: Mapping[str, Any]
    table: str
    idem_table: str
    groups: int = 4  # independent groups of hot keys
    keys_per_group: int = 3
    idem_keys_per_group: int = 4  # claimable at a time; the window moves on every 25 calls
    ops_per_client: int = 100
    seed: int = 0
    start_ns: int = 0  # without a barrier: clients wait for this instant...
    deadline_ns: int = 0  # ...and stop at this one whatever their count
    ccf_item: bool = True  # the target returns the item on a failed condition (ALL_OLD)
    transactions: float = 0.25  # the share of register calls that are transactions
    barrier: str = ""  # a directory: worker processes line up there (see run_process)


def make_client(target: Mapping[str, Any]) -> Any:
    from firstwrite.engine.binding.sync import dummy_session

    session = boto3.session.Session(botocore_session=dummy_session(REGION))
    if "url" in target:
        return session.client(
            "dynamodb", region_name=REGION, endpoint_url=target["url"], config=CLIENT_CONFIG
        )
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import bind

    engine = _engines.get(target["db"])
    if engine is None:
        engine = _engines[target["db"]] = Engine(target["db"])
    return bind(session.client("dynamodb", region_name=REGION, config=CLIENT_CONFIG), engine)


_engines: dict[str, Any] = {}  # one Engine per database file per process


def create_tables(client: Any, spec: Spec) -> None:
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    client.create_table(
        TableName=spec.table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    Idempotency(IdempotencyConfig(table_name=spec.idem_table), client=client).ensure_table()


# --- calls as DynamoDB requests ------------------------------------------------------------


def _pk(key: str) -> dict[str, Any]:
    return {"pk": {"S": key}}


def _item(attributes: Mapping[str, Any] | None) -> Item:
    if not attributes:
        return None
    try:
        return (int(attributes["ver"]["N"]), attributes["val"]["S"])
    except (KeyError, TypeError, ValueError):
        # No write ever stored this: an outcome the model never gives, so the checker says so.
        return ("malformed", repr(dict(attributes)))


def _condition(cond: Cond) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ConditionExpression for ``cond`` and the values it needs."""
    if cond.kind == "always":
        return {}, {}
    if cond.kind == "absent":
        return {"ConditionExpression": "attribute_not_exists(pk)"}, {}
    if cond.kind == "exists":
        return {"ConditionExpression": "attribute_exists(pk)"}, {}
    return {"ConditionExpression": "ver = :expected"}, {":expected": {"N": str(cond.ver)}}


def _request(table: str, action: Action) -> tuple[str, dict[str, Any]]:
    """The transaction entry (and single-call request) for ``action``."""
    condition, values = _condition(action.cond)
    request: dict[str, Any] = {"TableName": table, **condition}
    if isinstance(action, Put):
        kind = "Put"
        request["Item"] = {
            **_pk(action.key),
            "ver": {"N": str(action.ver)},
            "val": {"S": action.val},
        }
    elif isinstance(action, Update):
        kind = "Update"
        request["Key"] = _pk(action.key)
        request["UpdateExpression"] = "SET val = :val ADD ver :one"
        values.update({":val": {"S": action.val}, ":one": {"N": "1"}})
    else:
        kind = "Delete" if isinstance(action, Delete) else "ConditionCheck"
        request["Key"] = _pk(action.key)
    if values:
        request["ExpressionAttributeValues"] = values
    return kind, request


def execute(client: Any, spec: Spec, call: Call) -> tuple[Any, ...]:
    """Send ``call``; its outcome as the model states outcomes. Raises on anything else."""
    if isinstance(call, Get):
        response = client.get_item(TableName=spec.table, Key=_pk(call.key), ConsistentRead=True)
        return ("item", _item(response.get("Item")))
    if isinstance(call, (Put, Update, Delete)):
        kind, request = _request(spec.table, call)
        returns = "ALL_NEW" if kind == "Update" else "ALL_OLD"
        method = {"Put": client.put_item, "Update": client.update_item}.get(
            kind, client.delete_item
        )
        try:
            response = method(
                **request, ReturnValues=returns, ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            current = _item(exc.response.get("Item")) if spec.ccf_item else UNKNOWN
            return ("failed", current)
        return ("ok", _item(response.get("Attributes")))
    if isinstance(call, TxWrite):
        items = [dict([_request(spec.table, a)]) for a in call.actions]
        try:
            client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons")
            if reasons is None:
                return ("cancelled", UNKNOWN)
            return ("cancelled", tuple(r.get("Code", "None") for r in reasons))
        return ("ok",)
    if isinstance(call, TxGet):
        gets = [{"Get": {"TableName": spec.table, "Key": _pk(k)}} for k in call.keys]
        response = client.transact_get_items(TransactItems=gets)
        return ("items", tuple(_item(r.get("Item")) for r in response["Responses"]))
    raise TypeError(f"not a single DynamoDB call: {call!r}")


# --- one client ------------------------------------------------------------------------------


class Client:
    """One client: random calls, each recorded with its times (``ops``)."""

    def __init__(self, name: str, spec: Spec, client: Any) -> None:
        from firstwrite.idempotency import Idempotency, IdempotencyConfig, RetryPolicy

        self.name = name
        self.spec = spec
        self.client = client
        self.rng = random.Random(f"{spec.seed}/{name}")
        self.known: dict[str, int | None] = {}  # last version this client saw, per key
        self.ops: list[Op] = []
        self.errors: list[str] = []
        config = IdempotencyConfig(table_name=spec.idem_table, retry=RetryPolicy(max_attempts=1))
        self.guard = Idempotency(config, client=client)
        self.counter = 0

    def run(self, start_ns: int, deadline_ns: int) -> None:
        """Wait for ``start_ns``, then call until ``spec.ops_per_client`` or ``deadline_ns``."""
        spec = self.spec
        delay = (start_ns - time.monotonic_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        for _ in range(spec.ops_per_client):
            if deadline_ns and time.monotonic_ns() > deadline_ns:
                break
            group = self.rng.randrange(spec.groups)
            if self.rng.random() < 0.12:
                # A window of keys that moves on as calls are made: every client meets the same
                # few at a time (their races), and new keys keep coming (new first claims).
                first = len(self.ops) // 25
                self._claim(f"idem-{group}-{first + self.rng.randrange(spec.idem_keys_per_group)}")
            else:
                self._record(self._random_call(group))

    def _value(self) -> str:
        self.counter += 1
        return f"{self.name}.{self.counter}"

    def _cond(self, key: str) -> Cond:
        roll = self.rng.random()
        if roll < 0.45 and key in self.known:
            seen = self.known[key]
            return Cond("absent") if seen is None else Cond("ver", seen)
        if roll < 0.6:
            return Cond("absent")
        if roll < 0.7:
            return Cond("exists")
        if roll < 0.8:
            return Cond("ver", self.rng.randint(1, 4))
        return ALWAYS

    def _action(self, key: str, *, check: bool) -> Action:
        roll = self.rng.random()
        if check and roll < 0.15:
            cond = self._cond(key)  # a ConditionCheck needs a condition
            return Check(key, Cond("exists") if cond is ALWAYS else cond)
        if roll < 0.45:
            seen = self.known.get(key)
            return Put(key, (seen or 0) + 1, self._value(), self._cond(key))
        if roll < 0.85:
            return Update(key, self._value(), self._cond(key))
        return Delete(key, self._cond(key))

    def _random_call(self, group: int) -> Call:
        keys = [f"g{group}-k{j}" for j in range(self.spec.keys_per_group)]
        share = self.spec.transactions
        if self.rng.random() >= share:
            if self.rng.random() < 1 / 3:
                return Get(self.rng.choice(keys))
            action = self._action(self.rng.choice(keys), check=False)
            assert not isinstance(action, Check)  # only transactions carry a ConditionCheck
            return action
        pair = self.rng.sample(keys, 2)
        if self.rng.random() < 0.6:
            actions = tuple(self._action(k, check=True) for k in pair)
            if all(isinstance(a, Check) for a in actions):
                actions = (actions[0], Update(pair[1], self._value()))
            return TxWrite(actions)
        return TxGet(tuple(pair))

    def _record(self, call: Call) -> tuple[Any, ...] | None:
        invoked = time.monotonic_ns()
        try:
            outcome = execute(self.client, self.spec, call)
        except Exception as exc:  # no answer (or not one the model knows): may have happened
            self.errors.append(f"{call}: {exc!r}")
            self.ops.append(Op(self.name, call, None, invoked, None))
            return None
        self.ops.append(Op(self.name, call, outcome, invoked, time.monotonic_ns()))
        self._learn(call, outcome)
        return outcome

    def _learn(self, call: Call, outcome: tuple[Any, ...]) -> None:
        """Remember the version seen, for the next conditions on that key to aim at."""
        seen: list[tuple[str, Any]] = []
        if isinstance(call, Get) or (
            isinstance(call, (Put, Update, Delete)) and outcome[0] == "failed"
        ):
            seen.append((call.key, outcome[1]))
        elif isinstance(call, Put):
            seen.append((call.key, (call.ver, call.val)))
        elif isinstance(call, Update):
            seen.append((call.key, outcome[1]))  # ALL_NEW
        elif isinstance(call, Delete):
            seen.append((call.key, None))
        elif isinstance(call, TxGet):
            seen += zip(call.keys, outcome[1], strict=True)
        for key, item in seen:
            if item is None:
                self.known[key] = None
            elif item is not UNKNOWN and isinstance(item[0], int):
                self.known[key] = item[0]

    def _claim(self, key: str) -> None:
        from firstwrite.idempotency import InProgressError, LostClaimError, Replay

        claim = Claim(key, self.name)
        invoked = time.monotonic_ns()
        try:
            got = self.guard.claim(key)
        except InProgressError:
            self.ops.append(Op(self.name, claim, ("in_progress",), invoked, time.monotonic_ns()))
            return
        except Exception as exc:
            self.errors.append(f"{claim}: {exc!r}")
            self.ops.append(Op(self.name, claim, None, invoked, None))
            return
        if isinstance(got, Replay):
            replay = ("replay", got.value())
            self.ops.append(Op(self.name, claim, replay, invoked, time.monotonic_ns()))
            return
        self.ops.append(Op(self.name, claim, ("claimed",), invoked, time.monotonic_ns()))
        time.sleep(self.rng.random() * 0.005)  # the side effect: duplicates meet it in progress
        result = self._value()
        complete = Complete(key, self.name, result)
        invoked = time.monotonic_ns()
        try:
            self.guard.complete(got, result)
        except LostClaimError:
            self.ops.append(Op(self.name, complete, ("lost",), invoked, time.monotonic_ns()))
        except Exception as exc:
            self.errors.append(f"{complete}: {exc!r}")
            self.ops.append(Op(self.name, complete, None, invoked, None))
        else:
            self.ops.append(Op(self.name, complete, ("ok",), invoked, time.monotonic_ns()))


def make_clients(spec: Spec, names: list[str]) -> list[Client]:
    """One client per name, connected and ready (boto3 clients take a while to build)."""
    return [Client(name, spec, make_client(spec.target)) for name in names]


def run_clients(
    clients: list[Client], start_ns: int, deadline_ns: int
) -> tuple[list[Op], list[str]]:
    """Run ``clients`` on threads of this process from ``start_ns``; their ops and errors."""
    threads = [
        threading.Thread(target=c.run, args=(start_ns, deadline_ns), name=c.name) for c in clients
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [op for c in clients for op in c.ops], [e for c in clients for e in c.errors]


def run_process(spec: Spec, names: list[str]) -> tuple[list[Op], list[str]]:
    """A worker process's entry point (spawned): its clients' ops and errors, pickled back.

    With ``spec.barrier``, once its clients are built it says it is ready (a file
    ``ready-<pid>`` there), then waits for the file ``go``, which holds the start and deadline
    instants: a process that took long to start cannot miss the race.
    """
    clients = make_clients(spec, names)
    start, deadline = spec.start_ns, spec.deadline_ns
    if spec.barrier:
        barrier = Path(spec.barrier)
        (barrier / f"ready-{os.getpid()}").touch()
        go = barrier / "go"
        waited = time.monotonic() + 120
        while not go.exists() and time.monotonic() < waited:
            time.sleep(0.01)
        start, deadline = map(int, go.read_text().split())
    return run_clients(clients, start, deadline)


def start_barrier(barrier: Path, processes: int, seconds: float) -> tuple[int, int]:
    """Wait for ``processes`` workers to be ready at ``barrier``, then start them (and return)
    at one instant a little ahead, with a deadline ``seconds`` after it."""
    waited = time.monotonic() + 120
    while len(list(barrier.glob("ready-*"))) < processes and time.monotonic() < waited:
        time.sleep(0.01)
    start = time.monotonic_ns() + 300_000_000
    deadline = start + int(seconds * 1e9)
    (barrier / "go.tmp").write_text(f"{start} {deadline}")
    (barrier / "go.tmp").rename(barrier / "go")
    return start, deadline
