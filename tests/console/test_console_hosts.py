"""The console protects itself wherever it is mounted: in a user's own app, served by a plain
uvicorn that checks nothing, it answers only its own hosts and origins.

Issue 27, finding 1: the console compared ``Origin`` with the request's own ``Host``, which a
page rebound to 127.0.0.1 sets to its own name: both matched, and the page could run any
operation through ``/api/run``.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from firstwrite.console import create_console
from firstwrite.engine import Engine

SCAN = {"operation": "ListTables", "request": json.dumps({})}


def _in_a_users_app(console: Any) -> Callable[[Any], Any]:
    """Wrap: the console mounted at /console of a plain Starlette app (no engine guard)."""

    def wrap(_app: Any) -> Any:
        return Starlette(routes=[Mount("/console", app=console)])

    return wrap


@pytest.fixture
def users_app(served: Callable[..., Any], console_engine: Engine) -> Any:
    console = create_console(console_engine, seed=False)
    return served(console_engine, console=console, wrap=_in_a_users_app(console), alone=True)


@pytest.fixture
def users_app_allowing(served: Callable[..., Any], console_engine: Engine) -> Any:
    console = create_console(console_engine, seed=False, allowed_hosts=["console.test"])
    return served(console_engine, console=console, wrap=_in_a_users_app(console), alone=True)


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1]


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/console/api/run"), ("GET", "/console/tables"), ("GET", "/console/")],
)
def test_a_rebound_host_is_refused(users_app: Any, method: str, path: str) -> None:
    site = f"evil.example:{_port(users_app.url)}"
    headers = {"Host": site, "Origin": f"http://{site}"}
    body = SCAN if method == "POST" else None
    answer = httpx.request(method, users_app.url + path, json=body, headers=headers, timeout=30)
    assert answer.status_code == 403, answer.text[:300]
    assert answer.headers["content-type"] == "application/problem+json"
    assert "content-security-policy" in answer.headers


def test_its_own_host_and_origin_are_served(users_app: Any) -> None:
    own = users_app.url.removeprefix("http://")
    answer = httpx.post(
        users_app.url + "/console/api/run",
        json=SCAN,
        headers={"Origin": f"http://{own}", "Sec-Fetch-Site": "same-origin"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text[:300]


def test_another_origin_is_refused(users_app: Any) -> None:
    answer = httpx.post(
        users_app.url + "/console/api/run",
        json=SCAN,
        headers={"Origin": "http://evil.example"},
        timeout=30,
    )
    assert answer.status_code == 403, answer.text[:300]


def test_allowed_hosts_are_answered(users_app_allowing: Any) -> None:
    site = f"console.test:{_port(users_app_allowing.url)}"
    answer = httpx.post(
        users_app_allowing.url + "/console/api/run",
        json=SCAN,
        headers={"Host": site, "Origin": f"http://{site}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text[:300]
    other = f"evil.example:{_port(users_app_allowing.url)}"
    refused = httpx.get(users_app_allowing.url + "/console/", headers={"Host": other}, timeout=30)
    assert refused.status_code == 403


def test_a_client_leaving_mid_body_is_not_an_error(
    users_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the hostile proof: a client that left while its chunked body was being read
    raised ClientDisconnect out of the console, logged as a failed request with a traceback."""
    caplog.set_level(logging.ERROR)
    host, port = users_app.url.removeprefix("http://").rsplit(":", 1)
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                f"POST /console/api/examples HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Origin: {users_app.url}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n".encode()
            )
            time.sleep(0.2)  # its first chunk read, the rest never comes
    time.sleep(0.5)  # the server has seen them go
    with httpx.Client(base_url=users_app.console_url, timeout=10) as client:
        assert client.get("/api/clock").status_code == 200
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
