"""The admin HTTP API under ``/_firstwrite/``: the clock, faults and replication of a served engine.

JSON in and out; every error is an RFC 9457 ``application/problem+json`` body. Importing this
module registers the routes with the server (:func:`~firstwrite.engine.server.register_admin_route`).

=======  ==========================================  ============================================
Method   Path                                        Does
=======  ==========================================  ============================================
GET      /_firstwrite/clock                          ``{"now", "frozen", "offset"}``
POST     /_firstwrite/clock                          ``{"reset": true, "freeze": true|false,
                                                     "set": t, "advance": s}`` (applied in that
                                                     order; ``freeze`` with ``set`` freezes at t)
GET      /_firstwrite/faults                         ``{"faults": [...], "throughput": {...}}``
POST     /_firstwrite/faults                         add one fault: ``{"kind": ..., scope,
                                                     options}`` (see faults.py) -> 201
DELETE   /_firstwrite/faults                         remove every fault
DELETE   /_firstwrite/faults/{id}                    remove one fault
GET      /_firstwrite/faults/throughput              ``{"enforced", "burst_seconds"}``
POST     /_firstwrite/faults/throughput              ``{"enforced": bool, "burst_seconds": s}``
GET      /_firstwrite/replication                    lag settings and the queued backlog
POST     /_firstwrite/replication                    ``{"lag": s, "region": r, "apply": true,
                                                     "flush": true}``
POST     /_firstwrite/replication/replicas           ``{"table", "region", "replica"}``: add a
                                                     replica (UpdateTable ReplicaUpdates Create)
DELETE   /_firstwrite/replication/replicas           same body: remove it
=======  ==========================================  ============================================
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from .errors import DynamoDBError
from .values import to_wire

if TYPE_CHECKING:
    from .api import Engine

__all__ = ["PREFIXES", "AdminApp", "Problem", "build", "register"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ROOT = "/_firstwrite"
PREFIXES = (ROOT + "/clock", ROOT + "/faults", ROOT + "/replication")
MAX_BODY_BYTES = 1024 * 1024

_FAULT_KEYS = frozenset(
    {
        "kind",
        "operation",
        "operations",
        "table",
        "region",
        "rate",
        "count",
        "seed",
        "code",
        "message",
        "latency",
        "lag",
        "point",
        "exit_code",
    }
)


class Problem(Exception):
    """An admin error: HTTP status, short title and detail (the problem+json members)."""

    def __init__(self, status: int, title: str, detail: str, *, allow: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.allow = allow  # the Allow header of a 405

    def body(self) -> dict[str, Any]:
        return {
            "type": "about:blank",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }


def _bad(detail: str) -> Problem:
    return Problem(400, "Bad Request", detail)


def _object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise _bad(f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _bad("the body must be a JSON object")
    return value


def _only(body: Mapping[str, Any], allowed: frozenset[str] | set[str]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise _bad(f"unknown member(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def _number(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(f"{key} must be a finite number, not {json.dumps(value)}")
    return float(value)


def _flag(body: Mapping[str, Any], key: str) -> bool | None:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise _bad(f"{key} must be true or false, not {json.dumps(value)}")
    return value


def _string(body: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            raise _bad(f"{key} is required")
        return None
    if not isinstance(value, str) or not value:
        raise _bad(f"{key} must be a non-empty string, not {json.dumps(value)}")
    return value


class AdminApp:
    """The ASGI app serving the admin routes of one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method: str = scope["method"]
        path: str = scope["path"].rstrip("/") or "/"
        try:
            body = await _read_body(receive)
            # Engine work (flush, UpdateTable, clearing history) may block: off the event loop.
            status, payload = await asyncio.to_thread(self.handle, method, path, body)
            headers = [(b"content-type", b"application/json")]
        except Problem as problem:
            status, payload = problem.status, problem.body()
            headers = [(b"content-type", b"application/problem+json")]
            if problem.allow is not None:
                headers.append((b"allow", problem.allow.encode()))
        data = json.dumps(payload, default=to_wire).encode()
        headers.append((b"content-length", str(len(data)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        """Answer one admin request (blocking): ``(status, JSON value)`` or raise Problem."""
        route = _ROUTES.get(path)
        if route is None and path.startswith(ROOT + "/faults/"):
            return self._one_fault(method, path.rsplit("/", 1)[1])
        if route is None:
            raise Problem(404, "Not Found", f"No admin route for {path}")
        handler = route.get(method)
        if handler is None:
            allowed = ", ".join(sorted(route))
            raise Problem(
                405,
                "Method Not Allowed",
                f"{method} {path} is not supported; use {allowed}",
                allow=allowed,
            )
        return handler(self, _object(body))

    # clock -----------------------------------------------------------------------------------

    def clock_get(self, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, self.engine.clock.state()

    def clock_post(self, body: dict[str, Any]) -> tuple[int, Any]:
        _only(body, {"reset", "freeze", "set", "advance"})
        reset, freeze = _flag(body, "reset"), _flag(body, "freeze")
        at, advance = _number(body, "set"), _number(body, "advance")
        clock = self.engine.clock
        if reset:
            clock.reset()
        if freeze is True:
            clock.freeze(at)
        elif at is not None:
            clock.set(at)
        if freeze is False:
            clock.unfreeze()
        if advance is not None:
            clock.advance(advance)
        return 200, clock.state()

    # faults ----------------------------------------------------------------------------------

    def faults_get(self, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, self.engine.faults.describe()

    def faults_post(self, body: dict[str, Any]) -> tuple[int, Any]:
        _only(body, _FAULT_KEYS)
        options = dict(body)
        kind = _string(options, "kind", required=True)
        options.pop("kind")
        if "operations" in options:
            if "operation" in options:
                raise _bad("give operation or operations, not both")
            options["operation"] = options.pop("operations")
        operation = options.get("operation")
        if operation is not None and not (
            isinstance(operation, str)
            or (isinstance(operation, list) and all(isinstance(o, str) for o in operation))
        ):
            raise _bad("operation must be an operation name or a list of them")
        latency = options.get("latency")
        if isinstance(latency, Mapping):
            options["latency"] = (latency.get("min"), latency.get("max"))
        elif isinstance(latency, list):
            if len(latency) != 2:
                raise _bad('latency must be seconds, [min, max] or {"min": .., "max": ..}')
            options["latency"] = tuple(latency)
        for key in ("count", "seed", "exit_code"):
            value = options.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise _bad(f"{key} must be an integer, not {json.dumps(value)}")
        try:
            fault = self.engine.faults.add(str(kind), **options)
        except (TypeError, ValueError) as exc:
            raise _bad(str(exc)) from None
        return 201, {"fault": fault.describe()}

    def faults_delete(self, body: dict[str, Any]) -> tuple[int, Any]:
        self.engine.faults.clear()
        return 200, self.engine.faults.describe()

    def _one_fault(self, method: str, text: str) -> tuple[int, Any]:
        if method != "DELETE":
            raise Problem(
                405, "Method Not Allowed", f"{method} of one fault is not supported", allow="DELETE"
            )
        try:
            fault_id = int(text)
        except ValueError:
            raise Problem(404, "Not Found", f"No fault {text!r}") from None
        if not self.engine.faults.remove(fault_id):
            raise Problem(404, "Not Found", f"No fault {fault_id}")
        return 200, self.engine.faults.describe()

    def throughput_get(self, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, self.engine.faults.describe()["throughput"]

    def throughput_post(self, body: dict[str, Any]) -> tuple[int, Any]:
        _only(body, {"enforced", "burst_seconds"})
        enforced = _flag(body, "enforced")
        burst = _number(body, "burst_seconds")
        faults = self.engine.faults
        try:
            faults.enforce_throughput(
                faults.enforcing_throughput if enforced is None else enforced, burst_seconds=burst
            )
        except ValueError as exc:
            raise _bad(str(exc)) from None
        return 200, faults.describe()["throughput"]

    # replication -----------------------------------------------------------------------------

    def _replication_state(self, **extra: Any) -> dict[str, Any]:
        replication = self.engine.replication
        lag = replication.lag()
        return {
            "lag": None if math.isinf(lag) else lag,
            "paused": math.isinf(lag),
            "region_lags": {
                r: (None if math.isinf(v) else v) for r, v in replication.lags().items()
            },
            "backlog": replication.backlog(),
            **extra,
        }

    def replication_get(self, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, self._replication_state()

    def replication_post(self, body: dict[str, Any]) -> tuple[int, Any]:
        _only(body, {"lag", "region", "apply", "flush", "paused"})
        region = _string(body, "region")
        lag = _number(body, "lag")
        paused = _flag(body, "paused")
        replication = self.engine.replication
        try:
            if paused:
                replication.lag(math.inf, region=region)
            elif lag is not None:
                replication.lag(lag, region=region)
        except ValueError as exc:
            raise _bad(str(exc)) from None
        applied = 0
        if _flag(body, "flush"):
            applied = replication.flush(region)
        elif _flag(body, "apply"):
            applied = replication.apply_due(region)
        return 200, self._replication_state(applied=applied)

    def _replica_request(self, body: dict[str, Any]) -> tuple[str, str, str]:
        _only(body, {"table", "region", "replica"})
        table = _string(body, "table", required=True)
        region = _string(body, "region", required=True)
        replica = _string(body, "replica", required=True)
        assert table is not None and region is not None and replica is not None
        return table, region, replica

    def replicas_post(self, body: dict[str, Any]) -> tuple[int, Any]:
        table, region, replica = self._replica_request(body)
        return 200, _dynamodb(
            lambda: self.engine.replication.create_replica(table, region, replica)
        )

    def replicas_delete(self, body: dict[str, Any]) -> tuple[int, Any]:
        table, region, replica = self._replica_request(body)
        return 200, _dynamodb(
            lambda: self.engine.replication.delete_replica(table, region, replica)
        )


def _dynamodb(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return call()
    except DynamoDBError as error:
        raise Problem(error.status, error.code, error.message) from None


Handler = Callable[[AdminApp, dict[str, Any]], tuple[int, Any]]
_ROUTES: dict[str, dict[str, Handler]] = {
    ROOT + "/clock": {"GET": AdminApp.clock_get, "POST": AdminApp.clock_post},
    ROOT + "/faults": {
        "GET": AdminApp.faults_get,
        "POST": AdminApp.faults_post,
        "DELETE": AdminApp.faults_delete,
    },
    ROOT + "/faults/throughput": {
        "GET": AdminApp.throughput_get,
        "POST": AdminApp.throughput_post,
    },
    ROOT + "/replication": {"GET": AdminApp.replication_get, "POST": AdminApp.replication_post},
    ROOT + "/replication/replicas": {
        "POST": AdminApp.replicas_post,
        "DELETE": AdminApp.replicas_delete,
    },
}


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise Problem(
                413, "Payload Too Large", f"admin bodies are limited to {MAX_BODY_BYTES} bytes"
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def build(engine: Engine) -> AdminApp:
    """The admin app for ``engine`` (one instance serves every admin prefix)."""
    return AdminApp(engine)


def register() -> None:
    """Register the admin routes with the HTTP server (done on import)."""
    from .server import register_admin_route

    for prefix in PREFIXES:
        register_admin_route(prefix, build)


register()
