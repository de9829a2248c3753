"""The no-configuration default: a local engine database file, so a first call needs no AWS.

The only place the idempotency layer touches :mod:`firstwrite.engine`, imported lazily. The
file is ``$FIRSTWRITE_LOCAL_DB`` or ``~/.firstwrite/local.db``; one engine per file per
process; the table is created on first use. Where the file is gets logged once per process
(a warning: state that lives in a file on this machine should never be a surprise, least of
all in production, where a client must be passed). The engine's clock is DynamoDB's there:
a guard on the default client reads it (:func:`default_clock`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ._machine import table_setup
from ._machine.driving import drive
from ._machine.machine import StateMachine
from .clients import configured
from .config import IdempotencyConfig
from .effects import bind

ENV_VAR = "FIRSTWRITE_LOCAL_DB"

log = logging.getLogger("firstwrite.idempotency")

_lock = threading.Lock()
_engines: dict[str, Any] = {}
_clients: dict[tuple[str, str], Any] = {}
_tables: set[tuple[str, str]] = set()


def default_path() -> str:
    return os.environ.get(ENV_VAR) or os.path.join(
        os.path.expanduser("~"), ".firstwrite", "local.db"
    )


def _engine() -> tuple[Any, Any]:
    """The engine's ``Engine`` and ``local_client``; the layer alone (``pip install
    firstwrite``) needs only boto3, so without the ``engine`` extra say how to get it."""
    try:
        from firstwrite.engine import Engine
        from firstwrite.engine.binding.sync import local_client
    except ImportError as exc:
        raise ImportError(
            "Idempotency() without a client keeps its records in the local engine, which is not "
            f"installed ({exc.name or exc} is missing): pip install 'firstwrite[engine]', or pass "
            "a DynamoDB client: Idempotency(config, client=boto3.client('dynamodb'))",
            name=exc.name,
        ) from exc
    return Engine, local_client


def default_client(config: IdempotencyConfig, path: str | None = None) -> Any:
    """A boto3 DynamoDB client bound in-process to the local engine file, with the table
    ``config.table_name`` created (on-demand, TTL on)."""
    path = os.path.abspath(path or default_path())
    region = config.region or "us-east-1"
    with _lock:
        client = _clients.get((path, region))
        if client is None:
            Engine, local_client = _engine()
            engine = _engines.get(path)
            if engine is None:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                engine = _engines[path] = Engine(path)
                log.warning(
                    "no DynamoDB client given: idempotency records are kept in the local engine "
                    "database %s (set %s to move it; pass client=boto3.client('dynamodb') to use "
                    "DynamoDB)",
                    path,
                    ENV_VAR,
                    extra={"local_db": path},
                )
            # one attempt per call: the layer's retry policy does the retrying, inside the
            # call's budget (see .clients)
            client = _clients[path, region] = configured(
                lambda **kw: local_client(engine, region=region, **kw), config.budget
            )
        if (path, config.table_name) not in _tables:
            drive(table_setup.ensure_table(StateMachine(config)), bind(client), time.sleep)
            _tables.add((path, config.table_name))
    return client


def default_clock(path: str | None = None) -> Callable[[], float]:
    """The clock of the local engine :func:`default_client` answers with (its ``Date`` is
    from it): a guard on the default client reads leases on it, as on DynamoDB's."""
    path = os.path.abspath(path or default_path())
    with _lock:
        engine = _engines[path]
    clock: Callable[[], float] = engine.clock.now
    return clock
