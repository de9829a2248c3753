"""The console's ASGI app: Starlette routes over server-rendered Jinja2 templates.

Pages (GET) only read; every state change is a same-origin JSON POST under ``/api/`` (see
:mod:`.security`). Errors are pages a person can read, or ``application/problem+json`` for the
API; bad input is a 4xx with a clear message, never a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from firstwrite.engine import DynamoDBError, Engine
from firstwrite.engine.server.origins import OriginPolicy
from firstwrite.idempotency import MemoryMetrics, record_view

from . import diagrams, records, scenarios
from .api import Api, problem
from .pages import Pages, base_of
from .security import SameOriginJSON
from .state import Console

__all__ = ["MAX_BODY_BYTES", "PUBLIC_PATHS", "create_console"]

log = logging.getLogger("firstwrite.console")

HERE = Path(__file__).resolve().parent
MAX_BODY_BYTES = 1024 * 1024
PUBLIC_PATHS = ("/login", "/static/")
"""Paths (under the mount point) an authenticating server may serve without a session: the
login form and the CSS/JS it needs. Everything else should require one."""


def _sequence_diagram(outcome: scenarios.Outcome) -> str:
    found = scenarios.by_slug(outcome.slug)
    return diagrams.scenario_markup(outcome, None if found is None else found.number)


def _templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=HERE / "templates")
    env = templates.env
    env.filters.update(
        iso=records.iso,
        span=records.span,
        shorten=record_view.shorten,
        wire_json=records.wire_json,
        pretty=records.pretty,
    )
    env.globals.update(
        until=records.until,
        relative=records.relative,
        sequence_diagram=_sequence_diagram,
        race_diagram=diagrams.race_markup,
    )
    env.trim_blocks = True
    env.lstrip_blocks = True
    return templates


def create_console(
    engine: Engine,
    *,
    metrics: MemoryMetrics | None = None,
    seed: bool = True,
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """The console for ``engine`` as an ASGI app, to be mounted (e.g. at ``/console``).

    ``metrics``: the :class:`~firstwrite.idempotency.MemoryMetrics` its metrics page shows. The
    console's own guards (scenarios, seeding) count into it; pass the one your app's guards use
    (alone or in a :class:`~firstwrite.idempotency.MultiMetrics`) to see your traffic too.
    ``seed``: on a fresh database, write example records in every state into the console's own
    table ``firstwrite-console-examples`` (never into any other table).
    ``allowed_hosts``: the ``Host`` names it answers besides loopback ones (``localhost``,
    ``127.0.0.1``, ...), whatever server it is mounted in; ``["*"]``: any (see
    :mod:`.security`).
    """
    console = Console(engine, metrics if metrics is not None else MemoryMetrics())
    if seed:
        console.seed(fresh_only=True)
    templates = _templates()
    pages = Pages(console, templates)
    api = Api(console, templates)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        detail = str(exc.detail)
        if request.url.path.startswith(base_of(request) + "/api/") or request.method != "GET":
            return problem(exc.status_code, detail, headers=exc.headers)
        return await pages.error(request, exc.status_code, detail)

    async def engine_error(request: Request, exc: Exception) -> Response:
        # An answer the pages did not expect (e.g. an injected fault): say what it was.
        assert isinstance(exc, DynamoDBError)
        status = 400 if exc.status < 500 else 502
        detail = f"The engine answered {exc.code}: {exc.message or '(no message)'}"
        if request.url.path.startswith(base_of(request) + "/api/") or request.method != "GET":
            return problem(status, detail)
        return await pages.error(request, status, detail)

    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/tables", pages.tables, name="tables"),
        Route("/tables/{name}", pages.table, name="table"),
        Route("/run", pages.run, name="run"),
        Route("/race", pages.race, name="race"),
        Route("/scenarios", pages.scenarios, name="scenarios"),
        Route("/scenarios/{slug}", pages.scenario, name="scenario"),
        Route("/metrics", pages.metrics, name="metrics"),
        Route("/login", pages.login, name="login"),
        Route("/api/clock", api.clock, methods=["GET"]),
        Route("/api/run", api.run, methods=["POST"]),
        Route("/api/race", api.race, methods=["POST"]),
        Route("/api/scenarios/{slug}", api.scenario, methods=["POST"]),
        Route("/api/examples", api.reseed, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                SameOriginJSON,
                max_body_bytes=MAX_BODY_BYTES,
                policy=OriginPolicy("127.0.0.1", allowed_hosts),
            )
        ],
        exception_handlers={HTTPException: http_error, DynamoDBError: engine_error},
    )
    app.state.console = console
    return app
