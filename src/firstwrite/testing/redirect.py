"""Redirect every DynamoDB client the code under test creates to an in-process engine.

moto's ``mock_aws`` convenience with the engine's semantics: inside ``with mock_dynamodb() as
engine:``, every boto3 or aiobotocore ``dynamodb`` and ``dynamodbstreams`` client is answered by
``engine`` through the boto3 binding (:func:`firstwrite.engine.binding.follow`), whoever created it and
however: ``boto3.client``, ``boto3.resource``, ``boto3.session.Session().client``, aiobotocore's
``create_client``; inside the block or before it; in any thread. There is no endpoint to
configure, and a configured one (DynamoDB Local, ``AWS_ENDPOINT_URL_DYNAMODB``) is overridden.
Clients of other services are not touched.

How: :func:`install` adds one handler to botocore's built-in handlers, which every botocore (and
aiobotocore) session registers when it is created. At ``creating-client-class`` for DynamoDB
and DynamoDB Streams it gives the new client class a base class whose ``__init__`` binds each
client to *whichever redirect is active at each call*. With none active the handlers step aside
and the call goes to its endpoint as usual. So a client created at import time, before any
redirect, is redirected too, provided its session was created after :func:`install`; the pytest
plugin installs it at start-up. An explicit ``bind(client, engine)`` replaces the redirect for
that one client.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._extra import require

if TYPE_CHECKING:
    from firstwrite.engine import Engine

__all__ = [
    "Redirect",
    "answered",
    "current_engine",
    "install",
    "install_on_import",
    "mock_dynamodb",
]

F = TypeVar("F", bound=Callable[..., Any])

SERVICE_IDS = ("dynamodb", "dynamodb-streams")  # botocore's hyphenized service ids
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIDFIRSTWRITETESTING",
    "AWS_SECRET_ACCESS_KEY": "firstwrite-testing-secret",
}

# Guards the state below. Re-entrant: entering a redirect may import botocore for the first
# time, which runs install() (see _InstallAfterImport) on the same thread.
_lock = threading.RLock()
_count_lock = threading.Lock()
_installed = False
_stack: list[Redirect] = []  # active redirects, innermost last
_active: Engine | None = None  # the innermost one's engine, read on every call without the lock
_answered = 0
_saved: tuple[dict[str, str | None], Any] | None = None  # environment and boto3's default session


def current_engine() -> Engine | None:
    """The innermost active redirect's engine, or ``None`` when no redirect is active."""
    global _answered
    engine = _active
    if engine is not None:
        with _count_lock:
            _answered += 1
    return engine


def answered() -> int:
    """How many requests redirected clients have had answered in this process."""
    return _answered


# -- watching new clients -----------------------------------------------------------------


class _Redirectable:
    """Added to the bases of every DynamoDB client class: binds each new client to the
    active redirect (looked up per call)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _follow(self)


def _follow(client: Any) -> None:
    try:
        from firstwrite.engine.binding import follow
    except ImportError:  # no engine extra: there is nothing to redirect to
        return
    follow(client, current_engine)


def _on_creating_client_class(base_classes: list[type], **_kwargs: Any) -> None:
    if not any(issubclass(b, _Redirectable) for b in base_classes):
        base_classes.insert(0, _Redirectable)


def install() -> None:
    """Watch the DynamoDB clients of every botocore session created from now on (idempotent)."""
    global _installed
    # Imported before taking the lock: this import may itself call install() (see below).
    from botocore.handlers import BUILTIN_HANDLERS

    with _lock:
        if _installed:
            return
        for service in SERVICE_IDS:
            BUILTIN_HANDLERS.append((f"creating-client-class.{service}", _on_creating_client_class))
        _installed = True


class _InstallAfterImport(importlib.abc.MetaPathFinder):
    """Runs :func:`install` as soon as ``botocore.handlers`` has been imported, so that a test
    run that never imports botocore does not pay for importing it (about half a second)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "botocore.handlers":
            return None
        sys.meta_path.remove(self)  # once; find the real spec with the other finders
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_install(module: ModuleType) -> None:
            exec_module(module)
            install()

        loader.exec_module = exec_then_install  # type: ignore[method-assign]
        return spec


