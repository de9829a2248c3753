"""The console's pages: GET only, server-rendered, readable without JavaScript."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from firstwrite.engine import DynamoDBError

from . import examples as examples_module
from . import metrics as metrics_module
from . import race as race_module
from . import scenarios, seed, tables, wire
from .state import Console

PRINCIPAL_SCOPE_KEY = "firstwrite.principal"
"""Where the engine's server puts the signed-in caller (an object with ``access_key_id``)."""


def signed_in_as(request: Request) -> str | None:
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    name = getattr(principal, "access_key_id", None)
    return name if isinstance(name, str) else None


def base_of(request: Request) -> str:
    """Where the console is mounted (``/console``), for links; ``""`` at the root."""
    return str(request.scope.get("root_path", "")).rstrip("/")


class Pages:
    def __init__(self, console: Console, templates: Jinja2Templates) -> None:
        self.console = console
        self.templates = templates

    async def render(
        self, request: Request, name: str, section: str, status: int = 200, **context: Any
    ) -> Response:
        clock = await run_in_threadpool(self.console.clock)
        return self.templates.TemplateResponse(
            request,
            name,
            {
                "base": base_of(request),
                "section": section,
                "clock": clock,
                "now": clock.now,
                "signed_in_as": signed_in_as(request),
                **context,
            },
            status_code=status,
        )

    async def error(self, request: Request, status: int, detail: str) -> Response:
        titles = {400: "Bad request", 404: "Not found", 405: "Method not allowed"}
        return await self.render(
            request,
            "error.html",
            "",
            status,
            title=titles.get(status, f"Error {status}"),
            detail=detail,
        )

    async def overview(self, request: Request) -> Response:
        console = self.console

        def gather() -> dict[str, Any]:
            engine = console.engine
            names = engine.execute("ListTables", {}, region=console.region).get("TableNames", [])
            return {
                "engine": engine,
                "table_count": len(names),
                "examples_table": seed.EXAMPLES_TABLE,
                "examples_exist": seed.EXAMPLES_TABLE in names,
                "examples": seed.EXAMPLES,
                "faults": engine.faults.describe(),
                "max_n": race_module.MAX_N,
                "scenarios": scenarios.SCENARIOS,
                "scenario_count": scenarios.count_in_words(),
            }

        return await self.render(
            request, "overview.html", "overview", **await run_in_threadpool(gather)
        )

    async def tables(self, request: Request) -> Response:
        try:
            region = tables.region_of(request.query_params.get("region"), self.console.region)
        except tables.BadInput as exc:
            return await self.error(request, 400, str(exc))
        summaries = await run_in_threadpool(tables.list_tables, self.console.engine, region)
        return await self.render(
            request,
            "tables.html",
            "tables",
            region=region,
            tables=summaries,
            regions=await run_in_threadpool(self._regions, region),
        )

    def _regions(self, region: str) -> list[str]:
        """Regions worth offering: the default one, the one shown, and every replica's."""
        found = {self.console.region, region}
        engine = self.console.engine
        names = engine.execute("ListTables", {}, region=self.console.region).get("TableNames", [])
        for name in names:
            try:
                table = engine.execute(
                    "DescribeTable", {"TableName": name}, region=self.console.region
                )
            except DynamoDBError:
                continue
            found.update(r["RegionName"] for r in table["Table"].get("Replicas", []))
        return sorted(found)

    async def table(self, request: Request) -> Response:
        name = request.path_params["name"]
        params = request.query_params
        engine = self.console.engine
        try:
            region = tables.region_of(params.get("region"), self.console.region)
            detail = await run_in_threadpool(tables.describe, engine, region, name)
            page = await run_in_threadpool(tables.items, engine, detail, params.get("after"))
        except tables.BadInput as exc:
            return await self.error(request, 400, str(exc))
        except tables.NoSuchTable as exc:
            return await self.error(
                request, 404, f"{exc} Pick one from the list of tables in {exc.region}."
            )
        return await self.render(
            request, "table.html", "tables", table=detail, page=page, first=not params.get("after")
        )

    async def run(self, request: Request) -> Response:
        console = self.console
        bodies = await run_in_threadpool(examples_module.examples, console.engine, console.region)
        operation = request.query_params.get("operation") or "PutItem"
        if operation not in bodies:
            operation = "PutItem"
        return await self.render(
            request,
            "run.html",
            "run",
            examples=bodies,
            targets={op: wire.target_of(op) for op in bodies},
            operation=operation,
            body=bodies[operation],
            region=console.region,
        )

    async def race(self, request: Request) -> Response:
        return await self.render(
            request,
            "race.html",
            "race",
            result=self.console.last_race,
            min_n=race_module.MIN_N,
            max_n=race_module.MAX_N,
            table=race_module.RACE_TABLE,
        )

    async def scenarios(self, request: Request) -> Response:
        return await self.render(
            request,
            "scenarios.html",
            "scenarios",
            scenarios=scenarios.SCENARIOS,
            outcomes=self.console.outcomes,
        )

    async def scenario(self, request: Request) -> Response:
        found = scenarios.by_slug(request.path_params["slug"])
        if found is None:
            return await self.error(
                request, 404, f"There is no scenario {request.path_params['slug']!r}."
            )
        return await self.render(
            request,
            "scenario.html",
            "scenarios",
            scenario=found,
            outcome=self.console.outcomes.get(found.slug),
        )

    async def metrics(self, request: Request) -> Response:
        return await self.render(
            request, "metrics.html", "metrics", metrics=metrics_module.view(self.console.metrics)
        )

    async def login(self, request: Request) -> Response:
        back = request.query_params.get("next", "")
        base = base_of(request)
        if not back.startswith(base + "/") or back.startswith("//") or "\\" in back:
            back = base + "/"  # only back into the console: never an open redirect
        return await self.render(request, "login.html", "", next=back)
