"""A worker that claims keys with ``claim_with``, marks each, charges some, and dies by SIGKILL.

Run as a script: ``db`` (the engine database file), ``ledger`` (each charge appends one line),
``table``, then ``key:charged`` pairs. For each key: ``claim_with`` with the key's counter
increment (the business write), ``mark("charge", reference)``, and, when ``charged`` is 1, the
charge; then nothing is completed: the process SIGKILLs itself, its claims in flight.
"""

from __future__ import annotations

import os
import signal
import sys

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig


def increment(table: str, key: str) -> dict[str, object]:
    return {
        "Update": {
            "TableName": table,
            "Key": {"pk": {"S": f"COUNT#{key}"}},
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def charge(ledger: str, key: str, reference: str) -> None:
    """The side effect: one line, appended atomically (``O_APPEND``, one ``write``)."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {reference}\n".encode())
    finally:
        os.close(fd)


def main(db: str, ledger: str, table: str, jobs: list[str]) -> None:
    guard = Idempotency(
        IdempotencyConfig(table_name=table), client=local_client(Engine(db), region="us-east-1")
    )
    for job in jobs:
        key, charged = job.split(":")
        claim = guard.claim_with(key, [increment(table, key)], {"key": key})
        assert isinstance(claim, Claim), claim
        reference = f"ref-{key}"
        guard.mark(claim, "charge", reference)
        if charged == "1":
            charge(ledger, key, reference)
    print("marked", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
