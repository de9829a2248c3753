"""The middleware in process (Starlette's TestClient, Flask's test client, raw WSGI calls): the
store being down, settings as keywords, the zero-configuration default, the handler's view,
``on_unstored="release"``, request bodies without a length."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, jsonify
from flask import request as flask_request
from http_support import guards
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route as Path_
from starlette.testclient import TestClient

from firstwrite.http import (
    CONTEXT_KEY,
    HttpConfig,
    IdempotencyMiddleware,
    Problem,
    WSGIIdempotencyMiddleware,
    idempotency,
)
from firstwrite.idempotency import Idempotency, IdempotencyConfig


def _starlette(guard: Any, seen: list[Any], **settings: Any) -> Starlette:
    async def create(request: Request) -> Response:
        seen.append(idempotency(request))
        return JSONResponse({"n": len(seen)}, status_code=201)

    async def big(request: Request) -> Response:
        seen.append(idempotency(request))
        return PlainTextResponse("x" * 5000)

    app = Starlette(
        routes=[
            Path_("/create", create, methods=["POST", "GET"]),
            Path_("/big", big, methods=["POST"]),
        ]
    )
    app.add_middleware(IdempotencyMiddleware, guard=guard, config=HttpConfig(**settings))
    return app


def _flask(guard: Any, seen: list[Any], **settings: Any) -> Flask:
    app = Flask("in_process")

    @app.route("/create", methods=["POST", "GET"])
    def create() -> tuple[Any, int]:
        seen.append(idempotency(flask_request))
        return jsonify({"n": len(seen)}), 201

    @app.post("/big")
    def big() -> str:
        seen.append(idempotency(flask_request))
        return "x" * 5000

    app.wsgi_app = WSGIIdempotencyMiddleware(
        app.wsgi_app, guard=guard, config=HttpConfig(**settings)
    )  # type: ignore[method-assign]
    return app


def _post(client: Any, path: str, key: str | None = "k-1", body: Any = None) -> Any:
    headers = {} if key is None else {"Idempotency-Key": key}
    return client.post(path, json=body if body is not None else {}, headers=headers)


@pytest.mark.parametrize("framework", ["starlette", "flask"])
def test_when_the_store_is_down_nothing_runs_and_the_answer_is_503(
    framework: str, local_client: Any
) -> None:
    # A table that does not exist: every claim fails with ResourceNotFoundException.
    guard = Idempotency(IdempotencyConfig(table_name="no-such-table"), client=local_client)
    seen: list[Any] = []
    if framework == "starlette":
        client: Any = TestClient(_starlette(guard, seen))
    else:
        client = _flask(guard, seen).test_client()
    response = _post(client, "/create")
    assert response.status_code == 503
    document = json.loads(response.data if framework == "flask" else response.content)
    assert document["type"] == Problem.STORE_UNAVAILABLE.type_uri
    assert response.headers["retry-after"] == "1"
    assert seen == []


@pytest.mark.parametrize("framework", ["starlette", "flask"])
def test_the_handler_sees_its_key_scope_and_claim(framework: str, local_client: Any) -> None:
    sync_guard, async_guard = guards(local_client, "handler-view")
    seen: list[Any] = []
    principal = {"principal": lambda request: request.header("x-client")}
    if framework == "starlette":
        client: Any = TestClient(_starlette(async_guard, seen, **principal))
    else:
        client = _flask(sync_guard, seen, **principal).test_client()
    client.post("/create", json={}, headers={"Idempotency-Key": '"k-9"', "X-Client": "ann"})
    client.get("/create", headers={"Idempotency-Key": "k-9", "X-Client": "ann"})
    guarded, unguarded = seen
    assert guarded.key == "k-9" and guarded.scope == "ann POST /create"
    assert guarded.claim is not None and guarded.claim.fencing_token.endswith(":1")
    assert not guarded.transactional
    assert unguarded is None


def test_without_a_guard_the_local_engine_file_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIRSTWRITE_LOCAL_DB", str(tmp_path / "zero-config.db"))
    seen: list[Any] = []
    asgi = TestClient(_starlette(None, seen))
    wsgi = _flask(None, seen).test_client()
    first = _post(asgi, "/create", "zero")
    assert _post(asgi, "/create", "zero").headers["idempotent-replayed"] == "true"
    # The same file, the same table, the same scope: the WSGI app replays the ASGI app's answer.
    replay = _post(wsgi, "/create", "zero")
    assert replay.headers["idempotent-replayed"] == "true" and replay.data == first.content
    assert len(seen) == 1
    assert (tmp_path / "zero-config.db").exists()


def test_a_wsgi_app_needs_a_synchronous_guard(local_client: Any) -> None:
    _, async_guard = guards(local_client, "settings")
    with pytest.raises(TypeError, match="synchronous guard"):
        WSGIIdempotencyMiddleware(lambda *a: [], guard=async_guard)  # type: ignore[arg-type]


@pytest.mark.parametrize("framework", ["starlette", "flask"])
def test_on_unstored_release_lets_a_retry_run_again(framework: str, local_client: Any) -> None:
    sync_guard, async_guard = guards(local_client, f"release-{framework}")
    seen: list[Any] = []
    settings = {"max_stored_response": 1024, "on_unstored": "release"}
    if framework == "starlette":
        client: Any = TestClient(_starlette(async_guard, seen, **settings))
    else:
        client = _flask(sync_guard, seen, **settings).test_client()
    first = _post(client, "/big", "big-1")
    assert len(first.content if framework == "starlette" else first.get_data()) == 5000
    first.close()  # a streamed WSGI response settles its key when the server closes it
    retry = _post(client, "/big", "big-1")
    assert first.headers["idempotency-replay-unavailable"] == "size-exceeded"
    assert (
        retry.status_code == 200
        and retry.headers["idempotency-replay-unavailable"] == "size-exceeded"
    )
    assert len(seen) == 2


def test_lifespan_and_websockets_pass_through(local_client: Any) -> None:
    from starlette.websockets import WebSocket

    _, async_guard = guards(local_client, "lifespan")
    events: list[str] = []

    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(await websocket.receive_text())
        await websocket.close()

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        events.append("startup")
        yield
        events.append("shutdown")

    from starlette.routing import WebSocketRoute

    app = Starlette(routes=[WebSocketRoute("/ws", echo)], lifespan=lifespan)
    app.add_middleware(IdempotencyMiddleware, guard=async_guard)
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_text("hello")
        assert ws.receive_text() == "hello"
    assert events == ["startup", "shutdown"]


# -- WSGI request bodies without a Content-Length ---------------------------------------------------


def _wsgi_call(app: Any, environ: dict[str, Any]) -> tuple[str, bytes]:
    status: list[str] = []

    def start_response(line: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        status.append(line)
        return lambda data: None

    body = b"".join(app(environ, start_response))
    return status[0], body


def _environ(body: bytes, **extra: Any) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/echo",
        "QUERY_STRING": "",
        "SERVER_NAME": "test",
        "SERVER_PORT": "80",
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "HTTP_IDEMPOTENCY_KEY": extra.pop("key", "w-1"),
        **extra,
    }


def _echo_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    data = environ["wsgi.input"].read(length)
    context = environ[CONTEXT_KEY]
    start_response("201 Created", [("Content-Type", "application/octet-stream")])
    return [context.key.encode() + b":" + data]


def test_a_terminated_wsgi_input_without_a_length_is_read_whole(local_client: Any) -> None:
    sync_guard, _ = guards(local_client, "wsgi-bodies")
    app = WSGIIdempotencyMiddleware(
        _echo_app, guard=sync_guard, config=HttpConfig(max_request_body=100)
    )
    assert _wsgi_call(app, _environ(b"chunked body", **{"wsgi.input_terminated": True})) == (
        "201 Created",
        b"w-1:chunked body",
    )
    too_long = _wsgi_call(app, _environ(b"y" * 101, key="w-2", **{"wsgi.input_terminated": True}))
    assert too_long[0] == "413 Request Entity Too Large"
    assert json.loads(too_long[1])["type"] == Problem.REQUEST_TOO_LARGE.type_uri
    # PEP 3333: without a length, an input that is not terminated is not read (it could block).
    assert _wsgi_call(app, _environ(b"unread", key="w-3")) == ("201 Created", b"w-3:")


def test_a_non_ascii_wsgi_path_is_matched_as_text(local_client: Any) -> None:
    sync_guard, _ = guards(local_client, "wsgi-paths")
    from firstwrite.http import Route

    app = WSGIIdempotencyMiddleware(
        _echo_app,
        guard=sync_guard,
        config=HttpConfig(routes=[Route("/caf\u00e9", require_key=True)]),
    )
    raw_path = "/caf\u00e9".encode().decode("latin-1")  # how PEP 3333 carries it
    environ = _environ(b"", PATH_INFO=raw_path)
    del environ["HTTP_IDEMPOTENCY_KEY"]
    status, body = _wsgi_call(app, environ)
    assert status.startswith("400") and json.loads(body)["type"] == Problem.KEY_MISSING.type_uri


@pytest.mark.parametrize("framework", ["starlette", "flask"])
def test_with_the_disable_switch_requests_pass_through(
    framework: str, local_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FIRSTWRITE_IDEMPOTENCY_DISABLED, set when the guard is built: the middleware passes every
    request to the app (a duplicate runs again, no replay header, no record, no key needed)."""
    monkeypatch.setenv("FIRSTWRITE_IDEMPOTENCY_DISABLED", "1")
    sync_guard, async_guard = guards(local_client, "disabled")
    monkeypatch.delenv("FIRSTWRITE_IDEMPOTENCY_DISABLED")  # read at construction, not per call
    seen: list[Any] = []
    if framework == "starlette":
        client: Any = TestClient(_starlette(async_guard, seen, require_key=True))
    else:
        client = _flask(sync_guard, seen, require_key=True).test_client()
    answers = [_post(client, "/create", "k-1"), _post(client, "/create", "k-1")]
    answers.append(_post(client, "/create", None))  # a required key missing: no 400 either
    assert [a.status_code for a in answers] == [201, 201, 201]
    assert all("idempotent-replayed" not in a.headers for a in answers)
    assert seen == [None, None, None]  # the handler's view: not guarded
    assert local_client.scan(TableName="disabled")["Count"] == 0
