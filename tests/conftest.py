"""Fixtures shared by every test.

Engine fixtures (all clients use dummy credentials and never read the machine's AWS setup).
The project's own pytest plugin (``firstwrite.testing.plugin``, loaded by its entry point) gives
the per-test engine and the ``firstwrite_*`` fixtures; this file adds the project's own:

``engine``
    The plugin's ``firstwrite_engine`` under its short name: a fresh
    :class:`~firstwrite.engine.api.Engine` on its own SQLite file under ``tmp_path``, closed
    after the test.
``direct``
    A :class:`~firstwrite.engine.direct.client.DirectClient` on ``engine`` (region us-east-1).
``http_server``
    A real ``firstwrite engine serve`` subprocess on a free loopback port with its own database,
    started once per session (per xdist worker) and stopped with SIGTERM at the end, when a
    traceback in its log fails the run. It is an :class:`HttpServer`: ``.url``, ``.process``,
    ``.log_path``. Tests sharing it must use ``table_name`` for their tables.
``ddb``
    A real boto3 ``dynamodb`` client, parametrized two ways: ``inprocess`` (bound to ``engine``
    with :func:`~firstwrite.engine.binding.sync.bind`, no sockets) and ``http`` (``endpoint_url`` =
    ``http_server.url``). ``Config(retries={"max_attempts": 0})`` so a failure surfaces at once.
    A test using ``ddb`` runs twice; the server is only started if an ``http`` case runs.
``table_name``
    A table name unique to the test (and the parametrization), valid for DynamoDB.
``make_ddb``
    The factory behind ``ddb``: ``make_ddb("http", config=..., region_name=...)``.
``cli_server``
    ``cli_server(*extra_args)``: start another ``firstwrite engine serve`` subprocess (own
    database under ``tmp_path``) for tests that need their own server; stopped at teardown.
``temp_operation``
    ``temp_operation(name, fn, service="dynamodb")``: replace an engine operation for one test,
    to drive the adapters with operations of known behaviour.
``playwright``
    Playwright's sync API, started once per module, for the browser tests (``tests/browser.py``
    launches Debian's Chromium with it).

Tests that need a program outside Python (node, wrk, valgrind, curl, Chromium, rabbitmq-server)
call ``tools.need_tool`` or carry ``@pytest.mark.needs_tool("name", ...)``: where it is missing
they skip with ``missing tool: <name> (install: ...)``, and the run ends with one line counting
those skips (``FIRSTWRITE_REQUIRE_TOOLS=1``, set by ``.ci/run``, makes them failures).

``make test-fast`` (``-m "not slow"``) leaves out, besides the tests marked ``slow``, every test
that kills a process (``crash``), every benchmark (the ``bench`` xdist group) and the files of
:data:`SLOW_FILES`: child interpreters, browsers, real servers under load, the proofs. It also
selects the ``fast`` hypothesis profile: property tests draw a fifth of their examples
(``tests/hypothesis_budget.py``); ``make test`` draws them all.
"""

from __future__ import annotations

import functools
import re
import signal
import ssl
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Imported before any test can run pytest in-process (pytester): its sys.modules snapshot drops
# what a nested run imported first, and PyYAML's C extension, once loaded, keeps the first
# module's node classes, so a second `import yaml` parses nodes its own constructors do not
# know ("could not determine a constructor for the tag None" in cfn-lint, in the docs tests).
import yaml  # noqa: F401
from botocore.config import Config
from hypothesis import settings

from hypothesis_budget import FAST_PROFILE, SUITE_PROFILE
from tools import need_tools, summary_line

if TYPE_CHECKING:
    # Imported inside the fixtures: a broken engine module must fail the tests that use it,
    # not the collection of every test in the repository.
    from firstwrite.engine.api import Engine
    from firstwrite.engine.direct.client import DirectClient

from engine_process import (
    HttpServer,
    start_server,
    stop_server,
)

pytest_plugins = ["pytester"]  # tests/testing runs test modules under the plugin

NO_RETRIES = Config(retries={"max_attempts": 0})

