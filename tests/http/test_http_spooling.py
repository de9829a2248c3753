"""A big response goes to a temporary file past HttpConfig.spool_threshold and is stored from
there (firstwrite.idempotency.spooled_results): the process never holds it whole, and it is
still replayed byte for byte. Memory is measured in a child process (its peak resident set,
reset before each request), against the same child with spooling off."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from http_support import asgi_request, wsgi_request

from firstwrite.http import HttpConfig
from firstwrite.http.asgi import IdempotencyMiddleware
from firstwrite.http.wsgi import WSGIIdempotencyMiddleware
from firstwrite.idempotency import Idempotency, IdempotencyConfig
from firstwrite.idempotency.result_cipher import LocalKeyCipher
from firstwrite.idempotency.result_store import DirectoryResultStore

CHILD = Path(__file__).with_name("_spooling_child.py")
MB = 1 << 20
SIZE_MB = 100
BOUND_MB = 16  # what a spooled 100 MB response may add to the peak (measured: 1-4 MB)


def _child(framework: str, spool_threshold: int, results: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(CHILD), framework, str(SIZE_MB), str(spool_threshold), str(results)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _can_reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(
    not _can_reset_peak(), reason="needs Linux's /proc/self/clear_refs to reset the peak RSS"
)


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["asgi", "wsgi"])
def test_a_100_mb_response_is_spooled_not_held_and_replays_byte_for_byte(
    tmp_path: Path, framework: str
) -> None:
    spooled = _child(framework, 1 * MB, tmp_path / "spooled")
    first, replay = spooled["answers"]
    assert spooled["runs"] == 1
    assert first["sha256"] == replay["sha256"] == spooled["expected"]
    assert (first["status"], first["replayed"]) == (201, "")
    assert (replay["status"], replay["replayed"]) == (201, "true")
    assert first["growth_mb"] < BOUND_MB, spooled
    assert replay["growth_mb"] < BOUND_MB, spooled
    # The same measurement with spooling off sees the response held in memory: the bound
    # above is one the old path could not meet.
    held = _child(framework, 1 << 40, tmp_path / "held")
    assert held["answers"][0]["sha256"] == held["expected"]
    assert held["answers"][0]["growth_mb"] > SIZE_MB, held


def _guard(local_client: Any, tmp_path: Path, **changes: Any) -> Idempotency:
    store = DirectoryResultStore(tmp_path / "results")
    config = IdempotencyConfig(table_name="spooling", result_store=store, **changes)
    guard = Idempotency(config, client=local_client)
    guard.ensure_table()
    return guard


def _wsgi_app(body: bytes, runs: list[int]) -> Any:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        runs.append(1)
        start_response("200 OK", [("Content-Type", "text/csv")])
        return [body[i : i + 65536] for i in range(0, len(body), 65536)]

    return app


def _wsgi_call(app: Any, key: str) -> tuple[dict[str, str], bytes]:
    answer = wsgi_request(app, "/exports", key, body=b"")
    return answer.headers, answer.body


def test_the_spool_file_is_closed_once_the_response_is_sent(
    local_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Any] = []  # held here: only an explicit close() can close them
    real = tempfile.TemporaryFile

    def recorded(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    body = os.urandom(3 * MB)
    runs: list[int] = []
    guard = _guard(local_client, tmp_path)
    app = WSGIIdempotencyMiddleware(
        _wsgi_app(body, runs), guard=guard, config=HttpConfig(spool_threshold=MB)
    )
    _, first = _wsgi_call(app, "csv-1")
    headers, again = _wsgi_call(app, "csv-1")
    assert first == again == body and len(runs) == 1
    assert headers["idempotent-replayed"] == "true"
    assert len(made) == 1 and made[0].closed  # spooled once, closed once sent


def test_a_spooled_response_with_a_cipher_is_sealed_whole(
    local_client: Any, tmp_path: Path
) -> None:
    body = os.urandom(2 * MB)
    runs: list[int] = []
    guard = _guard(local_client, tmp_path, result_cipher=LocalKeyCipher({"k": os.urandom(32)}, "k"))
    app = WSGIIdempotencyMiddleware(
        _wsgi_app(body, runs), guard=guard, config=HttpConfig(spool_threshold=MB // 2)
    )
    assert _wsgi_call(app, "sealed-1")[1] == body
    assert _wsgi_call(app, "sealed-1")[1] == body and len(runs) == 1
    objects = [p for p in (tmp_path / "results").rglob("*") if p.is_file() and "." not in p.name]
    assert len(objects) == 1
    assert body[:4096] not in objects[0].read_bytes()


def test_a_spooled_response_small_enough_for_the_record_stays_inline(
    local_client: Any, tmp_path: Path
) -> None:
    body = b"a,b\n" * 40_000  # 160 KB: over the spool threshold, under the store's
    runs: list[int] = []
    guard = _guard(local_client, tmp_path, result_store_threshold=300_000)
    app = WSGIIdempotencyMiddleware(
        _wsgi_app(body, runs), guard=guard, config=HttpConfig(spool_threshold=65536)
    )
    assert _wsgi_call(app, "inline-1")[1] == body
    headers, again = _wsgi_call(app, "inline-1")
    assert again == body and len(runs) == 1 and headers["idempotent-replayed"] == "true"
    assert not list((tmp_path / "results").rglob("*/*/*"))  # nothing went to the store
    assert hashlib.sha256(again).digest() == hashlib.sha256(body).digest()


def test_asgi_sends_a_spooled_first_response_in_pieces(local_client: Any, tmp_path: Path) -> None:

    body = os.urandom(5 * MB)

    async def handler(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    app = IdempotencyMiddleware(
        handler, guard=_guard(local_client, tmp_path), config=HttpConfig(spool_threshold=MB)
    )
    answer = asgi_request(app, "/x", "k-1", body=b"")
    assert answer.body == body
    assert max(len(p) for p in answer.pieces) <= MB  # read back from the file a piece at a time
    assert not answer.more_body[-1] and all(answer.more_body[:-1])
