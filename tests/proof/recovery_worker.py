"""Workers that die: forked processes, each SIGKILLed with its keys left at their points.

Run as a script with one argument, a JSON file: ``db`` (the engine database file, shared),
``ledger`` (the side effect: a file each charge appends one line to), ``table``, ``lease``
(seconds), ``batches`` (``[[[key, point], ...], ...]``). This process only imports and warms
up; each batch runs in a child forked from it (a few milliseconds, after the imports), which
opens the engine itself and takes every key of its batch to its point:

* ``before_mark``: claimed, nothing more;
* ``after_mark``: claimed and marked ``charge`` with the reference it would pass downstream;
* ``after_effect``: marked and charged (one line appended to the ledger), not completed;
* ``complete``: marked, charged and completed.

Then the child SIGKILLs itself: a real ``SIGKILL``, no ``finally``, no ``atexit``, no flush,
with its claims live, as a worker dies with requests in flight. One JSON line per key on
stdout: the key, its point, and how its child ended (``-9``: killed by SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import dummy_client, local_client
from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig


def charge(ledger: str, key: str, reference: str) -> None:
    """The side effect: one line, appended atomically (``O_APPEND``, one ``write``)."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {reference}\n".encode())
    finally:
        os.close(fd)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def work_on(spec: dict[str, Any], batch: list[list[str]]) -> None:
    guard = Idempotency(
        IdempotencyConfig(table_name=spec["table"]),
        client=local_client(Engine(spec["db"]), region="us-east-1"),
    )
    for key, point in batch:
        claim = guard.claim(key, {"key": key}, lease=spec["lease"])
        assert isinstance(claim, Claim), claim
        if point == "before_mark":
            continue
        reference = f"ref-{key}-{claim.owner[-8:]}"
        guard.mark(claim, "charge", reference)
        if point == "after_mark":
            continue
        charge(spec["ledger"], key, reference)
        if point == "after_effect":
            continue
        guard.complete(claim, {"charged": reference})
    die()


def warm_up(spec: dict[str, Any]) -> None:
    """The client's first calls on a scratch database, closed before any fork: botocore's
    models and the engine's first-call costs are paid once, in this process. Through the
    client only: a guard here would start a thread that no child has."""
    engine = Engine(f"{spec['db']}.warm-{os.getpid()}")
    client = local_client(engine, region="us-east-1")
    client.create_table(
        TableName="warm",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    key = {"pk": {"S": "warm-up"}}
    client.put_item(
        TableName="warm",
        Item={**key, "owner": {"S": "w:1"}},
        ConditionExpression="attribute_not_exists(pk)",
        ReturnValues="ALL_OLD",
    )
    client.update_item(
        TableName="warm",
        Key=key,
        ConditionExpression="#own = :own",
        UpdateExpression="SET #mk = list_append(if_not_exists(#mk, :none), :mk)",
        ExpressionAttributeNames={"#own": "owner", "#mk": "marks"},
        ExpressionAttributeValues={
            ":own": {"S": "w:1"},
            ":none": {"L": []},
            ":mk": {"L": [{"M": {"step": {"S": "warm"}}}]},
        },
    )
    client.get_item(TableName="warm", Key=key, ConsistentRead=True)
    engine.close()


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    dummy_client()  # botocore's models loaded once, here: each child's client is then cheap
    warm_up(spec)
    for batch in spec["batches"]:
        pid = os.fork()
        if pid == 0:
            try:
                work_on(spec, batch)
            except BaseException as exc:  # reported through the exit code
                print(f"{batch[0][0]}...: {exc!r}", file=sys.stderr, flush=True)
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        ended = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        for key, point in batch:
            print(json.dumps({"key": key, "point": point, "ended": ended}), flush=True)


if __name__ == "__main__":
    main()
