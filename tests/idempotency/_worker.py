"""A worker process for the multi-process tests (run as a script, one JSON argument).

It talks to DynamoDB through boto3 only: either an engine opened on a shared database file
(``db``) or an HTTP endpoint (``endpoint``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def client_for(spec: dict[str, Any]) -> Any:
    if spec.get("endpoint"):
        import boto3

        return boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=spec["endpoint"],
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret",
        )
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    return local_client(Engine(spec["db"]), region="us-east-1")


def effect(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main() -> None:
    spec = json.loads(sys.argv[1])
    from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig, LostClaimError

    config = IdempotencyConfig(table_name=spec["table"], in_progress_wait=spec.get("wait", 0.0))
    guard = Idempotency(config, client=client_for(spec))
    mode = spec["mode"]
    if mode == "run":
        start = float(spec["start_at"])
        while time.time() < start:  # line the processes up on the same instant
            time.sleep(0.001)

        def side_effect() -> dict[str, Any]:
            effect(spec["effects"], str(os.getpid()))
            time.sleep(0.2)
            return {"pid": os.getpid()}

        print(json.dumps(guard.run(spec["key"], side_effect, {"p": 1})), flush=True)
    elif mode in ("hold", "stall"):
        claim = guard.claim(spec["key"], {"p": 1}, lease=spec["lease"])
        assert isinstance(claim, Claim)
        effect(spec["effects"], f"started {os.getpid()}")
        print(
            json.dumps(
                {
                    "record_id": claim.record_id,
                    "key": claim.key,
                    "owner": claim.owner,
                    "version": claim.version,
                    "fingerprint": claim.fingerprint,
                    "claimed_at": claim.claimed_at,
                    "lease_expires_at": claim.lease_expires_at,
                }
            ),
            flush=True,
        )
        if mode == "hold":
            time.sleep(3600)  # killed with SIGKILL while holding the claim
        sys.stdin.readline()  # stalled (a GC pause, a partition) until the parent says go
        try:
            guard.complete(claim, {"by": "stalled"})
            print("completed", flush=True)
        except LostClaimError:
            print("lost", flush=True)


if __name__ == "__main__":
    main()
