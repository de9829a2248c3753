"""The admin HTTP API under /_firstwrite/: clock, faults, throughput, replication; problem+json
errors. Served by a real server (a thread on the test's engine, so the test can check the
engine's state directly), and by the ``firstwrite engine serve`` process."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.server.app import ServerThread

JSON = {"Content-Type": "application/json"}
KEY = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRS = [{"AttributeName": "pk", "AttributeType": "S"}]


@pytest.fixture
def admin(engine: Engine) -> Iterator[httpx.Client]:
    with (
        ServerThread(engine) as url,
        httpx.Client(base_url=url + "/_firstwrite", timeout=10) as http,
    ):
        yield http


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body  # type: ignore[no-any-return]


# --- clock -----------------------------------------------------------------------------------


def test_clock_freeze_set_advance_reset(admin: httpx.Client, engine: Engine) -> None:
    state = admin.get("/clock").json()
    assert state["frozen"] is False
    frozen = admin.post("/clock", json={"freeze": True, "set": 1_000_000.0}).json()
    assert frozen == {"now": 1_000_000.0, "frozen": True, "offset": frozen["offset"]}
    assert engine.clock.now() == 1_000_000.0
    assert admin.post("/clock", json={"advance": 90.5}).json()["now"] == 1_000_090.5
    assert engine.clock.now() == 1_000_090.5
    assert admin.post("/clock", json={"set": 5.0}).json()["now"] == 5.0
    running = admin.post("/clock", json={"freeze": False}).json()
    assert running["frozen"] is False and running["now"] < 100
    reset = admin.post("/clock", json={"reset": True}).json()
    assert reset["frozen"] is False and reset["offset"] == 0.0


def test_clock_errors(admin: httpx.Client) -> None:
    problem(admin.post("/clock", json={"advance": "ten"}), 400)
    problem(admin.post("/clock", json={"freeze": 1}), 400)
    assert "unknown member" in problem(admin.post("/clock", json={"sett": 1}), 400)["detail"]
    problem(admin.post("/clock", content=b"{not json", headers=JSON), 400)
    problem(admin.post("/clock", content=b"[" * 5000 + b"]" * 5000, headers=JSON), 400)
    problem(admin.post("/clock", json=[1, 2]), 400)
    not_allowed = admin.delete("/clock")
    assert "DELETE /_firstwrite/clock is not supported" in problem(not_allowed, 405)["detail"]
    assert not_allowed.headers["allow"] == "GET, HEAD, POST"


# --- faults ----------------------------------------------------------------------------------


def test_faults_add_list_remove(admin: httpx.Client, engine: Engine) -> None:
    created = admin.post(
        "/faults",
        json={
            "kind": "error",
            "code": "ThrottlingException",
            "operations": ["PutItem", "UpdateItem"],
            "table": "orders",
            "count": 3,
        },
    )
    assert created.status_code == 201
    fault = created.json()["fault"]
    assert fault["operations"] == ["PutItem", "UpdateItem"] and fault["remaining"] == 3
    latency = admin.post("/faults", json={"kind": "latency", "latency": {"min": 0.1, "max": 0.2}})
    assert latency.json()["fault"]["latency"] == {"min": 0.1, "max": 0.2}
    assert [f.id for f in engine.faults.active()] == [fault["id"], latency.json()["fault"]["id"]]
    assert len(admin.get("/faults").json()["faults"]) == 2

    assert admin.delete(f"/faults/{fault['id']}").status_code == 200
    assert [f.kind for f in engine.faults.active()] == ["latency"]
    problem(admin.delete(f"/faults/{fault['id']}"), 404)
    problem(admin.delete("/faults/abc"), 404)
    assert admin.delete("/faults").json()["faults"] == []
    assert engine.hooks.interceptors == []


def test_fault_errors(admin: httpx.Client) -> None:
    assert (
        "unknown fault kind"
        in problem(admin.post("/faults", json={"kind": "meteor"}), 400)["detail"]
    )
    problem(admin.post("/faults", json={}), 400)
    problem(admin.post("/faults", json={"kind": "error", "code": "NoSuchError"}), 400)
    problem(
        admin.post("/faults", json={"kind": "error", "code": "InternalServerError", "rate": 2}), 400
    )
    problem(admin.post("/faults", json={"kind": "crash", "point": "sometime"}), 400)
    problem(admin.post("/faults", json={"kind": "latency", "latency": [0.3, 0.1]}), 400)
    problem(admin.post("/faults", json={"kind": "latency", "latency": 1, "count": 1.5}), 400)
    problem(
        admin.post("/faults", json={"kind": "stale_read", "lag": 1, "operation": "PutItem"}), 400
    )
    problem(admin.post("/faults", json={"kind": "error", "colour": "red"}), 400)
    assert admin.get("/faults").json()["faults"] == []  # nothing half-added


def test_injected_fault_reaches_sdk_clients(admin: httpx.Client, engine: Engine) -> None:
    client = local_client(engine, config=None)
    client.create_table(
        TableName="via-admin",
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
    )
    admin.post(
        "/faults",
        json={"kind": "error", "code": "InternalServerError", "table": "via-admin", "count": 2},
    )
    # The default (legacy) retry mode retries a 500: the third attempt succeeds.
    response = client.put_item(TableName="via-admin", Item={"pk": {"S": "a"}})
    assert response["ResponseMetadata"]["RetryAttempts"] == 2


def test_throughput_switch(admin: httpx.Client, engine: Engine) -> None:
    assert admin.get("/faults/throughput").json() == {"enforced": False, "burst_seconds": 300.0}
    on = admin.post("/faults/throughput", json={"enforced": True, "burst_seconds": 60}).json()
    assert on == {"enforced": True, "burst_seconds": 60.0}
    assert engine.faults.enforcing_throughput and engine.faults.burst_seconds == 60.0
    problem(admin.post("/faults/throughput", json={"burst_seconds": -1}), 400)
    admin.post("/faults/throughput", json={"enforced": False})
    assert engine.hooks.interceptors == []


# --- replication -----------------------------------------------------------------------------


def test_replication_settings_replicas_and_flush(admin: httpx.Client, engine: Engine) -> None:
    us, eu = local_client(engine, region="us-east-1"), local_client(engine, region="eu-west-1")
    us.create_table(
        TableName="admin-global",
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
    )
    made = admin.post(
        "/replication/replicas",
        json={"table": "admin-global", "region": "us-east-1", "replica": "eu-west-1"},
    )
    assert made.status_code == 200
    assert made.json()["TableDescription"]["Replicas"] == [
        {"RegionName": "eu-west-1", "ReplicaStatus": "ACTIVE"}
    ]
    again = admin.post(
        "/replication/replicas",
        json={"table": "admin-global", "region": "us-east-1", "replica": "eu-west-1"},
    )
    assert problem(again, 400)["title"] == "ValidationException"
    missing = admin.post(
        "/replication/replicas",
        json={"table": "nope-nope", "region": "us-east-1", "replica": "eu-west-1"},
    )
    assert problem(missing, 400)["title"] == "ResourceNotFoundException"

    paused = admin.post("/replication", json={"paused": True}).json()
    assert paused["paused"] is True and math.isinf(engine.replication.lag())
    us.put_item(TableName="admin-global", Item={"pk": {"S": "k"}})
    backlog = admin.get("/replication").json()["backlog"]
    assert [(b["table"], b["target"], b["pending"]) for b in backlog] == [
        ("admin-global", "eu-west-1", 1)
    ]
    assert "Item" not in eu.get_item(TableName="admin-global", Key={"pk": {"S": "k"}})
    flushed = admin.post("/replication", json={"flush": True}).json()
    assert flushed["applied"] == 1 and flushed["backlog"] == []
    assert "Item" in eu.get_item(TableName="admin-global", Key={"pk": {"S": "k"}})

    lagged = admin.post("/replication", json={"lag": 2.5, "region": "eu-west-1"}).json()
    assert lagged["region_lags"] == {"eu-west-1": 2.5}
    assert engine.replication.lag(region="eu-west-1") == 2.5
    assert admin.post("/replication", json={"lag": 0}).json()["lag"] == 0.0
    problem(admin.post("/replication", json={"lag": -1}), 400)

    gone = admin.request(
        "DELETE",
        "/replication/replicas",
        json={"table": "admin-global", "region": "us-east-1", "replica": "eu-west-1"},
    )
    assert gone.status_code == 200 and "Replicas" not in gone.json()["TableDescription"]
    problem(admin.post("/replication/replicas", json={"table": "admin-global"}), 400)


def test_unknown_admin_paths(admin: httpx.Client) -> None:
    problem(admin.get("/clockwork"), 404)
    problem(admin.get("/faults/throughput/extra"), 405)


def test_served_by_the_cli_server(http_server: Any) -> None:
    response = httpx.get(http_server.url + "/_firstwrite/clock")
    assert response.status_code == 200 and response.json()["frozen"] is False
    response = httpx.get(http_server.url + "/_firstwrite/replication")
    assert response.status_code == 200 and "backlog" in response.json()
