"""The HTTP server: DynamoDB's JSON 1.0 protocol over HTTP, an ASGI app run by uvicorn.

The modules, by what they hold:

* ``app`` — the app (:class:`EngineApp`, :func:`create_app`): the data plane's ``POST /`` and
  where it runs each call (inline, on the lane, or screened in the pool), the health check, and
  the composition of the rest; :func:`serve` and :class:`ServerThread` run it;
* ``wire`` — the protocol without HTTP (decode, :func:`~.wire.wire_call`, encode), which the boto3
  binding shares; ``asgi`` — ASGI types and problem+json answers; ``content_coding`` — compressed
  bodies;
* ``sigv4``, ``auth``, ``session`` — who may call: SigV4, the guard (host, origin, credentials),
  the browser session;
* ``admin``, ``control`` — the admin API under ``/_firstwrite/`` and everything but the data plane;
* ``connection``, ``bodies``, ``lanes``, ``screening``, ``reduction``, ``runner`` — connections,
  request bodies, the lane thread and byte budget, big requests screened in a worker process,
  and uvicorn's set-up.

Names are imported lazily: the boto3 binding imports ``wire`` and ``asgi`` without loading
uvicorn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import EngineApp, Mounted, ServerThread, create_app, serve
    from .sigv4 import SigV4Verifier

__all__ = ["EngineApp", "Mounted", "ServerThread", "SigV4Verifier", "create_app", "serve"]

_WHERE = {name: "app" for name in __all__} | {"SigV4Verifier": "sigv4"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
