"""Real boto3 and aiobotocore clients answered by an in-process engine, with no sockets.

botocore runs its own client half; the engine's answer is handed over at ``before-call``.
The public face is :func:`bind` / :func:`unbind` (any client), :func:`follow` (any client,
answered by whichever engine a function names at each call: the test redirect's entry),
:func:`local_client` and :func:`local_resource` (boto3) and :func:`local_aio_client`
(aiobotocore, loaded on first use). The modules behind it:
``sync`` and ``aio`` (the two bindings), ``steps`` (what they share), ``validate``, ``request``,
``serialize`` and ``parse`` (botocore's own steps, compiled once per operation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .sync import bind, follow, local_client, local_resource, unbind

if TYPE_CHECKING:
    from .aio import local_aio_client

__all__ = ["bind", "follow", "local_aio_client", "local_client", "local_resource", "unbind"]


def __getattr__(name: str) -> Any:
    """``local_aio_client`` on first use: aiobotocore is an optional extra."""
    if name != "local_aio_client":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .aio import local_aio_client

    return local_aio_client
