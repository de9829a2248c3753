"""The pytest plugin (entry point ``firstwrite``): fixtures over firstwrite's local engine.

Each test gets its own engine (every fixture in ``docs/testing.md``):

* ``firstwrite_engine``: an :class:`~firstwrite.engine.api.Engine` in memory (or on a file:
  ``@pytest.mark.firstwrite(storage="file")``, ini ``firstwrite_storage``), closed at teardown;
* ``firstwrite_clock``: its :class:`~firstwrite.engine.clock.Clock`, frozen at the test's start;
* ``firstwrite_client`` / ``firstwrite_resource`` / ``firstwrite_streams_client`` /
  ``firstwrite_aio_client``: real boto3 (and aiobotocore) clients bound in process to it;
* ``firstwrite_idempotency_config`` / ``firstwrite_guard``: an
  :class:`~firstwrite.idempotency.Idempotency` over ``firstwrite_client``, its table created,
  its clock the engine's (override the config fixture to configure it);
* ``firstwrite_server``: the engine served over HTTP on a free loopback port (``.url``);
* ``firstwrite_mock``: every DynamoDB client the code under test creates is answered by the
  engine (:func:`~firstwrite.testing.mock_dynamodb`); ``--firstwrite-mock`` (or ini
  ``firstwrite_mock = true``) applies it to every test.

The engine is imported only when a fixture needs it: without the ``engine`` extra the plugin
loads, and a test that asks for an engine fails saying what to install.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from . import redirect
from ._extra import MissingExtraError, require

if TYPE_CHECKING:
    from firstwrite.engine import Engine, ServerThread
    from firstwrite.engine.clock import Clock  # a type only: the engine exports no Clock
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

STORAGES = ("memory", "file")


@dataclass(frozen=True)
class Settings:
    """One test's engine settings: its ``firstwrite`` marker over the ini options."""

    storage: str = "memory"
    region: str = "us-east-1"

    @classmethod
    def of(cls, request: pytest.FixtureRequest) -> Settings:
        values: dict[str, Any] = {
            "storage": request.config.getini("firstwrite_storage") or "memory"
        }
        marker = request.node.get_closest_marker("firstwrite")
        if marker is not None:
            if marker.args:
                raise pytest.UsageError("@pytest.mark.firstwrite takes keyword arguments only")
            unknown = set(marker.kwargs) - {"storage", "region"}
            if unknown:
                raise pytest.UsageError(f"@pytest.mark.firstwrite: unknown {sorted(unknown)}")
            values.update(marker.kwargs)
        if values["storage"] not in STORAGES:
            raise pytest.UsageError(
                f"firstwrite storage must be one of {STORAGES}, not {values['storage']!r}"
            )
        return cls(**values)


def _require(module: str, name: str) -> Any:
    try:
        return require(module, name)
    except MissingExtraError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


# -- hooks ----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("firstwrite", "firstwrite's local DynamoDB")
    group.addoption(
        "--firstwrite-mock",
        action="store_true",
        default=None,
        help="answer every DynamoDB client of every test with a fresh in-process engine "
        "(as if each test used the firstwrite_mock fixture)",
    )
    parser.addini(
        "firstwrite_mock",
        "apply the firstwrite_mock fixture to every test (like --firstwrite-mock)",
        type="bool",
        default=False,
    )
    parser.addini(
        "firstwrite_storage",
        "where firstwrite_engine keeps its data: memory (the default) or file (a SQLite file "
        "in tmp_path, which other processes can open too)",
        default="memory",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "firstwrite(storage='memory'|'file', region='us-east-1'): the engine of this test's "
        "firstwrite fixtures",
    )
    # Watch DynamoDB clients of sessions created from now on, so that clients the code under
    # test creates at import time can be redirected too.
    redirect.install_on_import()


_ANSWERED_AT_START = pytest.StashKey[int]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_ANSWERED_AT_START] = redirect.answered()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    config = terminalreporter.config
    count = redirect.answered() - config.stash.get(_ANSWERED_AT_START, 0)
    if count:
        terminalreporter.write_line(
            f"firstwrite: {count} DynamoDB requests of redirected clients answered in process"
        )


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def firstwrite_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """A fresh engine for this test (in memory by default, or a file under ``tmp_path``)."""
    settings = Settings.of(request)
    engine_class = _require("firstwrite.engine", "Engine")
    path = None
    if settings.storage == "file":
        path = request.getfixturevalue("tmp_path") / "firstwrite.db"
    with engine_class(path, region=settings.region) as engine:
        yield engine


