"""Result stores and sealed results: what sealing costs a first call and a replay, and how fast
a replay comes back from the store.

``python -m bench.results [--size-mb N] [--requests N]`` prints a table: the time per request
of a first call and of a replay (a duplicate) on the in-process engine, plain and sealed with
:class:`~firstwrite.idempotency.result_cipher.LocalKeyCipher` (AES-GCM, as
:class:`~firstwrite.idempotency.result_cipher.KmsEnvelopeCipher` does with a cached data key:
the same AES-GCM, no KMS call), the ratio, and the throughput of a replay of an
``--size-mb`` result from a :class:`~firstwrite.idempotency.result_store.DirectoryResultStore`
(whole, through ``Replay.value``, and streamed, as the middleware sends it). Rounds alternate
plain and sealed so that the machine's load falls on both alike; medians are reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from itertools import count
from pathlib import Path
from typing import Any

from firstwrite.engine import Engine, local_client
from firstwrite.idempotency import Idempotency, IdempotencyConfig
from firstwrite.idempotency.result_cipher import LocalKeyCipher
from firstwrite.idempotency.result_store import DirectoryResultStore

RESULT = {"charge_id": "ch_3Pq8x2", "amount": 1999, "currency": "EUR", "last4": "4242"}


def _guard(client: Any, table: str, **changes: Any) -> Idempotency:
    guard = Idempotency(IdempotencyConfig(table_name=table, **changes), client=client)
    guard.ensure_table()
    return guard


def _per_request(guard: Idempotency, keys: count[int], n: int) -> tuple[float, float]:
    """Seconds per first call and per replay, over ``n`` new keys."""
    names = [f"k-{next(keys)}" for _ in range(n)]
    started = time.perf_counter()
    for name in names:
        guard.run(name, lambda: RESULT)
    first = (time.perf_counter() - started) / n
    started = time.perf_counter()
    for name in names:
        guard.run(name, lambda: RESULT)
    return first, (time.perf_counter() - started) / n


def sealing(requests: int, rounds: int) -> dict[str, float]:
    client = local_client(Engine())
    plain = _guard(client, "plain")
    sealed = _guard(client, "sealed", result_cipher=LocalKeyCipher({"k": os.urandom(32)}, "k"))
    keys = count()
    _per_request(plain, keys, 50), _per_request(sealed, keys, 50)  # warm up
    samples: dict[str, list[float]] = {"plain": [], "sealed": []}
    for _ in range(rounds):
        for name, guard in (("plain", plain), ("sealed", sealed)):
            samples[name].append(_per_request(guard, keys, requests))
    out: dict[str, float] = {}
    for name, pairs in samples.items():
        out[f"{name} first (us)"] = statistics.median(p[0] for p in pairs) * 1e6
        out[f"{name} replay (us)"] = statistics.median(p[1] for p in pairs) * 1e6
    return out


def store_replays(size_mb: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-results-") as folder:
        store = DirectoryResultStore(Path(folder))
        client = local_client(Engine())
        guard = _guard(client, "stored", result_store=store)
        body = os.urandom(size_mb << 20)
        guard.run("big", lambda: body)
        started = time.perf_counter()
        assert guard.run("big", lambda: b"") == body
        whole = time.perf_counter() - started
        claim_steps = guard.claim("big")
        assert not hasattr(claim_steps, "owner")  # a replay, not a claim
        placement = claim_steps.placement  # type: ignore[union-attr]
        started = time.perf_counter()
        found = placement.stream(claim_steps.raw_result, claim_steps.record_id)  # type: ignore[union-attr]
        assert found is not None
        streamed = sum(len(chunk) for chunk in found[1])
        assert streamed == len(body) + 1
        chunked = time.perf_counter() - started
    return {"replay whole (MB/s)": size_mb / whole, "replay streamed (MB/s)": size_mb / chunked}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--size-mb", type=int, default=100)
    args = parser.parse_args()
    numbers = sealing(args.requests, args.rounds)
    for name in ("first", "replay"):
        plain, sealed = numbers[f"plain {name} (us)"], numbers[f"sealed {name} (us)"]
        print(
            f"{name:7} plain {plain:8.1f} us  sealed {sealed:8.1f} us  (+{sealed / plain - 1:.1%})"
        )
    for name, value in store_replays(args.size_mb).items():
        print(f"{args.size_mb} MB {name}: {value:,.0f}")


if __name__ == "__main__":
    main()
