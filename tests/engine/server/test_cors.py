"""CORS on the DynamoDB endpoint, over HTTP (``server/cors.py``).

What DynamoDB answers (the sources ``server/cors.py`` names): no CORS header without ``Origin``;
with one, ``Access-Control-Allow-Origin: *`` and the exposed headers
``x-amzn-RequestId,x-amzn-ErrorType,x-amzn-ErrorMessage,Date`` on every answer, and on a
preflight (``OPTIONS``) the method and headers asked for, echoed, and ``Access-Control-Max-Age:
172800``. The engine answers so only the origins it is told to (``allowed_origins``,
``--allow-origin``; ``"*"``: every one), refuses the others (403), keeps the ``Host`` policy
first, and never answers CORS on the admin API. A real browser: ``test_cors_browser.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread

APP = "http://localhost:5173"
EXPOSED = "x-amzn-RequestId,x-amzn-ErrorType,x-amzn-ErrorMessage,Date"
TARGET = "DynamoDB_20120810."
JSON_10 = "application/x-amz-json-1.0"
KEY, SECRET = "AKIDCORS", "cors-secret"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type,x-amz-target,authorization,x-amz-date",
}
CREATE = {
    "TableName": "cors",
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


def call(url: str, operation: str, body: str, **headers: str) -> httpx.Response:
    return httpx.post(
        url + "/",
        content=body,
        headers={"Content-Type": JSON_10, "X-Amz-Target": TARGET + operation, **headers},
    )


def signed(url: str, operation: str, body: str, secret: str = SECRET) -> dict[str, str]:
    request = AWSRequest(
        "POST",
        url + "/",
        data=body.encode(),
        headers={"Content-Type": JSON_10, "X-Amz-Target": TARGET + operation},
    )
    SigV4Auth(Credentials(KEY, secret), "dynamodb", "us-east-1").add_auth(request)
    return dict(request.headers.items())


@pytest.fixture
def served(engine: Engine, request: pytest.FixtureRequest) -> Iterator[str]:
    options: dict[str, Any] = getattr(request, "param", {"allowed_origins": [APP]})
    with ServerThread(engine, **options) as url:
        yield url


def test_no_origin_no_cors_headers(served: str) -> None:
    """As DynamoDB: a request without Origin (any SDK outside a browser) gets none."""
    for response in (
        httpx.options(served + "/", headers=PREFLIGHT),
        httpx.get(served + "/"),
        call(served, "ListTables", "{}"),
    ):
        assert response.status_code == 200
        assert cors_headers(response) == {}


def test_a_preflight_from_an_allowed_origin(served: str) -> None:
    response = httpx.options(served + "/", headers={"Origin": APP, **PREFLIGHT})
    assert response.status_code == 200
    assert response.content == b""
    assert cors_headers(response) == {
        "access-control-allow-origin": "*",
        "access-control-expose-headers": EXPOSED,
        "access-control-allow-methods": "POST",
        "access-control-allow-headers": PREFLIGHT["Access-Control-Request-Headers"],
        "access-control-max-age": "172800",
    }
    # Chromium's Private Network Access asks too, for a public page calling a private address.
    private = httpx.options(
        served + "/",
        headers={"Origin": APP, "Access-Control-Request-Private-Network": "true", **PREFLIGHT},
    )
    assert private.headers["access-control-allow-private-network"] == "true"


def test_every_answer_to_an_allowed_origin_carries_the_headers(served: str, engine: Engine) -> None:
    made = call(served, "CreateTable", httpx.Request("POST", "/", json=CREATE).read().decode())
    assert made.status_code == 200
    answers = {
        "success": call(served, "ListTables", "{}", Origin=APP),
        "error": call(served, "DescribeTable", '{"TableName": "nope"}', Origin=APP),
        "not json": call(served, "ListTables", "{", Origin=APP),
        "health": httpx.get(served + "/", headers={"Origin": APP}),
        "unknown path": httpx.get(served + "/nowhere", headers={"Origin": APP}),
    }
    assert [r.status_code for r in answers.values()] == [200, 400, 400, 200, 404]
    for name, response in answers.items():
        assert cors_headers(response) == {
            "access-control-allow-origin": "*",
            "access-control-expose-headers": EXPOSED,
        }, name
    assert answers["success"].json() == {"TableNames": ["cors"]}
    # The error's type is one of the exposed headers' worth: the body a page's SDK parses.
    assert answers["error"].json()["__type"].endswith("#ResourceNotFoundException")


def test_another_origin_is_refused_and_nothing_happens(served: str, engine: Engine) -> None:
    body = httpx.Request("POST", "/", json=CREATE).read().decode()
    for response in (
        httpx.options(served + "/", headers={"Origin": "http://evil.example", **PREFLIGHT}),
        httpx.get(served + "/", headers={"Origin": "http://evil.example"}),
        call(served, "CreateTable", body, Origin="http://evil.example"),
        call(served, "CreateTable", body, Origin="null"),
    ):
        assert response.status_code == 403
        assert response.headers["content-type"] == "application/problem+json"
        assert "--allow-origin" in response.json()["detail"]
        assert cors_headers(response) == {}
    assert engine.execute("ListTables", {})["TableNames"] == []


@pytest.mark.parametrize("served", [{"allowed_origins": ["*"]}], indirect=True)
def test_star_allows_every_origin(served: str) -> None:
    for origin in ("http://evil.example", "https://app.example.com:8443", "null"):
        response = httpx.options(served + "/", headers={"Origin": origin, **PREFLIGHT})
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("served", [{"allowed_origins": ["*"]}], indirect=True)
def test_the_admin_api_never_answers_cors(served: str, engine: Engine) -> None:
    """Whatever the data plane allows, the admin API stays same-origin (server/auth.py)."""
    before = engine.clock.state()["offset"]
    preflight = httpx.options(served + "/_firstwrite/clock", headers={"Origin": APP, **PREFLIGHT})
    assert cors_headers(preflight) == {}
    moved = httpx.post(served + "/_firstwrite/clock", json={"advance": 60}, headers={"Origin": APP})
    assert moved.status_code == 403
    assert cors_headers(moved) == {}
    assert engine.clock.state()["offset"] == before


@pytest.mark.parametrize("served", [{"allowed_origins": ["*"]}], indirect=True)
def test_the_host_policy_comes_first(served: str) -> None:
    """A DNS-rebound page (its own name as Host) is refused before any CORS answer."""
    for response in (
        httpx.options(served + "/", headers={"Origin": APP, "Host": "evil.example", **PREFLIGHT}),
        call(served, "ListTables", "{}", Origin=APP, Host="evil.example"),
    ):
        assert response.status_code == 403
        assert "DNS rebinding" in response.json()["detail"]
        assert cors_headers(response) == {}


@pytest.mark.parametrize(
    "served", [{"allowed_origins": [APP], "credentials": {KEY: SECRET}}], indirect=True
)
def test_with_auth_the_preflight_is_open_and_the_call_needs_a_signature(served: str) -> None:
    """A browser sends the preflight without credentials (it cannot sign it): answered. The
    call itself is checked as DynamoDB checks it, and its refusal carries the CORS headers,
    so the page's SDK reads the error rather than a network failure."""
    preflight = httpx.options(served + "/", headers={"Origin": APP, **PREFLIGHT})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"
    unsigned = call(served, "ListTables", "{}", Origin=APP)
    assert unsigned.status_code == 400
    assert unsigned.json()["__type"].endswith("#MissingAuthenticationTokenException")
    assert unsigned.headers["access-control-allow-origin"] == "*"
    wrong = httpx.post(
        served + "/",
        content="{}",
        headers={**signed(served, "ListTables", "{}", "x"), "Origin": APP},
    )
    assert wrong.json()["__type"].endswith("#InvalidSignatureException")
    assert wrong.headers["access-control-allow-origin"] == "*"
    right = httpx.post(
        served + "/", content="{}", headers={**signed(served, "ListTables", "{}"), "Origin": APP}
    )
    assert (right.status_code, right.json()) == (200, {"TableNames": []})
    assert right.headers["access-control-allow-origin"] == "*"


def test_the_cli_flag(cli_server: Any) -> None:
    server = cli_server("--allow-origin", APP, "--allow-origin", "http://127.0.0.1:3000/")
    for origin, status in ((APP, 200), ("http://127.0.0.1:3000", 200), ("http://x.example", 403)):
        response = httpx.options(server.url + "/", headers={"Origin": origin, **PREFLIGHT})
        assert response.status_code == status, origin
