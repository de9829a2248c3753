"""Credentials are checked from the headers before any body is read, and the bodies of the admin
API and mounted apps are capped and paced like the data plane's.

Issue 27, finding 3: with ``--require-auth``, a request to ``/_firstwrite/*`` or ``/console/*``
with any ``Authorization`` header had its body (up to 16 MiB) read whole before the date, scope
or key id was checked, outside the data plane's pace and budget. A real ``firstwrite engine
serve --require-auth`` on loopback.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

BOGUS = (
    "AWS4-HMAC-SHA256 Credential=NOBODY/20200101/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=00"
)
SIXTEEN_MIB = 16 * 1024 * 1024


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _rss_mib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS"))
    return int(line.split()[1]) // 1024


def _head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {BOGUS}\r\n"
        f"X-Amz-Date: 20200101T000000Z\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def test_a_bad_signature_is_refused_before_its_body_arrives(
    cli_server: Callable[..., Any],
) -> None:
    server = cli_server("--require-auth", "AKID:secret")
    for path in ("/_firstwrite/clock", "/console/api/run", "/_firstwrite/session"):
        with socket.create_connection(_address(server.url), timeout=5) as sock:
            sock.sendall(_head(path, SIXTEEN_MIB) + b"{")  # and nothing more
            started = time.monotonic()
            answer = sock.recv(4096)
            took = time.monotonic() - started
        # (The login takes no signature: its announced body is over the cap, refused at once.)
        status = b"413" if path == "/_firstwrite/session" else b"401"
        assert answer.startswith(b"HTTP/1.1 " + status), (path, answer[:300])
        assert b"application/problem+json" in answer
        assert took < 2, f"{path}: answered after {took:.1f} s"


def test_bad_signatures_with_big_bodies_cost_no_memory(cli_server: Callable[..., Any]) -> None:
    server = cli_server("--require-auth", "AKID:secret")
    time.sleep(0.5)
    baseline = _rss_mib(server.process.pid)
    peak = [baseline]
    body = b"x" * SIXTEEN_MIB
    statuses: list[bytes] = []

    def send(i: int) -> None:
        path = "/_firstwrite/clock" if i % 2 else "/console/api/run"
        with socket.create_connection(_address(server.url), timeout=60) as sock:
            try:
                sock.sendall(_head(path, len(body)))
                sock.sendall(body)
            except OSError:  # answered and closed before the body was all sent
                pass
            try:
                statuses.append(sock.recv(12))
            except OSError:
                statuses.append(b"reset")
        peak[0] = max(peak[0], _rss_mib(server.process.pid))

    senders = [threading.Thread(target=send, args=(i,)) for i in range(24)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(120)
    time.sleep(1.0)
    after = _rss_mib(server.process.pid)
    assert all(s in (b"HTTP/1.1 401", b"reset", b"") for s in statuses), statuses
    assert peak[0] < baseline + 64, f"RSS {baseline} MiB, peak {peak[0]} MiB"
    assert after <= baseline * 1.1 + 2, f"RSS {baseline} MiB before, {after} MiB after"


def test_admin_and_console_bodies_are_capped(cli_server: Callable[..., Any]) -> None:
    server = cli_server("--require-auth", "AKID:secret")
    with httpx.Client(base_url=server.url, timeout=60) as browser:
        login = {"access_key_id": "AKID", "secret_access_key": "secret"}
        assert browser.post("/_firstwrite/session", json=login).status_code == 200
        big = b'{"advance": 1, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        for path in ("/_firstwrite/clock", "/console/api/run"):
            answer = browser.post(path, content=big, headers={"Content-Type": "application/json"})
            assert answer.status_code == 413, (path, answer.text[:200])
            assert answer.headers["content-type"] == "application/problem+json"
        assert browser.post("/_firstwrite/clock", json={"advance": 1}).status_code == 200


# --- issue 39, point 3: every route, the data plane included ----------------------------------


def _routes() -> list[tuple[str, str]]:
    """Every (method, path) the CLI's server answers, listed from the app itself: the data
    plane's own paths, then each route of the composed admin API, session and mounted apps
    (Starlette's route objects, mounts walked), so a route added later is covered here too."""
    from starlette.routing import Mount, Route

    from firstwrite.console import PUBLIC_PATHS, create_console
    from firstwrite.engine.api import Engine
    from firstwrite.engine.server.app import Mounted, create_app

    listed = [("POST", "/"), ("GET", "/"), ("PUT", "/"), ("POST", "/elsewhere"), ("GET", "/nope")]
    with Engine() as engine:
        console = create_console(engine, seed=False)
        app = create_app(
            engine,
            credentials={"AKID": "secret"},
            mounts={"/console": Mounted(console, public=PUBLIC_PATHS)},
        )
        try:
            pending: list[tuple[str, Any]] = [("", route) for route in app.control.app.routes]
            while pending:
                prefix, route = pending.pop()
                if isinstance(route, Mount):
                    inner = getattr(route, "routes", None) or []
                    pending += [(prefix + route.path, r) for r in inner]
                    if not inner:  # an app without routes (static files): one path under it
                        listed.append(("POST", prefix + route.path + "/x"))
                elif isinstance(route, Route):
                    path = prefix + route.path.replace("{", "").replace("}", "")
                    listed += [(m, path.split(":")[0]) for m in sorted(route.methods or {"GET"})]
        finally:
            app.close()
    return sorted(set(listed))


def test_every_route_refuses_unknown_credentials_before_a_stalled_body(
    cli_server: Callable[..., Any],
) -> None:
    """Each route, with an unknown key dated 2020 and 16 MiB announced, one byte sent: an answer
    within a second and the connection closed (no body read); the server's memory unmoved."""
    server = cli_server("--require-auth", "AKID:secret")
    routes = _routes()
    assert ("POST", "/") in routes and ("POST", "/_firstwrite/clock") in routes
    assert any(path.startswith("/console/api/") for _, path in routes), routes
    time.sleep(0.5)
    baseline = _rss_mib(server.process.pid)
    slow: list[str] = []
    for method, path in routes:
        head = _head(path, SIXTEEN_MIB).replace(b"POST ", method.encode() + b" ", 1)
        if path != "/" or method == "POST":
            head = head.replace(b"\r\n\r\n", b"\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\n\r\n")
        with socket.create_connection(_address(server.url), timeout=5) as sock:
            sock.sendall(head + b"{")  # and nothing more
            started = time.monotonic()
            answer = b""
            while chunk := sock.recv(65536):  # until the server closes the connection
                answer += chunk
            took = time.monotonic() - started
        status = int(answer[9:12])
        if (method, path) == ("GET", "/"):  # the health check: public by design, body unread
            assert status == 200, answer[:300]
        else:
            assert 400 <= status < 500, (method, path, answer[:300])
        if took > 1.0:
            slow.append(f"{method} {path}: {took:.2f} s")
    assert not slow, slow
    assert _rss_mib(server.process.pid) <= baseline + 4, "RSS grew"


def test_the_data_plane_judges_credentials_before_the_body(cli_server: Callable[..., Any]) -> None:
    """Issue 39, point 3: ``POST /`` with an unknown key, a 2020 date and 16 MiB announced got no
    answer in 4 s (the body was awaited, then read and parsed for nobody). DynamoDB's own errors,
    at once, from the headers alone; a known key with a wrong signature still needs the body."""
    server = cli_server("--require-auth", "AKID:secret")
    now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    cases = {
        # (Authorization, X-Amz-Date) -> DynamoDB's error type
        (BOGUS, "20200101T000000Z"): "InvalidSignatureException",  # (the date goes first)
        (BOGUS.replace("20200101", now[:8]), now): "UnrecognizedClientException",
        ("AWS4-HMAC-SHA256 Signature=00", now): "IncompleteSignatureException",
        ("", now): "MissingAuthenticationTokenException",
    }
    for (authorization, date), expected in cases.items():
        head = (
            f"POST / HTTP/1.1\r\nHost: localhost\r\nAuthorization: {authorization}\r\n"
            f"X-Amz-Date: {date}\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\n"
            f"Content-Type: application/x-amz-json-1.0\r\nContent-Length: {SIXTEEN_MIB}\r\n\r\n"
        ).encode()
        with socket.create_connection(_address(server.url), timeout=5) as sock:
            sock.sendall(head + b"{")
            started = time.monotonic()
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
        assert f"#{expected}".encode() in answer or f'"{expected}'.encode() in answer, answer
        assert took < 3.0, f"{expected}: {took:.2f} s"  # not the body's wait (the socket's 5 s)
