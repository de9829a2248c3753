"""Result stores and sealed results: what sealing costs a first call and a replay, and how fast
a replay comes back from the store (issue 42).

For ``python -m bench --only results``: time per request of a first call and of a replay (a
duplicate) on the in-process engine, **plain** (no cipher) against **sealed** with
:class:`~firstwrite.idempotency.result_cipher.LocalKeyCipher` and with
:class:`~firstwrite.idempotency.result_cipher.KmsEnvelopeCipher` on moto's KMS server (a cached
data key: no KMS call in the measured requests), contenders interleaved per repetition; with
valgrind, instructions per request of plain and local-key sealed (:mod:`._callgrind`); then
replays from a :class:`~firstwrite.idempotency.result_store.DirectoryResultStore`: a 256 KB
result inline against in the store, and a big result whole, streamed, and through the ASGI
middleware.

Run as ``python -m bench.results --child N REPS`` it is the counted program.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

from . import _callgrind
from ._common import Section, Series, Settings, Table, Target

RESULT = {"charge_id": "ch_3Pq8x2", "amount": 1999, "currency": "EUR", "last4": "4242"}
RESULT_BYTES = json.dumps(RESULT).encode()
SCENARIOS = ("first call", "replay")
PLAIN, LOCAL, KMS = "plain", "sealed, local key", "sealed, KMS envelope"
PLAIN_B, LOCAL_B = "plain, bytes result", "sealed, local key, bytes result"
TARGET = 1.10  # sealed / plain, time or instructions per request
MB = 1 << 20


def _guard(client: Any, table: str, **changes: Any) -> Any:
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    guard = Idempotency(IdempotencyConfig(table_name=table, **changes), client=client)
    guard.ensure_table()
    return guard


@contextmanager
def _kms_key() -> Iterator[tuple[Any, str] | None]:
    """A boto3 KMS client on moto's KMS server (loopback) and a key id, or ``None`` without
    moto."""
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError:
        yield None
        return
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        kms = boto3.client(
            "kms",
            endpoint_url=f"http://{host}:{port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        yield kms, kms.create_key()["KeyMetadata"]["KeyId"]
    finally:
        server.stop()


def _client() -> Any:
    """A boto3 client bound in process to a new in-memory engine, with timeouts within the
    layer's default budget (docs/patterns.md, Time budget): with botocore's 60 s ones every
    call would go to a thread the layer can abandon, and callgrind, counting one thread,
    would miss the calls."""
    from botocore.config import Config

    from firstwrite.engine import Engine, local_client
    from firstwrite.idempotency import IdempotencyConfig, sdk_settings

    timeouts = sdk_settings(IdempotencyConfig().budget)
    del timeouts["retries"]
    return local_client(Engine(), config=Config(**timeouts))


def _guards(kms: tuple[Any, str] | None) -> dict[str, tuple[Any, object]]:
    """Contender -> (guard, the result its calls return). A sealed result is always a binary
    attribute; a plain JSON result a string one, so the bytes pair measures sealing alone."""
    from firstwrite.idempotency.result_cipher import KmsEnvelopeCipher, LocalKeyCipher

    client = _client()
    plain = _guard(client, "plain")
    local = _guard(client, "local", result_cipher=LocalKeyCipher({"k": os.urandom(32)}, "k"))
    guards: dict[str, tuple[Any, object]] = {PLAIN: (plain, RESULT), LOCAL: (local, RESULT)}
    if kms is not None:
        cipher = KmsEnvelopeCipher(kms[0], kms[1], data_key_ttl=3600, data_key_uses=1_000_000)
        guards[KMS] = (_guard(client, "kms", result_cipher=cipher), RESULT)
    guards[PLAIN_B] = (plain, RESULT_BYTES)
    guards[LOCAL_B] = (local, RESULT_BYTES)
    return guards


def _operation(guard: Any, result: object, scenario: str, name: str) -> Callable[[int], object]:
    prefix = name.replace(" ", "").replace(",", "-")
    if scenario == "first call":
        return lambda i: guard.run(f"{prefix}-{i}", lambda: result)
    guard.run(f"{prefix}-dup", lambda: result)
    return lambda i: guard.run(f"{prefix}-dup", lambda: None)


def _timed(
    guards: dict[str, tuple[Any, object]], requests: int, reps: int
) -> dict[str, dict[str, list[float]]]:
    """Microseconds per request by scenario and contender, one value per repetition; the
    contenders take turns within each repetition, so the machine's load falls on all alike."""
    found: dict[str, dict[str, list[float]]] = {}
    numbers = count()
    for scenario in SCENARIOS:
        ops = {name: _operation(g, r, scenario, name) for name, (g, r) in guards.items()}
        for op in ops.values():
            for _ in range(50):
                op(next(numbers))
        for _ in range(reps):
            for name, op in ops.items():
                start = time.perf_counter()
                for _ in range(requests):
                    op(next(numbers))
                elapsed = time.perf_counter() - start
                found.setdefault(scenario, {}).setdefault(name, []).append(elapsed / requests * 1e6)
    return found


