"""One scenario app written three times (Starlette, FastAPI, Flask), behind the middleware.

Every handler records its run under the request's ``id`` (query parameter), so a test counts
how often a request really executed. Routes:

* ``POST /orders``: 201, JSON echo of the body and the run count, with ``Location``,
  ``X-Trace`` (allow-listed), ``X-Secret`` (not) and ``Set-Cookie`` (never replayed).
* ``POST /status?codes=503,201``: the n-th run of an id answers the n-th status.
* ``POST /boom?times=1``: raises on the first ``times`` runs of an id, then 201.
* ``POST /slow?gate=g`` and ``POST /waiting?gate=g``: wait until the test opens gate ``g``.
* ``POST /big?size=N``: N bytes of text. ``POST /stream?chunks=N``: a streamed body.
  ``POST /events``: ``text/event-stream``.
* ``POST /required`` (key required), ``POST /charge`` (fingerprint of amount and currency),
  ``POST /excluded`` (not guarded), ``GET /orders``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request  # module level: FastAPI resolves annotations here

from firstwrite.http import (
    DEFAULT_REPLAY_HEADERS,
    HttpConfig,
    IdempotencyMiddleware,
    Route,
    WSGIIdempotencyMiddleware,
)

STORED_LIMIT = 2048
REQUEST_LIMIT = 4096


def scenario_config(**overrides: Any) -> HttpConfig:
    settings: dict[str, Any] = {
        "routes": [
            Route("/required", require_key=True),
            Route("/charge", fingerprint=("amount", "currency")),
            Route("/excluded", exclude=True),
            Route("/waiting", wait=20.0),
        ],
        "principal": lambda request: request.header("x-client"),
        "replay_headers": DEFAULT_REPLAY_HEADERS | {"x-trace"},
        "max_request_body": REQUEST_LIMIT,
        "max_stored_response": STORED_LIMIT,
    }
    settings.update(overrides)
    return HttpConfig(**settings)


class Recorder:
    """Runs per request id, and gates the slow handlers wait on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: collections.Counter[str] = collections.Counter()
        self.gates: dict[str, threading.Event] = collections.defaultdict(threading.Event)
        self.entered: dict[str, threading.Event] = collections.defaultdict(threading.Event)

    def run(self, request_id: str) -> int:
        with self.lock:
            self.runs[request_id] += 1
            return self.runs[request_id]

    def gate(self, name: str) -> threading.Event:
        with self.lock:
            return self.gates[name]

    def arrived(self, name: str) -> threading.Event:
        with self.lock:
            return self.entered[name]


def _order(n: int, body: bytes, query: str) -> tuple[bytes, dict[str, str]]:
    payload = json.dumps({"run": n, "echo": json.loads(body or b"null"), "query": query})
    headers = {
        "location": f"/orders/{n}",
        "x-trace": f"trace-{n}-{time.monotonic_ns()}",
        "x-secret": "not for replays",
        "set-cookie": "session=abc; HttpOnly",
        "content-type": "application/json",
    }
    return payload.encode(), headers


def _status_for(recorder: Recorder, request_id: str, codes: str) -> tuple[int, bytes]:
    n = recorder.run(request_id)
    statuses = [int(c) for c in codes.split(",")]
    status = statuses[min(n, len(statuses)) - 1]
    if status in (204, 304):  # no content, by definition
        return status, b""
    return status, json.dumps({"run": n, "status": status}).encode()


def _stream(chunks: int) -> Iterator[bytes]:
    for i in range(chunks):
        yield f"chunk-{i:05d}\n".encode()


# -- ASGI (Starlette, FastAPI) ----------------------------------------------------------------


async def _wait(gate: threading.Event) -> None:
    while not gate.is_set():  # never block the event loop
        await asyncio.sleep(0.005)


def starlette_app(recorder: Recorder, guard: Any, config: HttpConfig) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route as Path

    async def orders(request: Request) -> Response:
        n = recorder.run(request.query_params["id"])
        body, headers = _order(n, await request.body(), request.url.query)
        return Response(body, status_code=201, headers=headers)

    async def list_orders(request: Request) -> Response:
        recorder.run(request.query_params["id"])
        return JSONResponse([])

    async def status(request: Request) -> Response:
        code, body = _status_for(
            recorder, request.query_params["id"], request.query_params["codes"]
        )
        return Response(body, status_code=code, media_type="application/json")

    async def boom(request: Request) -> Response:
        n = recorder.run(request.query_params["id"])
        if n <= int(request.query_params.get("times", "1")):
            raise RuntimeError("boom")
        return JSONResponse({"run": n}, status_code=201)

    async def slow(request: Request) -> Response:
        gate = request.query_params["gate"]
        n = recorder.run(request.query_params["id"])
        recorder.arrived(gate).set()
        await _wait(recorder.gate(gate))
        return JSONResponse({"run": n, "gate": gate}, status_code=201)

    async def big(request: Request) -> Response:
        recorder.run(request.query_params["id"])
        return PlainTextResponse("x" * int(request.query_params["size"]))

    async def stream(request: Request) -> Response:
        recorder.run(request.query_params["id"])
        return StreamingResponse(
            _stream(int(request.query_params["chunks"])), media_type="text/plain"
        )

    async def events(request: Request) -> Response:
        recorder.run(request.query_params["id"])
        return StreamingResponse(
            iter([b"data: one\n\n", b"data: two\n\n"]), media_type="text/event-stream"
        )

    async def plain(request: Request) -> Response:
        n = recorder.run(request.query_params["id"])
        return JSONResponse(
            {"run": n, "echo": json.loads(await request.body() or b"null")}, status_code=201
        )

    app = Starlette(
        routes=[
            Path("/orders", orders, methods=["POST"]),
            Path("/orders", list_orders, methods=["GET"]),
            Path("/status", status, methods=["POST"]),
            Path("/boom", boom, methods=["POST"]),
            Path("/slow", slow, methods=["POST"]),
            Path("/waiting", slow, methods=["POST"]),
            Path("/big", big, methods=["POST"]),
            Path("/stream", stream, methods=["POST"]),
            Path("/events", events, methods=["POST"]),
            Path("/required", plain, methods=["POST"]),
            Path("/charge", plain, methods=["POST"]),
            Path("/excluded", plain, methods=["POST"]),
        ]
    )
    app.add_middleware(IdempotencyMiddleware, guard=guard, config=config)
    return app


