"""The browser session: ``POST /_firstwrite/session`` trades the key pair for an HttpOnly,
SameSite=Strict cookie holding a random server-side token; admin routes and mounted apps accept
it; ``DELETE`` logs out. Also: the guard's host check (DNS rebinding) and websocket handling."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from http.cookies import SimpleCookie
from typing import Any

import httpx
import pytest
from security_helpers import KEY, SECRET, EchoApp, sign

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import Mounted, ServerThread
from firstwrite.engine.server.auth import Guard
from firstwrite.engine.server.origins import HostCheck
from firstwrite.engine.server.session import PRINCIPAL_SCOPE_KEY, Principal, Sessions

LOGIN = {"access_key_id": KEY, "secret_access_key": SECRET}


@pytest.fixture
def echo() -> EchoApp:
    return EchoApp()


@pytest.fixture
def thread(engine: Engine, echo: EchoApp) -> Iterator[ServerThread]:
    mounted = Mounted(echo, public=("/login", "/static/"))
    server = ServerThread(
        engine, credentials={KEY: SECRET, "AKIDOTHER": "other"}, mounts={"/console": mounted}
    )
    with server:
        yield server


@pytest.fixture
def http(thread: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=thread.url, timeout=10) as client:
        yield client


def test_login_sets_a_strict_http_only_cookie(http: httpx.Client, thread: ServerThread) -> None:
    assert http.get("/_firstwrite/session").json() == {
        "auth_required": True,
        "principal": None,
        "via": None,
        "expires": None,
    }
    response = http.post("/_firstwrite/session", json=LOGIN)
    assert response.status_code == 200
    state = response.json()
    assert state["principal"] == KEY and state["via"] == "session" and state["expires"] > 0
    jar: SimpleCookie = SimpleCookie()
    jar.load(response.headers["set-cookie"])
    port = thread.url.rsplit(":", 1)[1]
    morsel = jar[f"firstwrite_session{port}"]
    assert morsel["httponly"] and morsel["samesite"] == "Strict" and morsel["path"] == "/"
    assert int(morsel["max-age"]) > 0 and not morsel["secure"]  # plain http on loopback
    assert len(morsel.value) >= 40  # 32 random bytes, URL-safe base64
    assert morsel.value not in repr(thread.app.sessions._by_digest)  # only its hash is kept
    who = http.get("/_firstwrite/session").json()
    assert who["principal"] == KEY and who["expires"] == state["expires"]


def test_the_cookie_opens_admin_and_mounts_not_the_data_plane(
    http: httpx.Client, engine: Engine, echo: EchoApp
) -> None:
    assert http.post("/_firstwrite/clock", json={"advance": 10}).status_code == 401
    assert http.post("/_firstwrite/session", json=LOGIN).status_code == 200
    assert http.post("/_firstwrite/clock", json={"advance": 10}).json()["offset"] == 10.0
    seen = http.post("/console/api/x", json={}).json()
    assert (seen["principal"], seen["via"]) == (KEY, "session")
    data = http.post(
        "/",
        content=b"{}",
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810.ListTables",
        },
    )
    assert data.json()["__type"].endswith("#MissingAuthenticationTokenException")


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"access_key_id": KEY, "secret_access_key": "wrong"}, 401),
        ({"access_key_id": "AKIDUNKNOWN", "secret_access_key": SECRET}, 401),
        ({"access_key_id": "AKIDOTHER", "secret_access_key": SECRET}, 401),  # another key's
        ({"access_key_id": KEY}, 400),
        ({"access_key_id": KEY, "secret_access_key": 5}, 400),
        ({**LOGIN, "remember": True}, 400),
        ([KEY, SECRET], 400),
    ],
)
def test_bad_logins(http: httpx.Client, body: Any, status: int) -> None:
    response = http.post("/_firstwrite/session", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert "set-cookie" not in response.headers
    assert http.get("/_firstwrite/clock").status_code == 401


def test_logins_refuse_forms_and_foreign_pages(http: httpx.Client) -> None:
    form = http.post("/_firstwrite/session", data=LOGIN)  # application/x-www-form-urlencoded
    assert form.status_code == 415 and "set-cookie" not in form.headers
    foreign = http.post(
        "/_firstwrite/session", json=LOGIN, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403 and "set-cookie" not in foreign.headers


def test_logout_revokes_the_token(http: httpx.Client) -> None:
    http.post("/_firstwrite/session", json=LOGIN)
    stolen = dict(http.cookies)
    assert http.get("/_firstwrite/clock").status_code == 200
    out = http.delete("/_firstwrite/session")
    assert out.status_code == 200 and out.json()["principal"] is None
    assert "Max-Age=0" in out.headers["set-cookie"]
    assert http.get("/_firstwrite/clock").status_code == 401
    # The old token, replayed by someone who copied it, is dead on the server too.
    replayed = httpx.get(str(http.base_url) + "/_firstwrite/clock", cookies=stolen)
    assert replayed.status_code == 401


def test_sessions_expire(http: httpx.Client, thread: ServerThread) -> None:
    now = [1_000_000.0]
    thread.app.sessions.clock = lambda: now[0]
    http.post("/_firstwrite/session", json=LOGIN)
    assert http.get("/_firstwrite/clock").status_code == 200
    now[0] += thread.app.sessions.lifetime + 1
    assert http.get("/_firstwrite/clock").status_code == 401
    assert http.get("/_firstwrite/session").json()["principal"] is None


def test_forged_and_malformed_cookies_are_no_session(
    http: httpx.Client, thread: ServerThread
) -> None:
    port = thread.url.rsplit(":", 1)[1]
    for cookie in (f"firstwrite_session{port}=forged", 'a="\\', "firstwrite_session=x", "="):
        response = http.get("/_firstwrite/clock", headers={"Cookie": cookie})
        assert response.status_code == 401, cookie


def test_sigv4_still_works_beside_sessions(http: httpx.Client, thread: ServerThread) -> None:
    url = thread.url + "/console/api/y?z=1"
    body = b'{"q": [1, 2]}'
    seen = httpx.post(
        url, content=body, headers=sign("POST", url, body, {"Content-Type": "application/json"})
    )
    assert seen.status_code == 200
    assert seen.json()["principal"] == KEY and seen.json()["via"] == "sigv4"
    assert seen.json()["body"] == body.decode()


def test_mounted_public_paths_need_no_session(http: httpx.Client, echo: EchoApp) -> None:
    assert http.get("/console/login").status_code == 200
    assert http.get("/console/static/app.js").status_code == 200
    assert [c["principal"] for c in echo.calls] == [None, None]
    assert http.get("/console/").status_code == 401
    assert http.get("/console/loginx").status_code == 401  # "/login" is that path exactly
    # Public paths keep the same-origin and JSON-only rules.
    assert http.get("/console/login", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert (
        http.post(
            "/console/login", content=b"x", headers={"Content-Type": "text/plain"}
        ).status_code
        == 415
    )
    http.post("/_firstwrite/session", json=LOGIN)
    assert http.get("/console/login").json()["principal"] == KEY  # known once logged in


def test_sessions_are_bounded() -> None:
    sessions = Sessions(limit=3)
    tokens = [sessions.create(f"key{i}")[0] for i in range(5)]
    assert [sessions.lookup(t) is not None for t in tokens] == [False, False, True, True, True]


# --- hosts: DNS rebinding --------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/_firstwrite/clock", "/console/x"])
def test_a_loopback_server_answers_loopback_names_only(engine: Engine, path: str) -> None:
    with ServerThread(engine, mounts={"/console": EchoApp()}) as url:
        port = url.rsplit(":", 1)[1]
        method = "POST" if path == "/" else "GET"
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810.ListTables",
        }
        for host, status in (
            (f"127.0.0.1:{port}", 200),
            (f"localhost:{port}", 200),
            (f"app.localhost:{port}", 200),
            (f"127.0.0.2:{port}", 200),
            (f"evil.example:{port}", 403),  # a rebound name: same-origin to the browser
            (f"localhost.evil.example:{port}", 403),
            (f"[::1]:{port}", 200),
        ):
            response = httpx.request(
                method, url + path, content=b"{}", headers={**headers, "Host": host}
            )
            assert response.status_code == status, (host, response.text)
            if status == 403:
                assert response.headers["content-type"] == "application/problem+json"
                assert "loopback" in response.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/", 200), ("HEAD", "/", 200), ("DELETE", "/", 405), ("GET", "/nowhere", 404)],
)
def test_the_health_check_and_unknown_routes_apply_the_host_policy_too(
    engine: Engine, method: str, path: str, status: int
) -> None:
    # GET / answered any Host (it tells nothing, but a rebound page could still probe for the
    # server): one policy for every route. A load balancer's health check that sends its own
    # name or address as Host is allowed by naming it (--allow-host).
    with ServerThread(engine, allowed_hosts=["10.0.0.7"]) as url:
        port = url.rsplit(":", 1)[1]
        for host, expected in (
            (f"localhost:{port}", status),
            ("10.0.0.7", status),
            (f"evil.example:{port}", 403),
        ):
            response = httpx.request(method, url + path, headers={"Host": host})
            assert response.status_code == expected, (host, response.text)
            if expected == 403 and method != "HEAD":
                assert response.headers["content-type"] == "application/problem+json"
                assert "loopback" in response.json()["detail"]


def test_allowed_hosts_and_non_loopback_binds(engine: Engine) -> None:
    with ServerThread(engine, allowed_hosts=["dynamodb.test"]) as url:
        ok = httpx.get(url + "/_firstwrite/clock", headers={"Host": "dynamodb.test:1"})
        assert ok.status_code == 200
    assert HostCheck("0.0.0.0").allows(b"anything:1")  # bound beyond loopback: the user's call
    assert HostCheck("127.0.0.1", ["*"]).allows(b"anything:1")
    assert not HostCheck("127.0.0.1").allows(None)


# --- the guard as plain ASGI: websockets -----------------------------------------------------


def _run_websocket(guard: Guard, headers: list[tuple[bytes, bytes]]) -> tuple[list[Any], list[Any]]:
    sent: list[Any] = []
    reached: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope.get(PRINCIPAL_SCOPE_KEY))

    guard.app = app
    messages = [{"type": "websocket.connect"}]

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "websocket",
        "path": "/console/ws",
        "headers": headers,
        "scheme": "ws",
        "server": ("127.0.0.1", 9),
    }
    asyncio.run(guard(scope, receive, send))
    return sent, reached


def test_websockets_are_guarded_too() -> None:
    sessions = Sessions()
    guard = Guard(lambda *a: None, verifier=None, sessions=sessions)  # type: ignore[arg-type,return-value]
    host = (b"host", b"127.0.0.1:9")
    sent, reached = _run_websocket(guard, [host, (b"origin", b"http://evil.example")])
    assert reached == [] and sent == [
        {"type": "websocket.close", "code": 1008, "reason": "Forbidden"}
    ]
    sent, reached = _run_websocket(guard, [host, (b"origin", b"http://127.0.0.1:9")])
    assert reached == [None] and sent == []

    from firstwrite.engine.server.sigv4 import SigV4Verifier

    locked = Guard(lambda *a: None, verifier=SigV4Verifier({KEY: SECRET}), sessions=sessions)  # type: ignore[arg-type,return-value]
    sent, reached = _run_websocket(locked, [host])
    assert reached == [] and sent[0]["code"] == 1008
    token, _ = sessions.create(KEY)
    sent, reached = _run_websocket(
        locked, [host, (b"cookie", f"firstwrite_session9={token}".encode())]
    )
    assert reached == [Principal(KEY, "session")]
