"""The demo reads no request body past its cap: ``POST /payments`` stops at 64 KiB.

Issue 27 (second attack): the payments handler read its body whole (``await request.body()``)
behind the middleware's 1 MiB fingerprint limit, for a body of four short fields. Past
:data:`~firstwrite.demo.app.MAX_PAYMENT_BODY` the demo answers 413 problem+json as the body
arrives, whether it declares its length or is chunked, and charges nothing. (The console's
bodies are capped by its own middleware: tests/console.) A real ``firstwrite demo`` process.
"""

from __future__ import annotations

import json
import select
import signal
import socket
import time
from collections.abc import Iterator

import pytest
from test_demo_service import new_key

from engine_process import Demo, start_demo
from firstwrite.demo.app import MAX_PAYMENT_BODY


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = start_demo(tmp_path_factory.mktemp("demo-bodies") / "demo.db")
    yield running
    if running.process.poll() is None:
        running.stop(signal.SIGKILL)


def _padded_payment(size: int) -> bytes:
    """A valid payment of 1 cent, padded with spaces (still valid JSON) to ``size`` bytes."""
    body = json.dumps({"account": "acct_alice", "amount": 1, "currency": "EUR"}).encode()
    return body + b" " * (size - len(body))


def test_the_cap_is_small() -> None:
    assert MAX_PAYMENT_BODY == 64 * 1024


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_payment_body_past_the_cap_is_refused(demo: Demo, chunked: bool) -> None:
    body = _padded_payment(MAX_PAYMENT_BODY + 1024)
    before = demo.balance("acct_alice")
    headers = {"Idempotency-Key": new_key(), "Content-Type": "application/json"}
    content = iter([body[i : i + 4096] for i in range(0, len(body), 4096)]) if chunked else body
    with demo.client() as client:
        answer = client.post("/payments", content=content, headers=headers)
    assert answer.status_code == 413, answer.text[:300]
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["status"] == 413
    assert demo.balance("acct_alice") == before


def test_a_payment_at_the_cap_is_served(demo: Demo) -> None:
    before = demo.balance("acct_alice")
    headers = {"Idempotency-Key": new_key(), "Content-Type": "application/json"}
    with demo.client() as client:
        answer = client.post(
            "/payments", content=_padded_payment(MAX_PAYMENT_BODY), headers=headers
        )
    assert answer.status_code == 201, answer.text[:300]
    assert demo.balance("acct_alice") == before - 1


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_huge_payment_body_is_refused_before_it_is_sent(demo: Demo, chunked: bool) -> None:
    """A 256 MiB body: the answer comes while most of it is still unsent (never buffered)."""
    total, piece = 256 * 1024 * 1024, b"x" * 65536
    host, port = demo.url.removeprefix("http://").rsplit(":", 1)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    head = (
        f"POST /payments HTTP/1.1\r\nHost: {host}:{port}\r\nIdempotency-Key: {new_key()}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()
    frame = b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
    sent, answer = 0, b""
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        deadline = time.monotonic() + 60
        while sent < total and time.monotonic() < deadline:
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(frame)
            except OSError:
                break
            sent += len(piece)
        sock.settimeout(30)
        try:
            answer = sock.recv(4096)
        except OSError:
            pass
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"application/problem+json" in answer
    assert sent < total // 4, sent


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/payments", 413), ("GET", "/accounts/acct_alice", 200)],
    ids=["refused", "ignored"],
)
@pytest.mark.parametrize("library", ["urllib3", "httpx"])
def test_a_client_sending_a_huge_body_whole_still_reads_its_answer(
    demo: Demo, library: str, method: str, path: str, status: int
) -> None:
    """The demo answers these before their body arrives (a payment past its cap; a page that
    ignores its body), then closes the connection rather than read the rest
    (engine/server/connection.py): a client that writes its whole 16 MiB body before reading
    (botocore's urllib3, httpx) sees its send cut short, then reads the answer."""
    body = _padded_payment(16 * 1024 * 1024)
    headers = {"Idempotency-Key": new_key(), "Content-Type": "application/json"}
    before = demo.balance("acct_alice")
    if library == "urllib3":
        import urllib3

        with urllib3.PoolManager(retries=False) as pool:
            reply = pool.request(method, demo.url + path, body=body, headers=headers)
            got, text = reply.status, reply.data.decode()
    else:
        with demo.client() as client:
            answer = client.request(method, path, content=body, headers=headers)
            got, text = answer.status_code, answer.text
    assert got == status, text[:300]
    if status == 200:
        assert json.loads(text)["id"] == "acct_alice"
    assert demo.balance("acct_alice") == before
