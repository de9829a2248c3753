"""The web console: watch a claim race, and stage every failure case the layer defends against.

``create_console(engine)`` returns an ASGI app to mount at ``/console`` (see
``docs/console.md``). It lives outside the engine: the engine never imports it, and it reaches
the engine only through what any client uses (``Engine.execute``, a boto3 client bound in
process), the engine's clock, fault, TTL and replication APIs that the admin API drives, and,
while a race runs, one change hook on the race's own table (``Engine.hooks``: when the winning
item was written, under the write lock). It runs scenarios through the idempotency layer's
public API.
"""

from __future__ import annotations

from .app import MAX_BODY_BYTES, PUBLIC_PATHS, create_console

__all__ = ["MAX_BODY_BYTES", "PUBLIC_PATHS", "create_console"]
