"""A worker process for the rolling-upgrade test (run as a script, one JSON argument).

One version of a service: ``"old"`` (keys under the previous scheme alone) or ``"new"`` (the
current scheme, with the previous one in its migration window). It waits for the shared start
instant, runs every key of the spec through ``guard.run`` (the side effect appends the key to
the effects file) and prints a JSON line of what each call returned.

Roles with business writes (the transactional variant's test): ``"old-business"`` runs, under
``guard.run``, a counter increment and a ledger entry as plain writes; ``"new-transactional"``
makes the increment with ``claim_with`` and the ledger entry with ``complete_with``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency import Idempotency, IdempotencyConfig, InProgressError, Replay
from firstwrite.idempotency.key_migration import KeyMigration, KeyScheme

OLD = KeyScheme(key_prefix="ORDERS")


def guard_for(role: str, table: str, client: Any) -> Idempotency:
    base = IdempotencyConfig(table_name=table, in_progress_wait=5.0, client_retry_ceiling=0)
    if role.startswith("old"):
        return Idempotency(base.with_(key_prefix=OLD.key_prefix), client=client)
    migration = KeyMigration(previous=(OLD,), started_at=time.time())
    return Idempotency(base.with_(key_migration=migration), client=client)


def business(table: str, key: str, by: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The key's business writes as transaction items: its counter's increment, its one
    ledger entry (refused if there is one already)."""
    increment = {
        "Update": {
            "TableName": table,
            "Key": {"pk": {"S": f"COUNT#{key}"}},
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }
    entry = {
        "Put": {
            "TableName": table,
            "Item": {"pk": {"S": f"LEDGER#{key}"}, "by": {"S": by}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }
    return increment, entry


def with_business(spec: dict[str, Any], guard: Idempotency, client: Any) -> dict[str, Any]:
    """Every key of ``spec`` through the old or the transactional new version."""
    table, old = spec["table"], spec["role"] == "old-business"
    answers: dict[str, Any] = {}
    for key in spec["keys"]:
        increment, entry = business(table, key, "old" if old else "new")
        result = f"{key} by {'old' if old else 'new'} {os.getpid()}"
        answers[key] = None
        for _ in range(500):  # claim_with answers "in progress" at once: ask again
            try:
                if old:

                    def effect(
                        increment: dict[str, Any] = increment,
                        entry: dict[str, Any] = entry,
                        result: str = result,
                    ) -> str:
                        client.update_item(**increment["Update"])
                        time.sleep(0.02)  # long enough for the others to meet the live claim
                        client.put_item(**entry["Put"])
                        return result

                    answers[key] = guard.run(key, effect, {"k": key})
                else:
                    outcome = guard.claim_with(key, [increment], {"k": key})
                    if isinstance(outcome, Replay):
                        answers[key] = outcome.value()
                    else:
                        time.sleep(0.02)
                        guard.complete_with(outcome, [entry], result)
                        answers[key] = result
                break
            except InProgressError:
                time.sleep(0.01)
    return answers


def race(db: str, table: str, keys: list[str], roles: tuple[str, str], effects: str) -> list[Any]:
    """The parent's side: four workers on ``db`` from one start instant, two of each role
    (``roles``: old, new), the old ones meeting the keys in order, the new ones in reverse;
    what each printed."""
    start = time.time() + 4.0  # after every interpreter has started
    procs = []
    for n in range(4):
        spec = {
            "db": db,
            "table": table,
            "role": roles[n % 2 == 0],
            "keys": keys if n % 2 else keys[::-1],  # half meet each key first, half last
            "start": start,
            "effects": effects,
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, json.dumps(spec)], stdout=subprocess.PIPE, text=True
            )
        )
    answers = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        answers.append(json.loads(out))
    return answers


def main() -> None:
    spec = json.loads(sys.argv[1])
    client = local_client(Engine(spec["db"]))
    guard = guard_for(spec["role"], spec["table"], client)
    while time.time() < spec["start"]:
        time.sleep(0.001)
    if spec["role"] in ("old-business", "new-transactional"):
        print(json.dumps(with_business(spec, guard, client)), flush=True)
        return
    answers: dict[str, Any] = {}
    for key in spec["keys"]:

        def effect(key: str = key) -> str:
            fd = os.open(spec["effects"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (key + "\n").encode())
            finally:
                os.close(fd)
            time.sleep(0.02)  # long enough for the others to meet the live claim
            return f"{key} by {os.getpid()}"

        try:
            answers[key] = guard.run(key, effect, {"k": key})
        except InProgressError:
            answers[key] = None
    print(json.dumps(answers), flush=True)


if __name__ == "__main__":
    main()
