"""``--allow-host`` on ``firstwrite engine serve`` and ``firstwrite demo``, each a real process.

Bound to loopback, a server answers a request naming another host (a page of another site
rebound to 127.0.0.1: issue 27, finding 1) with a 403 problem+json; given
``--allow-host evil.example``, it serves that name too (and still no other).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from engine_process import start_demo, start_server

EVIL = "evil.example"
LIST_TABLES = {
    "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
}


def _send(url: str, host: str, method: str, path: str, **headers: str) -> httpx.Response:
    port = url.rsplit(":", 1)[1]
    body = b"{}" if method == "POST" else None
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.request(
            method, path, content=body, headers={"Host": f"{host}:{port}", **headers}
        )


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code in (403, 421), answer.text[:300]
    assert answer.headers["content-type"] == "application/problem+json"
    assert json.loads(answer.text)["status"] == answer.status_code


Launch = Callable[..., str]


@pytest.fixture(params=["engine", "demo"])
def server(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def launch(server: str, tmp_path: Path) -> Iterator[Launch]:
    """``launch(*args)``: start the server named by the parameter with ``args``; its URL."""
    stops: list[Callable[[], object]] = []

    def start(*args: str) -> str:
        db = tmp_path / f"{server}-{len(stops)}.db"
        if server == "engine":
            engine = start_server(db, *args)
            stops.append(engine.stop)
            return engine.url
        demo = start_demo(db, *args)
        stops.append(lambda: demo.stop(signal.SIGTERM))
        return demo.url

    yield start
    for stop in stops:
        stop()


ROUTES = {
    # (The engine's ``GET /`` is a health check answering any host: it says only "ok".)
    "engine": [("POST", "/", LIST_TABLES), ("GET", "/console/", {})],
    "demo": [("GET", "/", {}), ("GET", "/accounts/acct_alice", {}), ("GET", "/console/", {})],
}


def test_a_rebound_host_is_refused_without_allow_host(server: str, launch: Launch) -> None:
    url = launch()
    for method, path, headers in ROUTES[server]:
        _refused(_send(url, EVIL, method, path, **headers))
        assert _send(url, "localhost", method, path, **headers).status_code == 200


def test_allow_host_serves_that_name_and_no_other(server: str, launch: Launch) -> None:
    url = launch("--allow-host", EVIL)
    for method, path, headers in ROUTES[server]:
        served = _send(url, EVIL, method, path, **headers)
        assert served.status_code == 200, (path, served.text[:300])
        _refused(_send(url, "other.example", method, path, **headers))
