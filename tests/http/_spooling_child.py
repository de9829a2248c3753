"""A child process for test_http_spooling: one big response through a middleware, its memory
measured from inside (the peak resident set, reset before each request by
``/proc/self/clear_refs``), then its replay.

``python _spooling_child.py FRAMEWORK SIZE_MB SPOOL_THRESHOLD RESULTS_DIR`` prints one JSON
line: the peak RSS growth (MB) of the first call and of the replay, the SHA-256 of what the
client got each time and of what the handler sent, and how often the handler ran.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator
from typing import Any

from http_support import asgi_request, wsgi_request  # beside this script: its sys.path[0]

from firstwrite.engine import Engine, local_client
from firstwrite.http import HttpConfig
from firstwrite.http.asgi import IdempotencyMiddleware
from firstwrite.http.wsgi import WSGIIdempotencyMiddleware
from firstwrite.idempotency import Idempotency, IdempotencyConfig
from firstwrite.idempotency.result_store import DirectoryResultStore

MB = 1 << 20


def _pieces(size_mb: int) -> Iterator[bytes]:
    """The handler's body, made a megabyte at a time (never whole in the handler)."""
    for i in range(size_mb):
        yield random.Random(i).randbytes(MB)


def _status(name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])  # kB
    raise RuntimeError(f"no {name} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # VmHWM := VmRSS (Linux >= 4.0)


class Handler:
    def __init__(self, size_mb: int) -> None:
        self.size_mb = size_mb
        self.runs = 0

    async def asgi(self, scope: Any, receive: Any, send: Any) -> None:
        self.runs += 1
        headers = [(b"content-type", b"application/octet-stream")]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        for piece in _pieces(self.size_mb):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def wsgi(self, environ: Any, start_response: Any) -> Iterator[bytes]:
        self.runs += 1
        start_response("201 Created", [("Content-Type", "application/octet-stream")])
        return _pieces(self.size_mb)


def _asgi(app: Any, key: str) -> tuple[int, dict[str, str], str]:
    digest = hashlib.sha256()
    answer = asgi_request(app, "/exports", key, on_body=digest.update)
    return answer.status, answer.headers, digest.hexdigest()


def _wsgi(app: Any, key: str) -> tuple[int, dict[str, str], str]:
    digest = hashlib.sha256()
    answer = wsgi_request(app, "/exports", key, on_body=digest.update)
    return answer.status, answer.headers, digest.hexdigest()


def main(framework: str, size_mb: int, spool_threshold: int, results: str) -> None:
    store = DirectoryResultStore(results)
    guard = Idempotency(
        IdempotencyConfig(table_name="spooled", result_store=store),
        client=local_client(Engine()),
    )
    guard.ensure_table()
    config = HttpConfig(spool_threshold=spool_threshold)
    warm, handler = Handler(3), Handler(size_mb)
    call = _asgi if framework == "asgi" else _wsgi
    make = IdempotencyMiddleware if framework == "asgi" else WSGIIdempotencyMiddleware
    for key in ("warm-up", "warm-up"):  # every code path once, before measuring
        call(make(getattr(warm, framework), guard=guard, config=config), key)
    app = make(getattr(handler, framework), guard=guard, config=config)
    expected = hashlib.sha256()
    for piece in _pieces(size_mb):
        expected.update(piece)
    answers = []
    for _ in range(2):
        _reset_peak()
        before = _status("VmRSS")
        status, headers, sha = call(app, "export-1")
        growth = (_status("VmHWM") - before) / 1024
        answers.append(
            {
                "status": status,
                "replayed": headers.get("idempotent-replayed", ""),
                "sha256": sha,
                "growth_mb": round(growth, 1),
            }
        )
    print(json.dumps({"answers": answers, "expected": expected.hexdigest(), "runs": handler.runs}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
