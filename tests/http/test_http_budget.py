"""A route's time budget: a store that keeps failing past it answers 503, ``Retry-After`` and a
problem+json body, and the handler does not run (ASGI and WSGI, on the engine in process).

The time checked is the app's own, from the request reaching it to its answer (the span the
budget covers: it starts when the middleware takes the request up), not the test client's. Timed
around the test client, a loaded CI machine once read 3.78 s where the layer's own count had
stopped at 2.97 s of the 3 s."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
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


def _timed_asgi(app: Any, spans: list[float]) -> Any:
    """``app`` behind a wrapper that records how long each HTTP request spent inside it."""

    async def timed(scope: Any, receive: Any, send: Any) -> None:
        started = time.monotonic()
        await app(scope, receive, send)
        if scope["type"] == "http":
            spans.append(time.monotonic() - started)

    return timed


def _timed_wsgi(app: Callable[..., Iterable[bytes]], spans: list[float]) -> Any:
    """The same for a WSGI app (its answer is whole once it returns: a 503 is never streamed)."""

    def timed(environ: Any, start_response: Any) -> Iterable[bytes]:
        started = time.monotonic()
        body = app(environ, start_response)
        spans.append(time.monotonic() - started)
        return body

    return timed


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
    spans: list[float] = []
    client = TestClient(_timed_asgi(app, spans))
    answer = client.post("/pay", json={"n": 1}, headers={"Idempotency-Key": "p-1"})
    _check(answer.status_code, answer.headers, answer.json(), spans[0], ran)


def test_wsgi_route_budget(guard: Idempotency) -> None:
    from flask import Flask, jsonify, request

    ran: list[Any] = []
    flask_app = Flask("budget")

    @flask_app.post("/pay")
    def pay() -> Any:
        ran.append(request.get_json())
        return jsonify(ok=True), 201

    spans: list[float] = []
    flask_app.wsgi_app = _timed_wsgi(  # type: ignore[method-assign]
        WSGIIdempotencyMiddleware(flask_app.wsgi_app, guard=guard, config=CONFIG), spans
    )
    answer = flask_app.test_client().post("/pay", json={"n": 1}, headers={"Idempotency-Key": "p"})
    _check(answer.status_code, answer.headers, answer.get_json(), spans[0], ran)