# Marked slow (node ids under tests/: a directory with its trailing slash, a file, or a file's
# test): what they run costs seconds per test (subprocesses, pip, Chromium, the AWS CLI, load
# proofs), so the pre-commit loop runs without them; `make test` and CI run them all.
SLOW_FILES = (
    "bench/",
    "proof/",
    "test_install.py",
    "docs/test_doc_harness.py",
    "docs/test_doc_pasted_harness.py",
    "console/test_browser.py",
    "engine/server/security/test_browser_origin.py",
    "engine/server/test_aws_cli.py",
    "engine/server/test_big_requests.py",
    "engine/server/test_server_connections.py",
    "engine/server/test_server_stalls.py",
    "engine/server/test_js_sdk.py",
    "engine/test_race.py",
    "demo/test_demo_service.py",
    "idempotency/test_processes.py",
    "idempotency/test_budget_outage.py",
    "cli/test_cli_race.py",
    "cli/test_cli_dynalite.py",
    "events/test_soak.py",
    "testing/test_plugin_runs.py",
    "testing/test_moto_module.py",
    "http/test_http_bench.py",
    # Measured at 0.3 s a test or more (-n 0): servers, scenario runs, brokers, sweeps.
    "docs/test_documents.py",
    "docs/test_pasted.py",
    "console/test_scenarios.py",
    "console/test_api.py",
    "console/test_pages.py",
    "events/test_sqs_poller.py",
    "events/test_rabbitmq.py",
    "events/test_broker_errors.py",
    "events/test_lambda_sources.py",
    "engine/server/test_screening.py",
    "engine/server/test_request_heads.py",
    "engine/storage/test_catalog_cache.py",
    "engine/features/test_ttl_chores.py",
    "engine/features/test_ttl_sweep.py",
    "engine/features/test_regions.py",
    "cli/test_cli_keys.py",
    "cli/test_cli_engine_serve.py",
    "cli/test_cli_table.py",
    "testing/test_redirect.py",
    "http/test_http_budget.py",
    "http/test_http_transactional.py",
    "idempotency/test_retry_after.py",
    # Measured again after the shared sessions (-n 0, 0.3 s a test or more): child interpreters
    # (pip-less installs, a documented pytest run, CLI servers), crashes and SIGKILLs of a
    # server, bodies paced or sent big on purpose, a broker's visibility timeouts.
    "engine/features/test_faults.py::test_the_documented_example_runs",
    "engine/features/test_faults.py::test_crash_points",
    "engine/storage/test_pitr_crash.py",
    "engine/server/security/test_bodies_before_auth.py",
    "engine/server/test_body_pacing.py",
    "cli/test_cli_allow_host.py",
    "events/test_async_sqs_poller.py",
)
SLOW_IDS = tuple(f"tests/{prefix}" for prefix in SLOW_FILES)


# `make test-fast` (the pre-commit loop) selects this profile: property tests draw a fifth of
# their examples there (hypothesis_budget.examples scales the counts tests set themselves,
# which a profile alone cannot), since they were three quarters of tests/engine/binding's time.
# `make test` and CI keep the default profile and so every test's full count; a failure found
# in either is saved in the example database and replayed first by both.
# Neither profile has a deadline: a GC pause or a busy core during one example is not a failure
# (hypothesis's 200 ms default made it a "Flaky" error); tests/hypothesis_budget.py says more.
settings.register_profile(SUITE_PROFILE, deadline=None)
settings.register_profile(FAST_PROFILE, settings.get_profile(SUITE_PROFILE), max_examples=20)
settings.load_profile(SUITE_PROFILE)  # --hypothesis-profile=fast loads over it