def _child(requests: int, reps: int) -> None:
    pieces = []
    numbers = count()
    for name, (guard, result) in _guards(None).items():
        for scenario in SCENARIOS:
            op = _operation(guard, result, scenario, name)
            _callgrind.count_pieces(lambda i, op=op: op(next(numbers)), 20, requests, reps)  # type: ignore[misc]
            pieces += [[scenario, name]] * reps
    print(json.dumps(pieces))


def _targets(names: list[str]) -> list[Target]:
    """Sealed / plain <= TARGET, each sealed contender against the plain one with its result."""
    pairs = ((LOCAL, PLAIN), (KMS, PLAIN), (LOCAL_B, PLAIN_B))
    return [Target(a, b, maximum=TARGET) for a, b in pairs if a in names and b in names]


def _sealing_tables(settings: Settings, log: Callable[[str], None]) -> list[Table]:
    requests = 20 if settings.quick else 200
    tables = []
    with _kms_key() as kms:
        timed = _timed(_guards(kms), requests, settings.reps)
    for scenario in SCENARIOS:
        series = [Series(n, v, unit="µs/request") for n, v in timed[scenario].items()]
        table = Table(
            title=f"{scenario}: time per request, in-process engine",
            series=series,
            ours=[LOCAL, KMS, LOCAL_B],
            targets=_targets([s.name for s in series]),
        )
        if kms is None:
            table.skipped[KMS] = "moto is not installed"
        log(f"    {scenario}: " + ", ".join(f"{s.name}={s.median:,.1f} µs" for s in series))
        tables.append(table)
    counted_requests = 10 if settings.quick else 100
    values, why = _callgrind.count_module(
        "bench.results", ["--child", str(counted_requests), "2"], per=counted_requests
    )
    for scenario in SCENARIOS:
        table = Table(
            title=f"{scenario}: instructions per request (callgrind), in-process engine",
            series=[
                Series(n, v, unit="k instructions/request")
                for n, v in values.get(scenario, {}).items()
            ],
            ours=[LOCAL, LOCAL_B],
            targets=_targets(list(values.get(scenario, {}))),
        )
        if why is not None:
            table.skipped[LOCAL] = why
        tables.append(table)
    return tables


def _asgi_replay(app: Any, key: str) -> int:
    """Bytes of the body the ASGI middleware sends for a duplicate of ``key``."""
    sent = 0
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/exports",
        "query_string": b"",
        "headers": [(b"idempotency-key", key.encode())],
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal sent
        sent += len(message.get("body", b""))

    asyncio.run(app(scope, receive, send))
    return sent


