"""Recovery points where the layer runs the work itself: the decorator, the HTTP middleware
(ASGI and WSGI), an event consumer.

Each first run marks ``recovery_point("charge", reference)`` and then fails retryably (a
provider timeout: the key is released, as the middleware and the consumers do for an
exception); the retry must not run the work again: the site's own ``reconcile`` hook answers.
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.routing import Route as Route_
from starlette.testclient import TestClient

from firstwrite.events.core import Consumer, RecordOutcome
from firstwrite.http import IdempotencyMiddleware, WSGIIdempotencyMiddleware, reconciled_response
from firstwrite.idempotency import (
    Interrupted,
    NotDone,
    Reconciled,
    arecovery_point,
    idempotent,
    recovery_point,
)
from firstwrite.idempotency.aio import AsyncIdempotency, ThreadedClient
from firstwrite.idempotency.config import IdempotencyConfig
from firstwrite.idempotency.errors import RecoveryRequiredError
from firstwrite.idempotency.guard import Idempotency

from .conftest import TABLE, Backend

CHARGED: dict[str, int] = {}  # the provider's ledger in these tests: reference -> amount


class ProviderTimeout(Exception):
    """The charge may or may not have gone through."""


def charge_then_time_out(reference: str, amount: int) -> None:
    CHARGED[reference] = amount  # it went through...
    raise ProviderTimeout(reference)  # ...but the answer was lost


@pytest.fixture(autouse=True)
def _ledger() -> None:
    CHARGED.clear()


def ledger_hook(interrupted: Interrupted) -> Reconciled | NotDone:
    reference = interrupted.last.reference or ""
    if reference in CHARGED:
        return Reconciled({"charged": CHARGED[reference], "reconciled": True})
    return NotDone()


def test_the_decorator_passes_its_hook_and_runs_the_work_with_marks(
    backend: Backend, guard: Idempotency
) -> None:
    runs: list[str] = []

    @idempotent(guard, key_arg="order_id", reconcile=ledger_hook)
    def pay(order_id: str, amount: int) -> dict[str, Any]:
        runs.append(order_id)
        recovery_point("charge", f"pay-{order_id}")
        charge_then_time_out(f"pay-{order_id}", amount)
        return {"charged": amount}

    with pytest.raises(ProviderTimeout):
        pay("o-1", 10)
    assert pay("o-1", 10) == {"charged": 10, "reconciled": True}
    assert runs == ["o-1"]

    @idempotent(guard, key_arg="order_id")  # the same function without a hook
    def pay_blind(order_id: str, amount: int) -> dict[str, Any]:
        recovery_point("charge", f"blind-{order_id}")
        charge_then_time_out(f"blind-{order_id}", amount)
        return {"charged": amount}

    with pytest.raises(ProviderTimeout):
        pay_blind("o-2", 10)
    with pytest.raises(RecoveryRequiredError):
        pay_blind("o-2", 10)


def test_the_asgi_middleware_reconciles_with_its_own_hook(backend: Backend, table: str) -> None:
    runs: list[str] = []

    async def create(request: Request) -> Response:
        key = request.headers["idempotency-key"]
        runs.append(key)
        await arecovery_point("charge", f"http-{key}")
        charge_then_time_out(f"http-{key}", 5)
        return JSONResponse({"id": key}, status_code=201)

    def hook(interrupted: Interrupted) -> Reconciled | NotDone:
        reference = interrupted.last.reference or ""
        if reference in CHARGED:
            body = json.dumps({"id": interrupted.key, "reconciled": True}).encode()
            return reconciled_response(201, body, [("content-type", "application/json")])
        return NotDone()

    guard = AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE), client=ThreadedClient(backend.client)
    )
    app = Starlette(routes=[Route("/orders", create, methods=["POST"])])
    wrapped = IdempotencyMiddleware(app, guard=guard, reconcile=hook)
    blind = IdempotencyMiddleware(app, guard=guard)
    with TestClient(wrapped, raise_server_exceptions=False) as client:
        first = client.post("/orders", json={}, headers={"Idempotency-Key": "k-1"})
        assert first.status_code == 500
        again = client.post("/orders", json={}, headers={"Idempotency-Key": "k-1"})
    assert again.status_code == 201
    assert again.json() == {"id": "k-1", "reconciled": True}
    assert again.headers["idempotent-replayed"] == "true"
    assert runs == ["k-1"]
    with TestClient(blind, raise_server_exceptions=False) as client:
        assert client.post("/orders", json={}, headers={"Idempotency-Key": "k-2"}).status_code
        refused = client.post("/orders", json={}, headers={"Idempotency-Key": "k-2"})
    assert refused.status_code == 503, (refused.json(), guard)
    assert refused.json()["type"] == "urn:firstwrite:problem:recovery-required"
    assert refused.headers["retry-after"] == "1"
    assert runs == ["k-1", "k-2"]


def _wsgi_post(app: Any, key: str) -> tuple[str, bytes]:
    answer: dict[str, str] = {}

    def start_response(line: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answer["status"] = line
        return lambda data: None

    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/orders",
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": "2",
        "HTTP_IDEMPOTENCY_KEY": key,
        "wsgi.input": io.BytesIO(b"{}"),
        "SERVER_NAME": "test",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
    }
    try:
        body = b"".join(app(environ, start_response))
    except ProviderTimeout:
        return "raised", b""
    return answer["status"], body


def test_the_wsgi_middleware_marks_and_reconciles(backend: Backend, guard: Idempotency) -> None:
    runs: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        key = environ["HTTP_IDEMPOTENCY_KEY"]
        runs.append(key)
        recovery_point("charge", f"wsgi-{key}")
        charge_then_time_out(f"wsgi-{key}", 7)
        return []  # never reached

    def hook(interrupted: Interrupted) -> Reconciled | NotDone:
        if (interrupted.last.reference or "") in CHARGED:
            return reconciled_response(201, b"charged")
        return NotDone()

    wrapped = WSGIIdempotencyMiddleware(app, guard=guard, reconcile=hook)
    assert _wsgi_post(wrapped, "w-1") == ("raised", b"")
    assert _wsgi_post(wrapped, "w-1") == ("201 Created", b"charged")
    assert runs == ["w-1"]


def test_a_consumer_reconciles_a_redelivered_record(backend: Backend, guard: Idempotency) -> None:
    handled: list[str] = []

    def handler(record: dict[str, Any]) -> dict[str, Any]:
        handled.append(record["id"])
        recovery_point("charge", f"msg-{record['id']}")
        charge_then_time_out(f"msg-{record['id']}", record["amount"])
        return {"charged": record["amount"]}

    consumer: Consumer[dict[str, Any]] = Consumer(
        guard, key=lambda r: str(r["id"]), reconcile=ledger_hook
    )
    record = {"id": "m-1", "amount": 3}
    first = consumer.process(record, handler)
    assert not first.acknowledged  # redelivered by the broker
    second = consumer.process(record, handler)
    assert second.acknowledged and second.outcome is RecordOutcome.REPLAYED
    assert handled == ["m-1"]
    stored = guard.get("m-1")
    assert stored is not None and json.loads(str(stored.result))["reconciled"] is True


def test_an_async_consumer_marks_through_arecovery_point(backend: Backend, table: str) -> None:
    from firstwrite.events.aio import AsyncConsumer

    guard = AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE), client=ThreadedClient(backend.client)
    )
    handled: list[str] = []

    async def handler(record: dict[str, Any]) -> None:
        handled.append(record["id"])
        await arecovery_point("charge", f"amsg-{record['id']}")
        charge_then_time_out(f"amsg-{record['id']}", 1)

    async def reconcile(interrupted: Interrupted) -> Reconciled:
        return Reconciled("found " + (interrupted.last.reference or ""))

    consumer = AsyncConsumer(Consumer(guard, key=lambda r: str(r["id"]), reconcile=reconcile))

    async def scenario() -> None:
        record = {"id": "a-1"}
        assert not (await consumer.process(record, handler)).acknowledged
        assert (await consumer.process(record, handler)).acknowledged

    asyncio.run(scenario())
    assert handled == ["a-1"]


def test_a_transactional_route_reconciles_its_claim_with_with_the_middlewares_hook(
    backend: Backend, table: str
) -> None:
    import threading

    from firstwrite.http import HttpConfig, Route, idempotency

    from .test_key_migration_transactional import counter, increment

    runs: list[str] = []
    stalled, release = threading.Event(), threading.Event()
    guard = AsyncIdempotency(
        IdempotencyConfig(table_name=TABLE),
        client=ThreadedClient(backend.client),
        clock=backend.now,
    )

    async def create(request: Request) -> Response:
        key = request.headers["idempotency-key"]
        claim = await idempotency(request).claim_with([increment(key)])
        if claim is None:
            return Response(status_code=204)  # the middleware answers instead
        runs.append(key)
        await guard.mark(claim, "charge", f"tx-{key}")
        CHARGED[f"tx-{key}"] = 9
        stalled.set()  # the worker stalls (a GC pause, a lost host) past its lease
        release.wait(30)
        return JSONResponse({"id": key}, status_code=201)

    def hook(interrupted: Interrupted) -> Reconciled | NotDone:
        if (interrupted.last.reference or "") in CHARGED:
            body = json.dumps({"id": interrupted.key, "reconciled": True}).encode()
            return reconciled_response(201, body, [("content-type", "application/json")])
        return NotDone()

    config = HttpConfig(routes=[Route("/orders", transactional=True)])
    app = Starlette(routes=[Route_("/orders", create, methods=["POST"])])
    blind = IdempotencyMiddleware(app, guard=guard, config=config)
    wrapped = IdempotencyMiddleware(app, guard=guard, config=config, reconcile=hook)
    headers = {"Idempotency-Key": "t-1"}

    def first() -> None:
        with TestClient(blind, raise_server_exceptions=False) as client:
            client.post("/orders", json={}, headers=headers)

    worker = threading.Thread(target=first)
    worker.start()
    try:
        assert stalled.wait(30)
        backend.advance(guard.config.lease + 1)
        with TestClient(blind, raise_server_exceptions=False) as client:
            refused = client.post("/orders", json={}, headers=headers)
        assert refused.status_code == 503
        assert refused.json()["type"] == "urn:firstwrite:problem:recovery-required"
        with TestClient(wrapped, raise_server_exceptions=False) as client:
            again = client.post("/orders", json={}, headers=headers)
    finally:
        release.set()
        worker.join(30)
    assert again.status_code == 201 and again.json() == {"id": "t-1", "reconciled": True}
    assert runs == ["t-1"]
    assert counter(backend.client, "t-1") == 1  # the increment was not applied again