@pytest.fixture
def firstwrite_clock(firstwrite_engine: Engine) -> Clock:
    """The engine's clock, frozen now; move it with ``advance``/``set``."""
    firstwrite_engine.clock.freeze()
    return firstwrite_engine.clock


@pytest.fixture
def firstwrite_client(firstwrite_engine: Engine) -> Any:
    """A boto3 ``dynamodb`` client answered in process by ``firstwrite_engine``."""
    local_client = _require("firstwrite.engine.binding", "local_client")
    return local_client(firstwrite_engine, region=firstwrite_engine.default_region)


@pytest.fixture
def firstwrite_resource(firstwrite_engine: Engine) -> Any:
    """``boto3.resource("dynamodb")`` answered in process by ``firstwrite_engine``."""
    local_resource = _require("firstwrite.engine.binding", "local_resource")
    return local_resource(firstwrite_engine, region=firstwrite_engine.default_region)


@pytest.fixture
def firstwrite_streams_client(firstwrite_engine: Engine) -> Any:
    """A boto3 ``dynamodbstreams`` client answered in process by ``firstwrite_engine``."""
    local_client = _require("firstwrite.engine.binding", "local_client")
    return local_client(
        firstwrite_engine, region=firstwrite_engine.default_region, service_name="dynamodbstreams"
    )


def _async_fixture(func: Callable[..., Any]) -> Any:
    """``pytest_asyncio.fixture`` if pytest-asyncio is installed; else a fixture that fails
    saying so (the plugin itself must load without it)."""
    try:
        import pytest_asyncio
    except ImportError:

        @functools.wraps(func)
        def needs_pytest_asyncio(**_kwargs: Any) -> None:
            pytest.fail(f"{func.__name__} needs pytest-asyncio: pip install pytest-asyncio")

        return pytest.fixture(needs_pytest_asyncio)
    return pytest_asyncio.fixture(func)


@_async_fixture
async def firstwrite_aio_client(firstwrite_engine: Engine) -> AsyncIterator[Any]:
    """An aiobotocore ``dynamodb`` client answered in process by ``firstwrite_engine``."""
    local_aio_client = _require("firstwrite.engine.binding", "local_aio_client")
    async with local_aio_client(
        firstwrite_engine, region=firstwrite_engine.default_region
    ) as client:
        yield client


@pytest.fixture
def firstwrite_idempotency_config() -> IdempotencyConfig:
    """The configuration of ``firstwrite_guard`` (override this fixture to change it)."""
    from firstwrite.idempotency import IdempotencyConfig

    return IdempotencyConfig()


@pytest.fixture
def firstwrite_guard(
    firstwrite_engine: Engine,
    firstwrite_client: Any,
    firstwrite_idempotency_config: IdempotencyConfig,
) -> Idempotency:
    """An ``Idempotency`` guard on ``firstwrite_client``, table created, on the engine's clock."""
    from firstwrite.idempotency import Idempotency

    guard = Idempotency(
        firstwrite_idempotency_config, client=firstwrite_client, clock=firstwrite_engine.clock.now
    )
    guard.ensure_table()
    return guard


@pytest.fixture
def firstwrite_server(firstwrite_engine: Engine) -> Iterator[ServerThread]:
    """``firstwrite_engine`` served over HTTP on a free loopback port (``.url``)."""
    server_thread = _require("firstwrite.engine", "ServerThread")
    thread = server_thread(firstwrite_engine)
    thread.start()
    yield thread
    thread.stop()


@pytest.fixture
def firstwrite_mock(firstwrite_engine: Engine) -> Iterator[Engine]:
    """Answer every DynamoDB client created or used in this test with ``firstwrite_engine``."""
    with redirect.mock_dynamodb(engine=firstwrite_engine, region=firstwrite_engine.default_region):
        yield firstwrite_engine


@pytest.fixture(autouse=True)
def _firstwrite_mock_everywhere(request: pytest.FixtureRequest) -> None:
    config = request.config
    if config.getoption("firstwrite_mock") or config.getini("firstwrite_mock"):
        request.getfixturevalue("firstwrite_mock")