def _store_tables(settings: Settings, log: Callable[[str], None]) -> list[Table]:
    from firstwrite.http.asgi import IdempotencyMiddleware
    from firstwrite.idempotency.result_store import DirectoryResultStore

    size_mb = 8 if settings.quick else 100
    small = os.urandom(256 * 1024)
    big = os.urandom(size_mb * MB)
    replays: dict[str, list[float]] = {}
    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-results-") as folder:
        client = _client()
        inline = _guard(client, "inline")
        stored = _guard(
            client,
            "stored",
            result_store=DirectoryResultStore(Path(folder)),
            result_store_threshold=1024,
        )
        for guard in (inline, stored):
            guard.run("small", lambda: small)

        async def export(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": big})

        app = IdempotencyMiddleware(export, guard=stored)
        assert _asgi_replay(app, "big") == len(big)  # the first call, stored
        stored.run("big-bytes", lambda: big)
        n = 20 if settings.quick else 200
        for _ in range(settings.reps):
            for name, guard in (("inline", inline), ("directory store", stored)):
                start = time.perf_counter()
                for _ in range(n):
                    guard.run("small", lambda: None)
                replays.setdefault(name, []).append(n / (time.perf_counter() - start))
        for _ in range(max(2, settings.reps // 3)):
            start = time.perf_counter()
            assert stored.run("big-bytes", lambda: b"") == big
            rates.setdefault("whole (Guard.run)", []).append(
                size_mb / (time.perf_counter() - start)
            )
            start = time.perf_counter()
            assert _asgi_replay(app, "big") == len(big)
            rates.setdefault("streamed (ASGI middleware)", []).append(
                size_mb / (time.perf_counter() - start)
            )
    log("    replays: " + ", ".join(f"{k}={sum(v) / len(v):,.0f}/s" for k, v in replays.items()))
    return [
        Table(
            title="replays of a 256 KB result: inline in the record vs in the result store",
            series=[Series(k, v) for k, v in replays.items()],
            ours=["directory store"],
        ),
        Table(
            title=f"a {size_mb} MB result replayed from the directory store",
            series=[Series(k, v, unit="MB/s") for k, v in rates.items()],
            ours=list(rates),
        ),
    ]


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="results",
        title="Sealed results and replays from a result store (issue 42)",
        method=[
            "The engine in process (`Engine()`, in memory), through a boto3 client bound to it: "
            "the layer's own work is most of a request, so sealing's share is at its largest. "
            f"**{PLAIN}**: no cipher; **{LOCAL}**: `LocalKeyCipher` (AES-GCM); **{KMS}**: "
            "`KmsEnvelopeCipher` on moto's KMS server with a cached data key (one "
            "`GenerateDataKey` before the measured requests, none in them; on replay the "
            "unwrapped key is cached too). A first call uses a new key; a replay repeats one. "
            "The result is a 4-field JSON object (72 bytes), stored as a string attribute "
            "when plain and as a binary one when sealed; the engine's bound client sends "
            "string-only requests on a quick path and binary ones through botocore's full "
            f"serializer, so **{PLAIN_B}** / **{LOCAL_B}** return the same object's JSON "
            "as bytes (binary either way): their ratio is sealing alone.",
            f"{settings.reps} repetitions; in each, every contender runs its batch in turn "
            "(ratios are per repetition, paired). Instructions: callgrind, 2 pieces of 100 "
            "requests per contender, the lowest kept.",
            "Replays from the store: a 256 KB random result (fits the record) inline vs in a "
            "`DirectoryResultStore` (`result_store_threshold=1024`), replays per second; a big "
            "random result replayed whole through `Idempotency.run` (read, size and SHA-256 "
            "checked) and streamed by the ASGI middleware from the store, MB/s.",
        ],
    )
    section.tables += _sealing_tables(settings, log)
    section.tables += _store_tables(settings, log)
    return section


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        from ._common import Settings as _Settings

        print(run(_Settings.quick_mode(), print))
