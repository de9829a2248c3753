"""The security proof suite: every route, with auth on and off, against every tampering.

Routes: the data plane (``PutItem``), the admin API (moving the clock), the session (logging
in) and a mounted app. Each request either takes effect (the item is written, the clock moves,
a cookie is set, the app is called) or is refused with the expected status and takes no effect
at all: the test checks the engine's state, not only the status.

What the table below says, in words: with ``--require-auth`` every route but the login needs a
valid SigV4 signature (the data plane) or a signature or session cookie (admin API, mounted
apps); a tampered signature, body or date, a stale date or a wrong secret is refused. In every
mode, the admin API, the session and mounted apps refuse requests from another origin. The data
plane ignores ``Origin`` as DynamoDB does: a browser cannot reach it cross-site at all, since
``X-Amz-Target`` needs a CORS preflight the server never grants.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from security_helpers import AMZ_JSON, KEY, SECRET, EchoApp, sign

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread

ROUTES = ("data", "admin", "session", "mount")
SCENARIOS = (
    "none",
    "signed",
    "cookie",
    "foreign-origin",
    "cross-site",
    "tampered-signature",
    "tampered-body",
    "tampered-date",
    "stale-date",
    "wrong-secret",
)
TAMPERED = ("tampered-signature", "tampered-body", "tampered-date", "stale-date", "wrong-secret")


@dataclass
class Served:
    auth: bool
    engine: Engine
    url: str
    echo: EchoApp
    cookie: str  # a live session cookie ("" without auth)


@pytest.fixture(scope="module", params=[False, True], ids=["auth-off", "auth-on"])
def served(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    auth: bool = request.param
    path: Path = tmp_path_factory.mktemp("security") / "engine.db"
    echo = EchoApp()
    with Engine(path) as engine:
        engine.execute(
            "CreateTable",
            {
                "TableName": "sec",
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )
        credentials = {KEY: SECRET} if auth else None
        with ServerThread(engine, credentials=credentials, mounts={"/console": echo}) as url:
            login = httpx.post(
                url + "/_firstwrite/session",
                json={"access_key_id": KEY, "secret_access_key": SECRET},
            )
            assert login.status_code == 200, login.text
            cookie = "; ".join(f"{k}={v}" for k, v in login.cookies.items())
            assert bool(cookie) == auth
            yield Served(auth, engine, url, echo, cookie)


@dataclass
class Attempt:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]
    effect: Any  # () -> bool: whether the request took effect


def _base(served: Served, route: str) -> tuple[str, str, bytes, bytes, dict[str, str], Any]:
    """(method, path, body, another body, headers, effect check) of one route's request."""
    if route == "data":
        key, other = f"k-{uuid.uuid4().hex}", f"k-{uuid.uuid4().hex}"

        def put(pk: str) -> bytes:
            return json.dumps({"TableName": "sec", "Item": {"pk": {"S": pk}}}).encode()

        def written() -> bool:
            found = [
                served.engine.execute("GetItem", {"TableName": "sec", "Key": {"pk": {"S": k}}})
                for k in (key, other)
            ]
            return any("Item" in f for f in found)

        headers = {"Content-Type": AMZ_JSON, "X-Amz-Target": "DynamoDB_20120810.PutItem"}
        return "POST", "/", put(key), put(other), headers, written
    if route == "admin":
        before = served.engine.clock.state()["offset"]
        return (
            "POST",
            "/_firstwrite/clock",
            b'{"advance": 3600}',
            b'{"advance": 86400}',
            {"Content-Type": "application/json"},
            lambda: served.engine.clock.state()["offset"] != before,
        )
    if route == "session":
        body = json.dumps({"access_key_id": KEY, "secret_access_key": SECRET}).encode()
        other = json.dumps({"access_key_id": KEY, "secret_access_key": "guess"}).encode()
        return (
            "POST",
            "/_firstwrite/session",
            body,
            other,
            {"Content-Type": "application/json"},
            None,
        )
    calls = len(served.echo.calls)
    return (
        "POST",
        "/console/echo",
        b'{"x": 1}',
        b'{"x": 2}',
        {"Content-Type": "application/json"},
        lambda: len(served.echo.calls) != calls,
    )


