"""replay="status-only" behind the middleware (HttpConfig and Route): a duplicate gets the first
response's status and the kept headers that do not describe a body, never the body; a guard
whose own IdempotencyConfig says status-only is refused when the middleware is built."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from http_support import asgi_request, wsgi_request

from firstwrite.http import HttpConfig, Route
from firstwrite.http.asgi import IdempotencyMiddleware
from firstwrite.http.wsgi import WSGIIdempotencyMiddleware
from firstwrite.idempotency import Idempotency, IdempotencyConfig

minted = itertools.count(1)


def _guard(local_client: Any, **changes: Any) -> Idempotency:
    guard = Idempotency(IdempotencyConfig(table_name="status-only", **changes), client=local_client)
    guard.ensure_table()
    return guard


class Minter:
    """Mints a secret per run: 201, a Location, a JSON body holding the secret."""

    def __init__(self) -> None:
        self.secrets: list[str] = []

    def _mint(self) -> tuple[bytes, list[tuple[str, str]]]:
        self.secrets.append(f"sk_live_{next(minted)}")
        body = json.dumps({"api_key": self.secrets[-1]}).encode()
        headers = [
            ("Content-Type", "application/json"),
            ("Location", f"/api-keys/{len(self.secrets)}"),
            ("ETag", '"v1"'),
        ]
        return body, headers

    async def asgi(self, scope: Any, receive: Any, send: Any) -> None:
        body, headers = self._mint()
        raw = [(n.lower().encode(), v.encode()) for n, v in headers]
        await send({"type": "http.response.start", "status": 201, "headers": raw})
        await send({"type": "http.response.body", "body": body})

    def wsgi(self, environ: Any, start_response: Any) -> list[bytes]:
        body, headers = self._mint()
        start_response("201 Created", headers)
        return [body]


def _call(app: Any, framework: str, path: str, key: str) -> tuple[int, dict[str, str], bytes]:
    request = asgi_request if framework == "asgi" else wsgi_request
    return request(app, path, key)[:3]


def _app(framework: str, minter: Minter, guard: Idempotency, config: HttpConfig) -> Any:
    if framework == "asgi":
        return IdempotencyMiddleware(minter.asgi, guard=guard, config=config)
    return WSGIIdempotencyMiddleware(minter.wsgi, guard=guard, config=config)


@pytest.mark.parametrize("framework", ["asgi", "wsgi"])
def test_a_duplicate_gets_the_status_and_headers_never_the_body(
    local_client: Any, framework: str
) -> None:
    minter = Minter()
    guard = _guard(local_client)
    app = _app(framework, minter, guard, HttpConfig(replay="status-only"))
    status, headers, body = _call(app, framework, "/api-keys", "mint-1")
    assert status == 201 and json.loads(body) == {"api_key": minter.secrets[0]}
    assert headers["idempotency-replay-unavailable"] == "status-only"  # keep this body
    status, headers, body = _call(app, framework, "/api-keys", "mint-1")
    assert len(minter.secrets) == 1  # not run again
    assert (status, body) == (201, b"")
    assert headers["location"] == "/api-keys/1"
    assert headers["idempotent-replayed"] == "true"
    assert headers["idempotency-replay-unavailable"] == "status-only"
    assert headers["content-length"] == "0"
    assert "content-type" not in headers and "etag" not in headers  # they described the body
    items = local_client.scan(TableName="status-only")["Items"]
    assert items and not any(minter.secrets[0] in repr(item) for item in items)


@pytest.mark.parametrize("framework", ["asgi", "wsgi"])
def test_a_route_can_be_status_only_while_others_replay_in_full(
    local_client: Any, framework: str
) -> None:
    minter = Minter()
    config = HttpConfig(routes=[Route("/api-keys", replay="status-only")])
    app = _app(framework, minter, _guard(local_client), config)
    for path in ("/api-keys", "/orders"):
        first = _call(app, framework, path, f"k-{path}")
        again = _call(app, framework, path, f"k-{path}")
        assert again[1]["idempotent-replayed"] == "true"
        if path == "/orders":
            assert again[2] == first[2] and json.loads(again[2])["api_key"]
            assert "idempotency-replay-unavailable" not in again[1]
        else:
            assert again[2] == b""
    assert len(minter.secrets) == 2


@pytest.mark.parametrize("framework", ["asgi", "wsgi"])
def test_a_status_only_guard_is_refused_when_the_middleware_is_built(
    local_client: Any, framework: str
) -> None:
    guard = _guard(local_client, replay="status-only")
    with pytest.raises(ValueError, match=r"HttpConfig\(replay='status-only'\)"):
        _app(framework, Minter(), guard, HttpConfig())


def test_replay_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="replay is 'full' or 'status-only'"):
        HttpConfig(replay="body-only")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="replay is 'full' or 'status-only'"):
        Route("/x", replay="none")  # type: ignore[arg-type]
