"""Everything the server serves besides the data plane, composed explicitly behind one guard.

The admin API (:mod:`.admin`), the browser session (:mod:`.session`), extra admin apps under
``/_firstwrite/`` and apps mounted under a path prefix (``mounts={"/console": app}``) make one
Starlette app, whose errors are all ``application/problem+json``. In front of it sits
:class:`~.auth.Guard`: the host, same-origin, JSON-only and credential checks. A mounted app is
served Starlette's ``Mount`` way: it sees the full ``path``, ``root_path`` set to its prefix, and
the caller in ``scope["firstwrite.principal"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .asgi import ASGIApp, problem_handlers
from .auth import Guard
from .bodies import BodyReader
from .lanes import ByteBudget
from .origins import HostCheck
from .session import Sessions, session_routes
from .sigv4 import SigV4Verifier

if TYPE_CHECKING:
    from ..api import Engine

__all__ = ["ADMIN_PREFIX", "Mounted", "compose"]

ADMIN_PREFIX = "/_firstwrite/"


@dataclass(frozen=True)
class Mounted:
    """An app to mount, with the paths under its prefix that need no credentials.

    ``public`` paths are relative to the mount point: ``"/login"`` is that path exactly,
    ``"/static/"`` everything under it. They still get the same-origin and JSON-only checks.
    """

    app: ASGIApp
    public: tuple[str, ...] = ()


def compose(
    engine: Engine,
    *,
    routes: Mapping[str, ASGIApp],
    mounts: Mapping[str, ASGIApp | Mounted],
    credentials: Mapping[str, str] | None,
    verifier: SigV4Verifier | None,
    sessions: Sessions,
    hosts: HostCheck | None,
    bodies: BodyReader | None = None,
    budget: ByteBudget | None = None,
) -> Guard:
    """The guarded app serving ``/_firstwrite/...`` and every mount prefix."""
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute, Mount

    from . import admin

    for prefix in routes:
        if not prefix.startswith(ADMIN_PREFIX):
            raise ValueError(f"admin routes live under {ADMIN_PREFIX}, not {prefix!r}")
    for prefix in mounts:
        if (
            not prefix.startswith("/")
            or prefix.endswith("/")
            or (prefix + "/").startswith(ADMIN_PREFIX)
        ):
            raise ValueError(
                f"a mount prefix looks like '/console': it starts with '/', does not end "
                f"with one and is not under {ADMIN_PREFIX}; got {prefix!r}"
            )
    composed: list[BaseRoute] = [*admin.routes(engine), *session_routes(credentials, sessions)]
    # Longest prefix first, so /_firstwrite/faults/x beats /_firstwrite/faults.
    for prefix in sorted(routes, key=len, reverse=True):
        composed.append(Mount(prefix, routes[prefix]))
    public: list[str] = []
    for prefix, mounted in mounts.items():
        if isinstance(mounted, Mounted):
            public += [prefix + path for path in mounted.public]
            composed.append(Mount(prefix, mounted.app))
        else:
            composed.append(Mount(prefix, mounted))
    app = Starlette(routes=composed, exception_handlers=problem_handlers())
    return Guard(
        app,
        verifier=verifier,
        sessions=sessions,
        hosts=hosts,
        public=public,
        bodies=bodies,
        budget=budget,
    )
