"""The hostile-input proof over request heads and framing, on every server the project starts.

Hypothesis draws raw HTTP/1.1 requests (any headers: hostile hosts and origins, forged
signatures, huge and numerous headers, lying lengths; bodies sent whole or in random chunks,
runs of 1-byte chunks among them) and sends them over raw sockets to a real ``firstwrite engine
serve --require-auth``, a real ``firstwrite demo`` and the console mounted in a user's app
(:mod:`apps`), on every route they serve (data plane, admin API, session; the demo's and the
user's app's routes enumerated from their app objects). Whatever arrives, the answer is never
a 5xx (a closed connection is fine: a refused head or framing may be answered and closed),
and each server is alive with no traceback in its log at the end, its RSS back within 10% of
where it started (plus 4 MiB).

Issue 27's findings each have their regression test (docs/reliability.md lists them all).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import apps
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proofkit import LONG, report, rss_came_back, rss_kib, scale

from engine_process import start_server

pytestmark = pytest.mark.slow

EXAMPLES = scale(150, 2000)
_counts: Counter[str] = Counter()


ENGINE_ROUTES = (
    "/",
    "/_firstwrite/clock",
    "/_firstwrite/session",
    "/console/api/run",
    "/nowhere",
)


def _paths(routes: list[tuple[str, str]]) -> tuple[str, ...]:
    return (*sorted({path for _method, path in routes}), "/nowhere")


ROUTES = {
    "engine": ENGINE_ROUTES,
    "demo": _paths(apps.demo_routes()),
    "console-app": _paths(apps.console_app_routes()),
}


@dataclass
class Served:
    name: str
    url: str
    process: subprocess.Popen[str]
    log: Callable[[], str]

    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        return host, int(port)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Served]]:
    folder = tmp_path_factory.mktemp("heads")
    engine = start_server(folder / "engine.db", "--require-auth", "AKID:secret")
    others = [apps.start(name, tmp_path_factory.mktemp(name)) for name in apps.SERVERS]
    served = [
        Served("engine", engine.url, engine.process, engine.log),
        *(Served(a.name, a.url, a.process, a.log) for a in others),
    ]
    time.sleep(0.5)
    baseline = {s.name: rss_kib(s.process.pid)[0] for s in served}
    yield served
    time.sleep(1.0)
    after = {s.name: rss_kib(s.process.pid)[0] for s in served}
    report(
        "hostile",
        part="heads",
        answers=dict(sorted(_counts.items())),
        rss_mib={n: (baseline[n] // 1024, after[n] // 1024) for n in baseline},
    )
    engine.stop()
    for app in others:
        app.stop()
    # Under the user's plain uvicorn what a head costs is uvicorn's: bounded by its known limit
    # (apps.PLAIN_UVICORN_LIMITS, as in test_hostile_apps.py), the others by the proof's rule.
    grown = []
    for n in baseline:
        limit = apps.known_limit(n, "heads", LONG).rss_growth_mib
        if limit is None:
            if not rss_came_back(baseline[n], after[n]):
                grown.append(n)
        elif (after[n] - baseline[n]) / 1024 > limit:
            grown.append(n)
    assert grown == [], (baseline, after)


_TOKEN = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"),
    min_size=1,
    max_size=20,
)
_VALUE = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60),
    st.sampled_from(
        [
            "evil.example",
            "evil.example:8080",
            "http://evil.example",
            "null",
            "cross-site",
            "localhost",
            "chunked",
            "gzip",
            "application/json",
            "application/x-amz-json-1.0",
            "DynamoDB_20120810.PutItem",
            "AWS4-HMAC-SHA256 Credential=AKID/20200101/us-east-1/dynamodb/aws4_request, "
            "SignedHeaders=host, Signature=00",
            "99999999999999999999",
            "-1",
        ]
    ),
    st.integers(1, 200_000).map(lambda n: "a" * n),  # up to past the 64 KiB head limit
)
_NAME = st.one_of(
    st.sampled_from(
        [
            "Host",
            "Origin",
            "Sec-Fetch-Site",
            "Authorization",
            "X-Amz-Target",
            "X-Amz-Date",
            "Content-Type",
            "Content-Encoding",
            "Cookie",
            "Connection",
            "Expect",
        ]
    ),
    _TOKEN,
)
_BODY = st.one_of(
    st.binary(max_size=2000),
    st.just(json.dumps({"TableName": "x", "Limit": 2**63}).encode()),
    st.just(json.dumps({"operation": "Scan", "request": "{}"}).encode()),
    st.just(json.dumps({"account": "acct_alice", "amount": 1, "currency": "EUR"}).encode()),
)


@st.composite
def raw_requests(draw: st.DrawFn, routes: tuple[str, ...]) -> tuple[bytes, list[bytes]]:
    """A request's head and the pieces its body is sent in (chunked or with a length)."""
    method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "OPTIONS", "HEAD"]))
    path = draw(st.sampled_from(routes))
    headers = draw(st.lists(st.tuples(_NAME, _VALUE), max_size=12))
    if draw(st.booleans()):  # many small headers
        headers += [(f"X-{i}", "v") for i in range(draw(st.integers(0, 3000)))]
    body = draw(_BODY)
    chunked = draw(st.booleans())
    lines = [f"{method} {path} HTTP/1.1"]
    if not any(n.lower() == "host" for n, _ in headers):
        lines.append("Host: localhost")
    lines += [f"{n}: {v}" for n, v in headers if n.lower() not in ("content-length",)]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        sizes = draw(st.lists(st.integers(1, 512), max_size=40))
        if draw(st.booleans()):  # a run of 1-byte chunks
            sizes = [1] * draw(st.integers(1, 3000)) + sizes
        pieces, at = [], 0
        for size in sizes:
            if at >= len(body):
                break
            pieces.append(body[at : at + size])
            at += size
        if at < len(body):
            pieces.append(body[at:])
        wire = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] + [b"0\r\n\r\n"]
    else:
        lines.append(f"Content-Length: {len(body)}")
        wire = [body]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
    return head, wire


def _exchange(server: Served, head: bytes, wire: list[bytes]) -> bytes:
    with socket.create_connection(server.address(), timeout=30) as sock:
        try:
            sock.sendall(head + b"".join(wire))
        except OSError:
            pass
        try:
            return sock.recv(64)
        except OSError:
            return b""


def _check(server: Served, head: bytes, wire: list[bytes]) -> None:
    answer = _exchange(server, head, wire)
    status = answer[9:12].decode("latin-1") if answer.startswith(b"HTTP/1.") else "closed"
    _counts[f"{server.name}:{status}"] += 1
    assert not status.startswith("5"), f"{server.name}: {answer!r} for {head[:300]!r}"


for _index, _name in enumerate(ROUTES):

    def _make(index: int, name: str) -> None:
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(request=raw_requests(ROUTES[name]))
        def test(servers: list[Served], request: tuple[bytes, list[bytes]]) -> None:
            _check(servers[index], *request)

        test.__name__ = f"test_hostile_heads_and_framing_at_the_{name.replace('-', '_')}"
        globals()[test.__name__] = test

    _make(_index, _name)


def test_the_servers_survived(servers: list[Served]) -> None:
    for server in servers:
        assert server.process.poll() is None, server.name
        assert "Traceback" not in server.log(), server.log()[-3000:]