def install_on_import() -> None:
    """:func:`install` now if botocore is loaded, else right after it is."""
    if "botocore.handlers" in sys.modules:
        install()
    elif not any(isinstance(f, _InstallAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _InstallAfterImport())


# -- the redirect ---------------------------------------------------------------------------


def _patch_environment(region: str, credentials: bool) -> tuple[dict[str, str | None], Any]:
    """What the outermost redirect sets, as moto does: fake credentials (so no credential chain
    runs and nothing can reach a real account), a region if none is configured, and a new
    boto3 default session (one created earlier holds whatever it resolved then, and may predate
    :func:`install`)."""
    import boto3
    import botocore.session

    changes: dict[str, str | None] = {}
    if credentials:
        changes.update(FAKE_CREDENTIALS)
        changes["AWS_SESSION_TOKEN"] = None
    if botocore.session.Session().get_config_variable("region") is None:
        changes["AWS_DEFAULT_REGION"] = region  # boto3 would find none (environment, config)
    saved = {name: os.environ.get(name) for name in changes}
    for name, value in changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    default_session = boto3.DEFAULT_SESSION
    boto3.DEFAULT_SESSION = _new_default_session()
    return saved, default_session


_LOADERS: dict[str | None, Any] = {}  # botocore data loaders shared by redirects, by data_path


def _new_default_session() -> Any:
    """A fresh boto3 default session, as moto starts one, that skips re-reading botocore's data.

    A new session parses endpoints.json and each service's model again, most of a first
    ``boto3.client("dynamodb")``'s cost, in every test. The loader holds only that read-only data (the clients of one session share it in
    the same way), so redirects share one loader; the session is new each time.
    """
    import boto3
    import botocore.session

    core = botocore.session.Session()
    data_path = core.get_config_variable("data_path")
    loader = _LOADERS.get(data_path)
    if loader is None:
        loader = _LOADERS[data_path] = core.get_component("data_loader")
    core.register_component("data_loader", loader)
    session = boto3.session.Session(botocore_session=core)
    # boto3 appends its data directory to the loader's paths once per session: keep one.
    loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))
    return session


def _restore_environment(saved: tuple[dict[str, str | None], Any]) -> None:
    import boto3

    environ, default_session = saved
    for name, value in environ.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    boto3.DEFAULT_SESSION = default_session


def _refresh() -> None:
    global _active
    _active = _stack[-1].engine if _stack else None


class Redirect:
    """A redirect of every DynamoDB client to one engine: see :func:`mock_dynamodb`.

    ``with`` it (the value is the engine), or decorate a function with it (each call gets a
    redirect of its own: a fresh engine unless one was given).
    """

    def __init__(
        self, engine: Engine | None = None, *, region: str = "us-east-1", credentials: bool = True
    ) -> None:
        self._given = engine
        self.region = region
        self.credentials = credentials
        self.engine: Engine | None = None  # while active

    def __enter__(self) -> Engine:
        global _saved
        if self.engine is not None:
            raise RuntimeError("this redirect is already active; nest another mock_dynamodb()")
        install()
        engine = self._given
        if engine is None:
            engine = require("firstwrite.engine", "Engine")(region=self.region)
        self.engine = engine
        with _lock:
            if not _stack:
                _saved = _patch_environment(self.region, self.credentials)
            _stack.append(self)
            _refresh()
        return engine

    def __exit__(self, *exc: object) -> None:
        global _saved
        engine, self.engine = self.engine, None
        with _lock:
            _stack.remove(self)
            _refresh()
            if not _stack and _saved is not None:
                _restore_environment(_saved)
                _saved = None
        if self._given is None and engine is not None:
            engine.close()

    def __call__(self, func: F) -> F:
        return _decorate(func, self._given, self.region, self.credentials)


def _decorate(func: F, engine: Engine | None, region: str, credentials: bool) -> F:
    if inspect.isclass(func):
        raise TypeError(
            "mock_dynamodb decorates functions; for a whole class, use "
            'pytestmark = pytest.mark.usefixtures("firstwrite_mock") in it'
        )

    def redirect() -> Redirect:
        return Redirect(engine, region=region, credentials=credentials)

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            with redirect():
                return await func(*args, **kwargs)

        return run_async  # type: ignore[return-value]

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        with redirect():
            return func(*args, **kwargs)

    return run  # type: ignore[return-value]


@overload
def mock_dynamodb(
    func: None = None,
    /,
    *,
    engine: Engine | None = None,
    region: str = "us-east-1",
    credentials: bool = True,
) -> Redirect: ...


@overload
def mock_dynamodb(
    func: F,
    /,
    *,
    engine: Engine | None = None,
    region: str = "us-east-1",
    credentials: bool = True,
) -> F: ...


def mock_dynamodb(
    func: F | None = None,
    /,
    *,
    engine: Engine | None = None,
    region: str = "us-east-1",
    credentials: bool = True,
) -> Redirect | F:
    """Answer every DynamoDB and DynamoDB Streams client in process, as ``moto.mock_aws`` does.

    ``with mock_dynamodb() as engine:``, ``@mock_dynamodb`` or ``@mock_dynamodb(region=...)``
    (sync or async functions). ``engine``: the engine to answer with; by default a fresh
    in-memory one per redirect, closed at its end. Redirects nest; the innermost answers.

    While the outermost redirect is active, as under moto: ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` are fake (``credentials=False`` leaves them alone),
    ``AWS_DEFAULT_REGION`` is ``region`` if boto3 would find no region (in the environment or
    the AWS config file), and ``boto3.DEFAULT_SESSION`` is a new session; all are restored at
    its end.
    """
    if func is None:
        return Redirect(engine, region=region, credentials=credentials)
    return _decorate(func, engine, region, credentials)
