"""The admin HTTP API under ``/_firstwrite/``: the clock, faults and replication of a served engine.

JSON in and out; every error is an RFC 9457 ``application/problem+json`` body. The server
composes these routes (:func:`routes`) with its own; routing is Starlette's.

* ``GET /_firstwrite/clock``: ``{"now", "frozen", "offset"}``. ``POST`` applies ``{"reset": true,
  "freeze": true|false, "set": t, "advance": s}`` in that order (``freeze`` with ``set`` freezes
  at t).
* ``GET /_firstwrite/faults``: ``{"faults": [...], "throughput": {...}}``. ``POST`` adds one fault,
  ``{"kind": ..., scope, options}`` (see faults.py) -> 201. ``DELETE`` removes every fault;
  ``DELETE /_firstwrite/faults/{id}`` removes one.
* ``GET /_firstwrite/faults/throughput``: ``{"enforced", "burst_seconds"}``; ``POST`` sets them.
* ``GET /_firstwrite/replication``: lag settings and the queued backlog. ``POST`` takes
  ``{"lag": s, "region": r, "apply": true, "flush": true}``.
* ``POST /_firstwrite/replication/replicas`` ``{"table", "region", "replica"}`` adds a replica
  (UpdateTable ReplicaUpdates Create); ``DELETE`` with the same body removes it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import DynamoDBError
from ..values import to_wire
from ..wire import loads
from .asgi import Problem

if TYPE_CHECKING:
    from ..api import Engine

__all__ = ["MAX_BODY_BYTES", "ROOT", "Admin", "json_response", "read_body", "routes"]

ROOT = "/_firstwrite"
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
        "key",
        "units",
    }
)


def _bad(detail: str) -> Problem:
    return Problem(400, "Bad Request", detail)


def _object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        value = loads(body)
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


class Admin:
    """The admin operations of one engine: blocking handlers ``(body) -> (status, JSON value)``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # clock -----------------------------------------------------------------------------------

    def clock_get(self, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, self.engine.clock.state()

    def clock_post(self, body: dict[str, Any]) -> tuple[int, Any]:
        _only(body, {"reset", "freeze", "set", "advance"})
        reset, freeze = _flag(body, "reset"), _flag(body, "freeze")
        at, advance = _number(body, "set"), _number(body, "advance")
        clock = self.engine.clock
        # Checked whole before anything moves: an instant the engine cannot stand at (its dates
        # and ARNs could not show it) is a 400, and the clock stays where it was.
        start = at if at is not None else (time.time() if reset else clock.now())
        try:
            for instant in (at, None if advance is None else start + advance):
                if instant is not None:
                    clock.check(instant)
        except ValueError as exc:
            raise _bad(str(exc)) from None
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

    def fault_delete(self, body: dict[str, Any], text: str) -> tuple[int, Any]:
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


Handler = Callable[..., tuple[int, Any]]


def routes(engine: Engine) -> list[BaseRoute]:
    """The admin routes of ``engine``, for the server to compose with its own."""
    admin = Admin(engine)
    table: list[tuple[str, dict[str, Handler]]] = [
        ("/clock", {"GET": admin.clock_get, "POST": admin.clock_post}),
        (
            "/faults",
            {"GET": admin.faults_get, "POST": admin.faults_post, "DELETE": admin.faults_delete},
        ),
        ("/faults/throughput", {"GET": admin.throughput_get, "POST": admin.throughput_post}),
        ("/faults/{fault_id:path}", {"DELETE": admin.fault_delete}),
        ("/replication", {"GET": admin.replication_get, "POST": admin.replication_post}),
        ("/replication/replicas", {"POST": admin.replicas_post, "DELETE": admin.replicas_delete}),
    ]
    return [
        Route(ROOT + path, _endpoint(handlers), methods=list(handlers)) for path, handlers in table
    ]


def _endpoint(handlers: Mapping[str, Handler]) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        body = _object(await read_body(request))
        handler = handlers[request.method if request.method != "HEAD" else "GET"]
        # Engine work (flush, UpdateTable, clearing history) may block: off the event loop.
        status, payload = await run_in_threadpool(handler, body, *request.path_params.values())
        return json_response(payload, status)

    return endpoint


def json_response(payload: Any, status: int = 200) -> Response:
    """``payload`` as an ``application/json`` response (``B`` values as base64)."""
    body = json.dumps(payload, default=to_wire).encode()
    return Response(body, status, media_type="application/json")


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, at most ``limit`` bytes (a 413 problem beyond)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Problem(413, "Payload Too Large", f"admin bodies are limited to {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
