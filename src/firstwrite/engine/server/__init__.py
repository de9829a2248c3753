"""The HTTP server: DynamoDB's JSON 1.0 protocol over HTTP, an ASGI app run by uvicorn.

The protocol without the HTTP is the engine's (:mod:`firstwrite.engine.wire`), shared with the
boto3 binding and the direct client; the modules here, by what they hold:

* ``app`` — the app (:class:`EngineApp`, :func:`create_app`): the data plane's ``POST /`` and
  where it runs each call (inline, on the lane, or screened in the pool), the health check, and
  the composition of the rest; :func:`serve` and :class:`ServerThread` run it;
* ``asgi`` — ASGI types and problem+json answers; ``content_coding`` — compressed bodies,
  answered over HTTP;
* ``sigv4``, ``auth``, ``session`` — who may call: SigV4, the guard (host, origin, credentials),
  the browser session;
* ``admin``, ``control`` — the admin API under ``/_firstwrite/`` and everything but the data plane;
* ``connection``, ``bodies``, ``lanes``, ``screening``, ``reduction``, ``runner`` — connections,
  request bodies, the lane thread and byte budget, big requests screened in a worker process,
  and uvicorn's set-up (uvicorn itself loads only when a server starts).
"""

from __future__ import annotations

from .app import EngineApp, Mounted, ServerThread, create_app, serve
from .sigv4 import SigV4Verifier

__all__ = ["EngineApp", "Mounted", "ServerThread", "SigV4Verifier", "create_app", "serve"]
