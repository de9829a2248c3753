"""The engine's front door: ``Engine.execute(operation, request) -> response``.

One request shape everywhere: the DynamoDB JSON request as a dict in, the response dict out, or a
:class:`~firstwrite.engine.errors.DynamoDBError` raised. The HTTP server, the boto3 binding and
the direct client are thin adapters over :meth:`Engine.execute`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from . import operations
from .clock import Clock
from .errors import DynamoDBError
from .storage import Storage, TableRow, Writer
from .values import Item

Durability = Literal["full", "normal"]
# (ctx, writer, table, old item, new item): one item changed; None means absent.
ChangeHook = Callable[["Context", Writer, TableRow, "Item | None", "Item | None"], None]
# (ctx, writer, table, "create" | "update" | "delete", request params) -> the table row to use.
Interceptor = Callable[["Context"], None]
TableHook = Callable[["Context", Writer, TableRow, str, Mapping[str, Any]], TableRow]
Service = Literal["dynamodb", "streams"]

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "000000000000"


@dataclass
class Context:
    """What an operation sees of one call: its parameters and the engine serving it."""

    engine: Engine
    params: Mapping[str, Any]
    region: str = DEFAULT_REGION
    wire: bool = False  # B values are base64 text (JSON callers) rather than bytes
    operation: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def storage(self) -> Storage:
        return self.engine.storage

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    def now(self) -> float:
        return self.engine.clock.now()


class Engine:
    """A local DynamoDB on one SQLite file (or in memory when ``path`` is ``None``).

    Several engines, threads or processes may open the same file: every single-item conditional
    write is linearizable across all of them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "normal",
        clock: Clock | None = None,
        account_id: str = DEFAULT_ACCOUNT,
        region: str = DEFAULT_REGION,
    ) -> None:
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', not {durability!r}")
        operations.load_all()
        self.path = None if path is None else os.fspath(path)
        self.durability: Durability = durability
        self.clock = clock or Clock()
        self.account_id = account_id
        self.default_region = region
        self.storage = Storage(self.path, durability=durability)
        # Extension points for features that ride on every write or table change (streams,
        # replication): called inside the write transaction. Empty lists cost one check.
        self.change_hooks: list[ChangeHook] = []
        self.table_hooks: list[TableHook] = []
        # Called before every operation (fault injection: throttling, latency, injected errors);
        # may raise a DynamoDBError. Empty unless a test or the admin API switches faults on.
        self.interceptors: list[Interceptor] = []
        self._closed = False
        self._lock = threading.Lock()

    def execute(
        self,
        operation: str,
        request: Mapping[str, Any] | None = None,
        *,
        region: str | None = None,
        wire: bool = False,
        service: Service = "dynamodb",
    ) -> dict[str, Any]:
        """Run one operation. Raises :class:`DynamoDBError` exactly where DynamoDB would fail."""
        table = operations.STREAMS if service == "streams" else operations.DYNAMODB
        fn = table.get(operation)
        if fn is None:
            raise DynamoDBError("UnknownOperationException", "")
        if request is None:
            request = {}
        elif not isinstance(request, Mapping):
            raise DynamoDBError("SerializationException", "Start of list found where not expected")
        ctx = Context(self, request, region or self.default_region, wire, operation)
        if self.interceptors:
            for intercept in self.interceptors:
                intercept(ctx)
        return fn(ctx)

    def emit_change(
        self, ctx: Context, writer: Writer, row: TableRow, old: Item | None, new: Item | None
    ) -> None:
        """Tell every change hook that one item changed (inside the write transaction)."""
        for hook in self.change_hooks:
            hook(ctx, writer, row, old, new)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self.storage.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