def _attempt(served: Served, route: str, scenario: str) -> Attempt:
    method, path, body, other, headers, effect = _base(served, route)
    url = served.url + path
    sent = body
    if scenario == "none":
        return Attempt(method, path, body, headers, effect)
    if scenario == "cookie":
        return Attempt(method, path, body, {**headers, "Cookie": served.cookie}, effect)
    secret = "not-the-secret" if scenario == "wrong-secret" else SECRET
    at = None
    if scenario == "stale-date":
        at = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        at -= datetime.timedelta(minutes=20)
    signed = sign(method, url, body, headers, secret=secret, at=at)
    if scenario in ("foreign-origin", "cross-site"):
        signed["Cookie"] = served.cookie
        if scenario == "foreign-origin":
            signed["Origin"] = "http://evil.example"
        else:
            signed["Sec-Fetch-Site"] = "cross-site"
    elif scenario == "tampered-signature":
        auth = signed["Authorization"]
        signed["Authorization"] = auth[:-1] + ("0" if auth[-1] != "0" else "1")
    elif scenario == "tampered-body":
        sent = other
    elif scenario == "tampered-date":
        stamp = datetime.datetime.strptime(signed["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
        signed["X-Amz-Date"] = (stamp + datetime.timedelta(seconds=1)).strftime("%Y%m%dT%H%M%SZ")
    return Attempt(method, path, sent, signed, effect)


def _expected(auth: bool, route: str, scenario: str) -> int | str:
    """200, a refusal's HTTP status, or a DynamoDB error code (the data plane's refusals)."""
    if route != "data" and scenario in ("foreign-origin", "cross-site"):
        return 403
    if scenario == "foreign-origin":  # an origin not allowed (--allow-origin): no CORS, 403
        return 403
    if route == "session" and auth and scenario == "tampered-body":
        return 401  # the body sent is a login with a guessed secret
    if not auth or route == "session":  # the login needs no credentials (it checks its body)
        return 200
    if scenario in ("signed", "foreign-origin", "cross-site"):
        return 200
    if scenario == "cookie":
        return 200 if route != "data" else "MissingAuthenticationTokenException"
    if scenario == "none":
        return 401 if route != "data" else "MissingAuthenticationTokenException"
    assert scenario in TAMPERED
    return 401 if route != "data" else "InvalidSignatureException"


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("route", ROUTES)
def test_route(served: Served, route: str, scenario: str) -> None:
    attempt = _attempt(served, route, scenario)
    response = httpx.request(
        attempt.method, served.url + attempt.path, content=attempt.body, headers=attempt.headers
    )
    expected = _expected(served.auth, route, scenario)
    if expected == 200:
        assert response.status_code == 200, response.text
        if attempt.effect is not None:
            assert attempt.effect()
        if route == "session":
            assert ("set-cookie" in response.headers) == served.auth
        if route == "mount":
            seen = response.json()
            assert seen["path"] == "/console/echo" and seen["root_path"] == "/console"
            assert seen["body"] == attempt.body.decode()  # a signed body reaches the app whole
            principal = seen["principal"], seen["via"]
            if not served.auth:
                assert principal == (None, None)
            elif scenario == "cookie":
                assert principal == (KEY, "session")
            else:
                assert principal == (KEY, "sigv4")
        return
    if isinstance(expected, str):  # the data plane answers as DynamoDB does
        assert response.status_code == 400, response.text
        assert response.json()["__type"].endswith("#" + expected)
    else:
        assert response.status_code == expected, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["status"] == expected
    if attempt.effect is not None:
        assert not attempt.effect(), "a refused request took effect"
    if route == "session":
        assert "set-cookie" not in response.headers


@pytest.mark.parametrize("route", ["admin", "session", "mount"])
@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("multipart/form-data; boundary=x", 415),
        (None, 415),  # a body without a content type
        ("application/json; charset=utf-8", 200),
        ("application/merge-patch+json", 200),
    ],
)
def test_state_changes_take_json_only(
    served: Served, route: str, content_type: str | None, status: int
) -> None:
    method, path, body, _other, _headers, effect = _base(served, route)
    headers = {"Cookie": served.cookie}
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = httpx.request(method, served.url + path, content=body, headers=headers)
    assert response.status_code == status, response.text
    if status == 415:
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["title"] == "Unsupported Media Type"
    if effect is not None:
        assert effect() == (status == 200)


def test_same_origin_requests_are_served(served: Served) -> None:
    # What a page of the server's own origin sends: its own Origin, Sec-Fetch-Site same-origin.
    headers = {
        "Origin": served.url,
        "Sec-Fetch-Site": "same-origin",
        "Cookie": served.cookie,
        "Content-Type": "application/json",
    }
    response = httpx.post(served.url + "/console/x", content=b"{}", headers=headers)
    assert response.status_code == 200
    typed = {**headers, "Sec-Fetch-Site": "none"}  # the user typed the URL
    assert httpx.get(served.url + "/_firstwrite/clock", headers=typed).status_code == 200
    for origin in ("http://localhost:1", served.url.replace("127.0.0.1", "localhost"), "null"):
        refused = httpx.get(
            served.url + "/_firstwrite/clock", headers={**headers, "Origin": origin}
        )
        assert refused.status_code == 403, origin
    same_site = {**headers, "Sec-Fetch-Site": "same-site"}  # another port of the same host
    assert httpx.get(served.url + "/_firstwrite/clock", headers=same_site).status_code == 403


def test_guarded_answers_cannot_be_framed_or_sniffed(served: Served) -> None:
    response = httpx.get(served.url + "/_firstwrite/clock", headers={"Cookie": served.cookie})
    assert response.headers["x-frame-options"] == "SAMEORIGIN"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_data_plane_grants_no_cors_preflight(served: Served) -> None:
    # A page of another origin must preflight X-Amz-Target: the server allows no origin unless
    # told to (--allow-origin; tests/engine/server/test_cors.py), so it refuses this one.
    response = httpx.options(
        served.url + "/",
        headers={
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-amz-target,content-type",
        },
    )
    assert response.status_code == 403
    assert "--allow-origin" in response.json()["detail"]
    assert not any(h.startswith("access-control-") for h in response.headers)


def test_health_check_stays_open(served: Served) -> None:
    # As DynamoDB's own endpoint answers GET / without credentials; it tells nothing.
    assert httpx.get(served.url + "/").text == "healthy: " + served.url.removeprefix("http://")
