"""A route's time budget: a store that keeps failing past it answers 503, ``Retry-After`` and a
problem+json body, and the handler does not run (ASGI and WSGI, on the engine in process)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.config import Config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route as Path
from starlette.testclient import TestClient

from firstwrite.engine import Engine, local_client
from firstwrite.http import (
    HttpConfig,
    IdempotencyMiddleware,
    Problem,
    Route,
    WSGIIdempotencyMiddleware,
)
from firstwrite.idempotency import Idempotency, IdempotencyConfig, RetryPolicy

pytestmark = pytest.mark.xdist_group("budget-outage")  # timed: one worker, one at a time

TABLE = "http-budget"
BUDGET = 3.0
CONFIG = HttpConfig(routes=[Route("/pay", require_key=True, budget=BUDGET)])


@pytest.fixture
def guard(engine: Engine) -> Idempotency:
    client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
    patient = RetryPolicy(max_attempts=1000, base=0.05, cap=0.1)  # the budget ends the retries
    guard = Idempotency(IdempotencyConfig(table_name=TABLE, retry=patient), client=client)
    guard.ensure_table()
    engine.faults.error("InternalServerError", table=TABLE)
    return guard


def _check(status: int, headers: Any, body: Any, took: float, ran: list[Any]) -> None:
    assert status == 503 and int(headers["retry-after"]) >= 1
    assert headers["content-type"] == "application/problem+json"
    assert body["type"] == Problem.STORE_UNAVAILABLE.type_uri and "budget" in body["detail"]
    assert took <= BUDGET * 1.1 and ran == []


def test_asgi_route_budget(guard: Idempotency) -> None:
    ran: list[Any] = []

    async def pay(request: Request) -> JSONResponse:
        ran.append(await request.json())
        return JSONResponse({"ok": True}, status_code=201)

    app = Starlette(routes=[Path("/pay", pay, methods=["POST"])])
    app.add_middleware(IdempotencyMiddleware, guard=guard, config=CONFIG)
    started = time.monotonic()
    answer = TestClient(app).post("/pay", json={"n": 1}, headers={"Idempotency-Key": "p-1"})
    took = time.monotonic() - started
    _check(answer.status_code, answer.headers, answer.json(), took, ran)


def test_wsgi_route_budget(guard: Idempotency) -> None:
    from flask import Flask, jsonify, request

    ran: list[Any] = []
    flask_app = Flask("budget")

    @flask_app.post("/pay")
    def pay() -> Any:
        ran.append(request.get_json())
        return jsonify(ok=True), 201

    flask_app.wsgi_app = WSGIIdempotencyMiddleware(  # type: ignore[method-assign]
        flask_app.wsgi_app, guard=guard, config=CONFIG
    )
    started = time.monotonic()
    answer = flask_app.test_client().post("/pay", json={"n": 1}, headers={"Idempotency-Key": "p"})
    took = time.monotonic() - started
    _check(answer.status_code, answer.headers, answer.get_json(), took, ran)
