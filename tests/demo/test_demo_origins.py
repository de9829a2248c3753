"""The demo answers only its own hosts and origins, on every route it serves.

Issue 27, finding 1: ``firstwrite demo`` served the console and the payments API without the
engine's Host check, and the console compared ``Origin`` with the request's own ``Host``, so a
page of another site rebound to 127.0.0.1 (it sends ``Host: evil.example:8080`` and
``Origin: http://evil.example:8080``) read every account through ``/console/api/run`` and could
update items, delete tables and pay. A real ``firstwrite demo`` process, driven over loopback.
"""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from test_demo_service import new_key

from engine_process import Demo, start_demo

EVIL = "evil.example"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = start_demo(tmp_path_factory.mktemp("demo-origins") / "demo.db")
    yield running
    if running.process.poll() is None:
        running.stop(signal.SIGKILL)


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1]


SCAN = {"operation": "Scan", "request": json.dumps({"TableName": "demo-accounts"})}
UPDATE = {
    "operation": "UpdateItem",
    "request": json.dumps(
        {
            "TableName": "demo-accounts",
            "Key": {"id": {"S": "acct_alice"}},
            "UpdateExpression": "SET balance = :b",
            "ExpressionAttributeValues": {":b": {"N": "99999999"}},
        }
    ),
}
PAYMENT = {"account": "acct_alice", "amount": 1, "currency": "EUR"}


def _rebound(demo: Demo, method: str, path: str, body: Any = None) -> httpx.Response:
    """``path`` as a page of evil.example rebound to the demo's address would send it."""
    site = f"{EVIL}:{_port(demo.url)}"
    headers = {"Host": site, "Origin": f"http://{site}", "Idempotency-Key": new_key()}
    with httpx.Client(base_url=demo.url, timeout=30) as client:
        return client.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/console/api/run", SCAN),
        ("POST", "/console/api/run", UPDATE),
        ("GET", "/console/tables/demo-accounts", None),
        ("GET", "/console/", None),
        ("POST", "/payments", PAYMENT),
        ("GET", "/accounts/acct_alice", None),
        ("GET", "/", None),
    ],
)
def test_a_rebound_host_is_refused_on_every_route(
    demo: Demo, method: str, path: str, body: Any
) -> None:
    before = demo.balance("acct_alice")
    answer = _rebound(demo, method, path, body)
    assert answer.status_code == 403, answer.text[:300]
    assert answer.headers["content-type"] == "application/problem+json"
    assert "acct_" not in answer.text
    assert demo.balance("acct_alice") == before


def test_the_engine_endpoint_refuses_a_rebound_host(demo: Demo) -> None:
    site = f"{EVIL}:{_port(demo.endpoint)}"
    answer = httpx.post(
        demo.endpoint + "/",
        content=json.dumps({}),
        headers={
            "Host": site,
            "X-Amz-Target": "DynamoDB_20120810.ListTables",
            "Content-Type": "application/x-amz-json-1.0",
        },
        timeout=30,
    )
    assert answer.status_code == 403, answer.text


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/console/api/run", SCAN), ("POST", "/payments", PAYMENT)],
)
def test_a_page_of_another_origin_is_refused(demo: Demo, method: str, path: str, body: Any) -> None:
    headers = {"Origin": f"http://{EVIL}", "Idempotency-Key": new_key()}
    with httpx.Client(base_url=demo.url, timeout=30) as client:
        answer = client.request(method, path, json=body, headers=headers)
    assert answer.status_code == 403, answer.text[:300]
    assert answer.headers["content-type"] == "application/problem+json"


def test_its_own_pages_and_plain_clients_are_served(demo: Demo) -> None:
    own = demo.url.removeprefix("http://")
    with httpx.Client(base_url=demo.url, timeout=30) as client:
        scan = client.post("/console/api/run", json=SCAN, headers={"Origin": f"http://{own}"})
        assert scan.status_code == 200, scan.text[:300]
        local = f"localhost:{_port(demo.url)}"
        named = client.get("/accounts/acct_bob", headers={"Host": local})
        assert named.status_code == 200, named.text
        paid = client.post("/payments", json=PAYMENT, headers={"Idempotency-Key": new_key()})
        assert paid.status_code == 201, paid.text


def test_a_header_flood_gets_431_from_the_demo(demo: Demo) -> None:
    host, port = demo.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        try:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Flood: " + b"a" * (1 << 20))
            sock.sendall(b"\r\n\r\n")
        except OSError:
            pass
        try:
            answer = sock.recv(200)
        except OSError:
            answer = b""
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer
