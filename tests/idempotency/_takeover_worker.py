"""A worker SIGKILLed right after its takeover of a marked record, before anything else.

Run as a script: ``db`` (the engine database file), ``table``, ``offset`` (seconds added to
this worker's clock, so that every lease in the table is over for it: leases on its own clock,
the clock-skew estimate off), then keys. A botocore
hook on the answer of each ``PutItem`` kills the process (a real ``SIGKILL``) the moment a
write has replaced a record that carried recovery points (its ``ALL_OLD`` attributes show
them): the taking-over worker dies in the window between its claim and anything after it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency import ClockSkewPolicy, Idempotency, IdempotencyConfig, NotDone


def die_after_a_marked_takeover(parsed: dict[str, Any], **_: Any) -> None:
    if "marks" in parsed.get("Attributes", {}):
        print("killed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def main(db: str, table: str, offset: float, keys: list[str]) -> None:
    client = local_client(Engine(db), region="us-east-1")
    client.meta.events.register("after-call.dynamodb.PutItem", die_after_a_marked_takeover)
    guard = Idempotency(
        IdempotencyConfig(table_name=table, clock_skew=ClockSkewPolicy(enabled=False)),
        client=client,
        clock=lambda: time.time() + offset,
        reconcile=lambda interrupted: NotDone(),
    )
    for key in keys:
        guard.run(key, lambda: "rerun", {"key": key})
    print("survived", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:])
