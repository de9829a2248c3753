"""Responses over the inline limit stored in the guard's result store and replayed from it in
chunks (firstwrite.http.streamed_replies), through the ASGI and the WSGI middleware."""

from __future__ import annotations

import hashlib
import io
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from http_support import asgi_request, serve_asgi, serve_wsgi

from firstwrite.http.asgi import IdempotencyMiddleware as ASGIIdempotencyMiddleware
from firstwrite.http.streamed_replies import CHUNK
from firstwrite.http.wsgi import WSGIIdempotencyMiddleware
from firstwrite.idempotency import Idempotency, IdempotencyConfig
from firstwrite.idempotency.result_cipher import LocalKeyCipher
from firstwrite.idempotency.result_store import DirectoryResultStore

MB = 1 << 20
SIZES = [MB, 10 * MB, pytest.param(100 * MB, marks=pytest.mark.slow)]
IDS = ["1MB", "10MB", "100MB"]


def _body(size: int, compressible: bool) -> bytes:
    if compressible:
        line = b'{"id": 123456, "name": "a row of an export", "ok": true}\n'
        return (line * (size // len(line) + 1))[:size]
    return os.urandom(size)


def _guard(local_client: Any, tmp_path: Path, **changes: Any) -> Idempotency:
    store = DirectoryResultStore(tmp_path / "results")
    config = IdempotencyConfig(table_name="http-results", result_store=store, **changes)
    guard = Idempotency(config, client=local_client)
    guard.ensure_table()
    return guard


class Handler:
    """A handler answering ``body`` (as one message / one iterable item), counting its runs."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.runs = 0

    async def asgi(self, scope: Any, receive: Any, send: Any) -> None:
        self.runs += 1
        headers = [(b"content-type", b"application/octet-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        half = len(self.body) // 2
        await send({"type": "http.response.body", "body": self.body[:half], "more_body": True})
        await send({"type": "http.response.body", "body": self.body[half:], "more_body": False})

    def wsgi(self, environ: Any, start_response: Any) -> list[bytes]:
        self.runs += 1
        start_response("201 CREATED", [("Content-Type", "application/octet-stream")])
        return [self.body]


@pytest.mark.parametrize("compressible", [False, True], ids=["random", "text"])
@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_asgi_replays_a_big_response_from_the_store_in_chunks(
    local_client: Any, tmp_path: Path, size: int, compressible: bool
) -> None:
    body = _body(size, compressible)
    handler = Handler(body)
    guard = _guard(local_client, tmp_path, result_store_threshold=1024)  # text compresses well
    app = ASGIIdempotencyMiddleware(handler.asgi, guard=guard)
    first = asgi_request(app, "/exports", "export-1")
    assert first.status == 200
    assert first.body == body
    replay = asgi_request(app, "/exports", "export-1")
    assert handler.runs == 1
    assert replay.headers["idempotent-replayed"] == "true"
    if not compressible:
        assert replay.headers["content-length"] == str(size)
    assert hashlib.sha256(replay.body).digest() == hashlib.sha256(body).digest()
    assert len(replay.pieces) > size // CHUNK // 2  # streamed, not one message
    assert all(replay.more_body[:-1]) and not replay.more_body[-1]


def _environ(key: str) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/exports",
        "QUERY_STRING": "",
        "CONTENT_LENGTH": "2",
        "wsgi.input": io.BytesIO(b"{}"),
        "HTTP_IDEMPOTENCY_KEY": key,
        "wsgi.url_scheme": "http",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
    }


@pytest.mark.parametrize("compressible", [False, True], ids=["random", "text"])
@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_wsgi_replays_a_big_response_from_the_store_as_an_iterable(
    local_client: Any, tmp_path: Path, size: int, compressible: bool
) -> None:
    body = _body(size, compressible)
    handler = Handler(body)
    guard = _guard(local_client, tmp_path, result_store_threshold=1024)
    app = WSGIIdempotencyMiddleware(handler.wsgi, guard=guard)
    seen: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen.append((status, dict((n.lower(), v) for n, v in headers)))
        return lambda _: None

    assert b"".join(app(_environ("export-1"), start_response)) == body
    replay = app(_environ("export-1"), start_response)
    assert not isinstance(replay, list)  # an iterator over the store's chunks
    digest = hashlib.sha256()
    pieces = 0
    for piece in replay:
        digest.update(piece)
        pieces += 1
    assert handler.runs == 1
    assert digest.digest() == hashlib.sha256(body).digest()
    assert pieces > size // CHUNK // 2
    status, headers = seen[-1]
    assert status == "201 CREATED"  # the first answer's status line
    assert headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize("framework", ["asgi", "wsgi"])
def test_a_big_response_replays_over_loopback(
    local_client: Any, tmp_path: Path, framework: str
) -> None:
    body = _body(10 * MB, False)
    handler = Handler(body)
    guard = _guard(local_client, tmp_path)
    if framework == "asgi":
        server = serve_asgi(ASGIIdempotencyMiddleware(handler.asgi, guard=guard))
    else:
        server = serve_wsgi(WSGIIdempotencyMiddleware(handler.wsgi, guard=guard))
    with server as url:
        answers = []
        for _ in range(2):
            request = urllib.request.Request(
                url + "/exports", data=b"{}", headers={"Idempotency-Key": "e-9"}, method="POST"
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                answers.append((response.headers.get("Idempotent-Replayed"), response.read()))
    assert handler.runs == 1
    assert answers[0] == (None, body)
    assert answers[1] == ("true", body)


def test_a_sealed_big_response_replays_whole(local_client: Any, tmp_path: Path) -> None:
    cipher = LocalKeyCipher({"k": os.urandom(32)}, "k")
    body = _body(2 * MB, False)
    handler = Handler(body)
    guard = _guard(local_client, tmp_path, result_cipher=cipher)
    app = ASGIIdempotencyMiddleware(handler.asgi, guard=guard)
    asgi_request(app, "/exports", "sealed-1")
    replay = asgi_request(app, "/exports", "sealed-1")
    assert handler.runs == 1
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.body == body
    stored = next((tmp_path / "results").rglob("*")).parent
    assert all(body[:4096] not in p.read_bytes() for p in stored.rglob("*") if p.is_file())
