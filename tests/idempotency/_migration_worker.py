"""A worker process for the rolling-upgrade test (run as a script, one JSON argument).

One version of a service: ``"old"`` (keys under the previous scheme alone) or ``"new"`` (the
current scheme, with the previous one in its migration window). It waits for the shared start
instant, runs every key of the spec through ``guard.run`` (the side effect appends the key to
the effects file) and prints a JSON line of what each call returned.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency import Idempotency, IdempotencyConfig, InProgressError
from firstwrite.idempotency.key_migration import KeyMigration, KeyScheme

OLD = KeyScheme(key_prefix="ORDERS")


def guard_for(role: str, table: str, client: Any) -> Idempotency:
    base = IdempotencyConfig(table_name=table, in_progress_wait=5.0, client_retry_ceiling=0)
    if role == "old":
        return Idempotency(base.with_(key_prefix=OLD.key_prefix), client=client)
    migration = KeyMigration(previous=(OLD,), started_at=time.time())
    return Idempotency(base.with_(key_migration=migration), client=client)


def main() -> None:
    spec = json.loads(sys.argv[1])
    guard = guard_for(spec["role"], spec["table"], local_client(Engine(spec["db"])))
    while time.time() < spec["start"]:
        time.sleep(0.001)
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
