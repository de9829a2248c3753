"""The console's JSON API: every state change it makes, each a same-origin JSON POST.

Each answer carries the machine-readable result and ``html``, the result drawn by the same
template the page uses, which the page's script swaps in. Bad input is a 4xx
``application/problem+json`` with a ``detail`` a person can act on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.templating import Jinja2Templates

from . import race as race_module
from . import scenarios, tables, wire
from .pages import base_of
from .security import too_large
from .state import Console

_TITLES = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    409: "Conflict",
    415: "Unsupported Media Type",
}


def problem(status: int, detail: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """An RFC 9457 problem answer."""
    return JSONResponse(
        {
            "type": "about:blank",
            "title": _TITLES.get(status, "Error"),
            "status": status,
            "detail": detail,
        },
        status_code=status,
        headers=dict(headers or {}),
        media_type="application/problem+json",
    )


class BadRequest(Exception):
    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


async def _object(request: Request, allowed: set[str]) -> dict[str, Any]:
    limit = int(request.scope.get("firstwrite.console.max_body", 1024 * 1024))
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadRequest(too_large(limit)[2], 413)
            chunks.append(chunk)
    except ClientDisconnect:  # (gone before its body was read: the answer reaches nobody)
        raise BadRequest("the client left before sending its whole body") from None
    body = b"".join(chunks)
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise BadRequest(
            f"unknown member(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    return value


class Api:
    def __init__(self, console: Console, templates: Jinja2Templates) -> None:
        self.console = console
        self.templates = templates
        # One re-seed at a time: two at once claim the same example keys, and the second
        # got the layer's InProgressError (a 500).
        self._seeding = threading.Lock()

    def fragment(self, request: Request, name: str, **context: Any) -> str:
        template = self.templates.get_template(name)
        return template.render(
            base=base_of(request), now=self.console.engine.clock.now(), **context
        )

    async def clock(self, request: Request) -> JSONResponse:
        clock = await run_in_threadpool(self.console.clock)
        return JSONResponse({"now": clock.now_ms, "frozen": clock.frozen, "offset": clock.offset})

    async def run(self, request: Request) -> JSONResponse:
        try:
            body = await _object(request, {"operation", "request", "region"})
            operation = body.get("operation")
            text = body.get("request", "")
            region = body.get("region") or self.console.region
            if not isinstance(region, str):
                raise BadRequest("region must be a region name such as us-east-1")
            region = tables.region_of(region, self.console.region)
            if not isinstance(operation, str):
                raise BadRequest("operation is required: a DynamoDB operation name such as PutItem")
            if not isinstance(text, str):
                raise BadRequest("request must be the request body as text")
            answer = await run_in_threadpool(wire.run, self.console.engine, operation, text, region)
        except (wire.RunInputError, tables.BadInput) as exc:
            return problem(400, str(exc))
        except BadRequest as exc:
            return problem(exc.status, exc.detail)
        return JSONResponse(
            {
                "status": answer.status,
                "headers": answer.headers,
                "body": answer.body,
                "code": answer.code,
                "hint": answer.hint,
                "html": self.fragment(request, "run_result.html", answer=answer),
            }
        )

    async def race(self, request: Request) -> JSONResponse:
        try:
            body = await _object(request, {"n", "key"})
            n, key = race_module.validate(body.get("n"), body.get("key"))
        except race_module.RaceInputError as exc:
            return problem(400, str(exc))
        except BadRequest as exc:
            return problem(exc.status, exc.detail)
        result = await run_in_threadpool(self.console.race, n, key)
        return JSONResponse(
            {**result.summary(), "html": self.fragment(request, "race_result.html", result=result)}
        )

    async def scenario(self, request: Request) -> JSONResponse:
        found = scenarios.by_slug(request.path_params["slug"])
        if found is None:
            names = ", ".join(s.slug for s in scenarios.SCENARIOS)
            return problem(404, f"no scenario {request.path_params['slug']!r}; there are {names}")
        try:
            await _object(request, set())
        except BadRequest as exc:
            return problem(exc.status, exc.detail)
        outcome = await run_in_threadpool(self.console.run_scenario, found)
        return JSONResponse(
            {
                **outcome.summary(),
                "html": self.fragment(
                    request, "scenario_result.html", outcome=outcome, scenario=found
                ),
            }
        )

    async def reseed(self, request: Request) -> JSONResponse:
        try:
            await _object(request, set())
        except BadRequest as exc:
            return problem(exc.status, exc.detail)
        if not self._seeding.acquire(blocking=False):
            return problem(409, "the example records are being re-seeded already: try again")
        try:
            count = await run_in_threadpool(self.console.seed, fresh_only=False)
        finally:
            self._seeding.release()
        return JSONResponse({"seeded": count})
