"""firstwrite's local DynamoDB engine and the three ways into it.

- :class:`DirectClient`: boto3's low-level API answered in-process, no JSON (the fast path).
- :func:`local_client` / :func:`local_resource` / :func:`bind`: real boto3 clients whose
  requests are answered in-process through the whole botocore stack; :func:`local_aio_client`,
  the same for aiobotocore (``async with local_aio_client(engine) as client``).
- :func:`serve` / :class:`ServerThread` / :func:`create_app`: DynamoDB's JSON 1.0 protocol over
  HTTP, for any SDK or language.
- What :class:`Engine` takes: :class:`Clock`, :class:`TTLConfig`, :class:`IndexConfig` and the
  ``Durability`` names (``"full"``, ``"normal"``).

Names are imported lazily, so ``import firstwrite.engine`` stays cheap (boto3 and uvicorn load
only when used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import Engine
    from .binding import bind, local_aio_client, local_client, local_resource, unbind
    from .clock import Clock
    from .context import Durability
    from .direct import DirectClient, client_error
    from .errors import DynamoDBError
    from .features.indexes.maintenance import IndexConfig
    from .features.ttl import TTLConfig
    from .server import EngineApp, Mounted, ServerThread, SigV4Verifier, create_app, serve

__all__ = [
    "Clock",
    "DirectClient",
    "Durability",
    "DynamoDBError",
    "Engine",
    "EngineApp",
    "IndexConfig",
    "Mounted",
    "ServerThread",
    "SigV4Verifier",
    "TTLConfig",
    "bind",
    "client_error",
    "create_app",
    "local_aio_client",
    "local_client",
    "local_resource",
    "serve",
    "unbind",
]

_WHERE = {
    "Engine": "api",
    "Clock": "clock",
    "Durability": "context",
    "IndexConfig": "features.indexes.maintenance",
    "TTLConfig": "features.ttl",
    "DynamoDBError": "errors",
    "DirectClient": "direct",
    "client_error": "direct",
    "bind": "binding",
    "unbind": "binding",
    "local_client": "binding",
    "local_aio_client": "binding",
    "local_resource": "binding",
    "EngineApp": "server",
    "Mounted": "server",
    "ServerThread": "server",
    "SigV4Verifier": "server",
    "create_app": "server",
    "serve": "server",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
