"""Hole 1: ``--require-auth`` covers the admin API, and no web page can drive it cross-site.

Before: every ``/_firstwrite/`` route answered unsigned requests (anyone reaching the port could
move the clock a year ahead, and the TTL sweeper then deleted every live item), and accepted
``text/plain``, form and multipart bodies from any ``Origin``, which a page in the developer's
browser can send without a CORS preflight.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from security_helpers import KEY, SECRET, sign

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread

YEAR = 365 * 24 * 3600


@pytest.fixture
def locked(engine: Engine) -> Iterator[str]:
    with ServerThread(engine, credentials={KEY: SECRET}) as url:
        yield url


@pytest.fixture
def open_server(engine: Engine) -> Iterator[str]:
    with ServerThread(engine) as url:
        yield url


def test_require_auth_covers_the_admin_api(engine: Engine, locked: str) -> None:
    before = engine.clock.state()["offset"]
    moved = httpx.post(locked + "/_firstwrite/clock", json={"advance": YEAR})
    assert moved.status_code == 401
    assert moved.headers["content-type"] == "application/problem+json"
    assert engine.clock.state()["offset"] == before  # the year never passed
    crash = httpx.post(locked + "/_firstwrite/faults", json={"kind": "crash", "point": "commit"})
    assert crash.status_code == 401 and engine.faults.active() == []
    for path in ("/_firstwrite/clock", "/_firstwrite/faults", "/_firstwrite/replication"):
        assert httpx.get(locked + path).status_code == 401, path
    # The same request, signed with the data plane's credentials, is served.
    body = json.dumps({"advance": 60}).encode()
    url = locked + "/_firstwrite/clock"
    headers = sign("POST", url, body, {"Content-Type": "application/json"})
    assert httpx.post(url, content=body, headers=headers).status_code == 200
    assert engine.clock.state()["offset"] == pytest.approx(before + 60)


def test_require_auth_covers_the_cli_servers_admin_api(cli_server: Callable[..., Any]) -> None:
    server = cli_server("--require-auth", f"{KEY}:{SECRET}")
    assert httpx.post(server.url + "/_firstwrite/clock", json={"advance": YEAR}).status_code == 401
    url = server.url + "/_firstwrite/clock"
    signed = sign("GET", url)
    state = httpx.get(url, headers=signed)
    assert state.status_code == 200 and state.json()["offset"] == 0.0


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b"],
)
def test_simple_cross_site_requests_are_refused_without_auth_too(
    engine: Engine, open_server: str, content_type: str
) -> None:
    # What a <form> or a no-cors fetch on any web page can send to localhost.
    before = engine.clock.state()["offset"]
    body = b'{"advance": 31536000}'
    for origin in ({"Origin": "http://evil.example"}, {}):
        response = httpx.post(
            open_server + "/_firstwrite/clock",
            content=body,
            headers={"Content-Type": content_type, **origin},
        )
        assert response.status_code == (403 if origin else 415), response.text
        assert response.headers["content-type"] == "application/problem+json"
    assert engine.clock.state()["offset"] == before


def test_unsigned_data_plane_requests_are_refused_with_dynamodbs_error(locked: str) -> None:
    response = httpx.post(
        locked + "/",
        content=b"{}",
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810.ListTables",
        },
    )
    assert response.json() == {
        "__type": "com.amazon.coral.service#MissingAuthenticationTokenException",
        "message": "Request is missing Authentication Token",
    }
