"""Workers that die: one forked process per key, each SIGKILLed at its key's point.

Run as a script with one JSON argument: ``db`` (the engine database file, shared),
``ledger`` (the side effect: a file each charge appends one line to), ``table``, ``lease``
(seconds), ``keys`` (``[[key, point], ...]``). This process only imports; each key runs in
a child forked from it (fork after the imports: a few milliseconds a key), which opens the
engine itself, claims the key, and, by its point:

* ``before_mark``: SIGKILLs itself right after the claim;
* ``after_mark``: marks ``charge`` with the reference it will pass downstream, then dies;
* ``after_effect``: marks, appends the charge to the ledger, then dies before completing;
* ``complete``: marks, charges and completes (no death).

The kill is a real ``SIGKILL`` the child sends itself: no ``finally``, no ``atexit``, no
flush. One JSON line per key on stdout: the key, its point, and how its child ended
(``-9``: killed by SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
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


def work_on(spec: dict[str, Any], key: str, point: str) -> None:
    guard = Idempotency(
        IdempotencyConfig(table_name=spec["table"]),
        client=local_client(Engine(spec["db"]), region="us-east-1"),
    )
    claim = guard.claim(key, {"key": key}, lease=spec["lease"])
    assert isinstance(claim, Claim), claim
    if point == "before_mark":
        die()
    reference = f"ref-{key}-{claim.owner[-8:]}"
    guard.mark(claim, "charge", reference)
    if point == "after_mark":
        die()
    charge(spec["ledger"], key, reference)
    if point == "after_effect":
        die()
    guard.complete(claim, {"charged": reference})


def main() -> None:
    spec = json.loads(sys.argv[1])
    for key, point in spec["keys"]:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                work_on(spec, key, point)
            except BaseException as exc:  # reported through the exit code
                print(f"{key}: {exc!r}", file=sys.stderr, flush=True)
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        ended = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"key": key, "point": point, "ended": ended}), flush=True)


if __name__ == "__main__":
    main()
