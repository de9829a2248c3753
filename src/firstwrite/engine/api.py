"""The engine's front door: ``Engine.execute(operation, request) -> response``.

One request shape everywhere: the DynamoDB JSON request as a dict in, the response dict out, or a
:class:`~firstwrite.engine.errors.DynamoDBError` raised. The HTTP server, the boto3 binding and
the direct client are thin adapters over :meth:`Engine.execute`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from . import operations
from .clock import Clock
from .context import (
    DEFAULT_ACCOUNT,
    DEFAULT_REGION,
    ChangeHook,
    Context,
    FinishHook,
    Interceptor,
    Operation,
    TableHook,
)
from .errors import DynamoDBError
from .faults import FaultInjector
from .regions import Replication
from .storage import Storage, TableRow, Writer
from .values import Item

if TYPE_CHECKING:
    from .ttl import TimeToLive, TTLConfig

Durability = Literal["full", "normal"]
Service = Literal["dynamodb", "streams"]
# The table-row cache of Engine.quiet() is dropped whole past this many (id, version) entries.
_QUIET_CACHE_MAX = 4096


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
        enforce_throughput: bool = False,
        ttl_config: TTLConfig | None = None,
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
        # Per change hook (when it says): whether it acts on a table's writes at all. A write to
        # a table no hook acts on may take the single-statement fast path (see quiet()).
        self.change_watches: dict[ChangeHook, Callable[[TableRow], bool]] = {}
        # Cost hints the operations keep for themselves (e.g. items.conditional_write): what
        # recent calls did, to pick the cheaper way to the same answer. Never semantics.
        self.hints: dict[Any, Any] = {}
        # quiet()'s answers per (table id, version), with the hook list they were made for.
        self._quiet: dict[tuple[int, int], tuple[list[ChangeHook], int, bool]] = {}
        self.table_hooks: list[TableHook] = []
        # Called before every operation (fault injection: throttling, latency, injected errors);
        # may raise a DynamoDBError. Empty unless a test or the admin API switches faults on.
        self.interceptors: list[Interceptor] = []
        # Tags, streams and TTL ride on the hooks above: one dict lookup per write when off.
        from . import streams, ttl
        from .operations import tags

        tags.install(self)
        streams.install(self)
        self.ttl: TimeToLive = ttl.TimeToLive(self, ttl_config)
        self._closed = False
        self._lock = threading.Lock()
        # Fault injection (off until a fault is added; see faults.py) and global tables.
        self.faults = FaultInjector(self, enforce_throughput=enforce_throughput)
        self.replication = Replication(self)
        self.replicas = self.replication  # the same object, by the name tests reach for
        self.ttl.start()  # the background sweeper (engine.ttl.sweep_now() runs one at once)

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
        elif type(request) is not dict and not isinstance(request, Mapping):
            raise DynamoDBError("SerializationException", "Start of list found where not expected")
        ctx = Context(self, request, region or self.default_region, wire, operation)
        if self.interceptors:
            for intercept in self.interceptors:
                intercept(ctx)
            finish = ctx.finish_hooks
            if finish:
                return _finished(fn, ctx, finish)
        return fn(ctx)

    def add_change_hook(self, hook: ChangeHook, watches: Callable[[TableRow], bool]) -> None:
        """Install ``hook``, which acts only on writes to tables for which ``watches`` holds."""
        self.change_watches[hook] = watches
        self.change_hooks = [*self.change_hooks, hook]  # a new list: see quiet()

    def quiet(self, row: TableRow) -> bool:
        """Whether no change hook acts on writes to ``row``'s table (hooks installed without a
        ``watches`` predicate, e.g. by fault injection, act on every table)."""
        # Cached per catalog row version for the current hook list (installers replace the
        # list; its length guards against an append in place).
        hooks = self.change_hooks
        key = (row.id, row.version)
        cached = self._quiet.get(key)
        if cached is not None and cached[0] is hooks and cached[1] == len(hooks):
            return cached[2]
        watches = self.change_watches
        quiet = True
        for hook in hooks:
            watch = watches.get(hook)
            if watch is None or watch(row):
                quiet = False
                break
        if len(self._quiet) >= _QUIET_CACHE_MAX:
            self._quiet.clear()
        self._quiet[key] = (hooks, len(hooks), quiet)
        return quiet

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
                self.ttl.stop()
                self.replication.close()
                self.storage.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _finished(fn: Operation, ctx: Context, hooks: list[FinishHook]) -> dict[str, Any]:
    try:
        response = fn(ctx)
    except DynamoDBError as error:
        for hook in hooks:
            hook(ctx, None, error)
        raise
    for hook in hooks:
        hook(ctx, response, None)
    return response