def _share_httpx_tls_context() -> None:
    """Give every default httpx client one TLS context instead of a new one each.

    httpx builds an SSL context for each client, loading certifi's CA bundle (about 40 ms of
    CPU), and ``httpx.get()`` and friends make a client per call: in the tests, which speak plain
    HTTP to loopback servers, that was half the CPU time of tests/engine/server. Only the default
    (``verify=True``, no client certificate, ``trust_env``) is shared; httpx never changes a
    context after creating it, and ``SSLContext`` is safe to share across threads.
    """
    import httpx._transports.default as transports  # httpx has no public hook for this

    create = transports.create_ssl_context
    shared = functools.cache(create)

    def create_ssl_context(
        verify: Any = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is True and cert is None:
            return shared(verify, None, trust_env)
        return create(verify=verify, cert=cert, trust_env=trust_env)

    transports.create_ssl_context = create_ssl_context


_share_httpx_tls_context()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (
            item.nodeid.startswith(SLOW_IDS)
            or item.get_closest_marker("crash") is not None
            or any(m.args[:1] == ("bench",) for m in item.iter_markers("xdist_group"))
        ):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("needs_tool"):
        need_tools(marker.args)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: Any) -> Iterator[None]:
    """One line listing the tests skipped for a missing tool (``tools.summary_line``), after
    pytest's own short summary; under xdist the controller holds every worker's reports, so it
    counts them all."""
    yield
    reasons = [
        str(report.longrepr[2])
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3
    ]
    line = summary_line(reasons)
    if line is not None:
        terminalreporter.write_line(line, yellow=True)


@pytest.fixture
def cli_server(tmp_path: Path) -> Iterator[Callable[..., HttpServer]]:
    servers: list[HttpServer] = []

    def start(*extra_args: str, db_path: Path | None = None) -> HttpServer:
        db = db_path or tmp_path / f"cli-{len(servers)}.db"
        server = start_server(db, *extra_args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(signal.SIGKILL if server.process.poll() is None else signal.SIGTERM)


@pytest.fixture
def engine(firstwrite_engine: Engine) -> Engine:
    return firstwrite_engine


@pytest.fixture
def direct(engine: Engine) -> DirectClient:
    from firstwrite.engine.direct.client import DirectClient

    return DirectClient(engine, region="us-east-1")


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = start_server(tmp_path_factory.mktemp("http-server") / "engine.db")
    yield server
    stop_server(server)
    # A traceback in the log is an error the server hit while answering some test (a 500, a
    # crash in a background task) that the test itself may not have seen: the run fails.
    log = server.log()
    if "Traceback" in log:
        at = log.index("Traceback")
        pytest.fail(f"the session's engine server logged a traceback:\n{log[at : at + 3000]}")


@pytest.fixture
def make_ddb(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``make_ddb(transport, **client_kwargs)``: a boto3 client of either transport."""

    def make(
        transport: str, *, service_name: str = "dynamodb", region_name: str = "us-east-1", **kw: Any
    ) -> Any:
        from firstwrite.engine.binding.sync import bind, dummy_client

        kw.setdefault("config", NO_RETRIES)
        if transport == "inprocess":
            eng = request.getfixturevalue("engine")
            return bind(dummy_client(service_name, region_name, **kw), eng)
        if transport == "http":
            url = request.getfixturevalue("http_server").url
            return dummy_client(service_name, region_name, endpoint_url=url, **kw)
        raise ValueError(transport)

    return make


@pytest.fixture(params=["inprocess", "http"])
def ddb(request: pytest.FixtureRequest, make_ddb: Callable[..., Any]) -> Any:
    return make_ddb(request.param)


@pytest.fixture
def table_name(request: pytest.FixtureRequest) -> str:
    stem = re.sub(r"[^a-zA-Z0-9_.-]+", "-", request.node.name).strip("-")[:200]
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as started:
        yield started


@pytest.fixture
def temp_operation() -> Iterator[Callable[..., None]]:
    """``temp_operation(name, fn, service="dynamodb")``: override an engine operation for one test.

    For testing the adapters with operations of known behaviour; the previous entry (if any)
    is restored afterwards.
    """
    from firstwrite.engine import operations

    saved: list[tuple[dict[str, Any], str, Any]] = []

    def register(name: str, fn: Callable[..., Any], service: str = "dynamodb") -> None:
        table = operations.STREAMS if service == "streams" else operations.DYNAMODB
        saved.append((table, name, table.get(name)))
        table[name] = fn

    yield register
    for table, name, previous in reversed(saved):
        if previous is None:
            table.pop(name, None)
        else:
            table[name] = previous