def fastapi_app(recorder: Recorder, guard: Any, config: HttpConfig) -> Any:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

    app = FastAPI()
    app.add_middleware(IdempotencyMiddleware, guard=guard, config=config)

    @app.post("/orders")
    async def orders(request: Request, id: str) -> Response:
        n = recorder.run(id)
        body, headers = _order(n, await request.body(), request.url.query)
        return Response(body, status_code=201, headers=headers)

    @app.get("/orders")
    def list_orders(id: str) -> list[int]:
        recorder.run(id)
        return []

    @app.post("/status")
    def status(id: str, codes: str) -> Response:
        code, body = _status_for(recorder, id, codes)
        return Response(body, status_code=code, media_type="application/json")

    @app.post("/boom", status_code=201)
    def boom(id: str, times: int = 1) -> dict[str, int]:
        n = recorder.run(id)
        if n <= times:
            raise RuntimeError("boom")
        return {"run": n}

    async def slow(id: str, gate: str) -> JSONResponse:
        n = recorder.run(id)
        recorder.arrived(gate).set()
        await _wait(recorder.gate(gate))
        return JSONResponse({"run": n, "gate": gate}, status_code=201)

    app.post("/slow")(slow)
    app.post("/waiting")(slow)

    @app.post("/big")
    def big(id: str, size: int) -> PlainTextResponse:
        recorder.run(id)
        return PlainTextResponse("x" * size)

    @app.post("/stream")
    def stream(id: str, chunks: int) -> StreamingResponse:
        recorder.run(id)
        return StreamingResponse(_stream(chunks), media_type="text/plain")

    @app.post("/events")
    def events(id: str) -> StreamingResponse:
        recorder.run(id)
        return StreamingResponse(
            iter([b"data: one\n\n", b"data: two\n\n"]), media_type="text/event-stream"
        )

    async def plain(request: Request, id: str) -> JSONResponse:
        n = recorder.run(id)
        return JSONResponse(
            {"run": n, "echo": json.loads(await request.body() or b"null")}, status_code=201
        )

    for path in ("/required", "/charge", "/excluded"):
        app.post(path)(plain)
    return app


# -- WSGI (Flask) -----------------------------------------------------------------------------


def flask_app(recorder: Recorder, guard: Any, config: HttpConfig) -> Any:
    from flask import Flask, Response, jsonify, request

    app = Flask("scenario")

    @app.post("/orders")
    def orders() -> Response:
        n = recorder.run(request.args["id"])
        body, headers = _order(n, request.get_data(), request.query_string.decode())
        return Response(body, status=201, headers=headers)

    @app.get("/orders")
    def list_orders() -> Response:
        recorder.run(request.args["id"])
        return jsonify([])

    @app.post("/status")
    def status() -> Response:
        code, body = _status_for(recorder, request.args["id"], request.args["codes"])
        return Response(body, status=code, mimetype="application/json")

    @app.post("/boom")
    def boom() -> tuple[Response, int]:
        n = recorder.run(request.args["id"])
        if n <= int(request.args.get("times", "1")):
            raise RuntimeError("boom")
        return jsonify({"run": n}), 201

    def slow() -> tuple[Response, int]:
        gate = request.args["gate"]
        n = recorder.run(request.args["id"])
        recorder.arrived(gate).set()
        recorder.gate(gate).wait(60)
        return jsonify({"run": n, "gate": gate}), 201

    app.post("/slow", endpoint="slow")(slow)
    app.post("/waiting", endpoint="waiting")(slow)

    @app.post("/big")
    def big() -> Response:
        recorder.run(request.args["id"])
        return Response("x" * int(request.args["size"]), mimetype="text/plain")

    @app.post("/stream")
    def stream() -> Response:
        recorder.run(request.args["id"])
        return Response(_stream(int(request.args["chunks"])), mimetype="text/plain")

    @app.post("/events")
    def events() -> Response:
        recorder.run(request.args["id"])
        return Response(iter([b"data: one\n\n", b"data: two\n\n"]), mimetype="text/event-stream")

    def plain() -> tuple[Response, int]:
        n = recorder.run(request.args["id"])
        return jsonify({"run": n, "echo": request.get_json(silent=True)}), 201

    for path in ("/required", "/charge", "/excluded"):
        app.post(path, endpoint=path)(plain)
    app.wsgi_app = WSGIIdempotencyMiddleware(app.wsgi_app, guard=guard, config=config)  # type: ignore[method-assign]
    return app
