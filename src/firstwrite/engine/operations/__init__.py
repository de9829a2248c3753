"""The operation table: every DynamoDB (and DynamoDB Streams) operation the engine serves.

Each operation is a function ``(ctx: Context) -> dict`` in the module of its family. The HTTP
server, the boto3 binding and the direct client all call :meth:`Engine.execute`, which looks the
operation up here, so there is exactly one code path per operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..context import Context

Operation = Callable[["Context"], dict[str, Any]]

DYNAMODB: dict[str, Operation] = {}
STREAMS: dict[str, Operation] = {}


def operation(name: str, *, service: str = "dynamodb") -> Callable[[Operation], Operation]:
    """Register ``fn`` as the implementation of operation ``name``."""

    def register(fn: Operation) -> Operation:
        table = STREAMS if service == "streams" else DYNAMODB
        if name in table:
            raise RuntimeError(f"operation {name} registered twice")
        table[name] = fn
        return fn

    return register


def load_all() -> None:
    """Import every operation module so that their ``@operation`` decorators run."""
    from .. import streams, ttl  # noqa: F401
    from . import batch, items, query, tables, tags, transactions  # noqa: F401
