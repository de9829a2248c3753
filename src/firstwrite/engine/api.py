"""The engine's front door: ``Engine.execute(operation, request) -> response``.

One request shape everywhere: the DynamoDB JSON request as a dict in, the response dict out, or a
:class:`~firstwrite.engine.errors.DynamoDBError` raised. The HTTP server, the boto3 binding and
the direct client are thin adapters over :meth:`Engine.execute`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

from . import operations
from .clock import Clock
from .context import (
    DEFAULT_ACCOUNT,
    DEFAULT_REGION,
    ChangeHook,
    Context,
    Feature,
    FinishHook,
    Interceptor,
    Operation,
    TableHook,
)
from .errors import DynamoDBError
from .features.faults.injector import FaultInjector
from .features.indexes.maintenance import IndexConfig, Indexes
from .features.regions import Replication
from .features.streams import Streams
from .features.tags import Tags
from .features.ttl import TimeToLive, TTLConfig
from .storage import Storage, TableRow, Writer
from .values import Item

Durability = Literal["full", "normal"]
Service = Literal["dynamodb", "streams"]
# The table-row cache of Engine.quiet() is dropped whole past this many rows.
_QUIET_CACHE_MAX = 4096


def not_an_object(operation: str, value: Any) -> DynamoDBError:
    """What DynamoDB answers a request body that is JSON but not an object (``null``, a list,
    a string, a number, a boolean): its deserializer's SerializationException for a value that
    cannot be the operation's input structure (the messages dynalite's tests recorded from
    DynamoDB for a structure member; the top-level input is one). ``null`` gets the bare
    SerializationException of a body that cannot be read (no message member)."""
    if value is None:
        return DynamoDBError("SerializationException")
    if isinstance(value, list):
        return DynamoDBError(
            "SerializationException",
            f"Unrecognized collection type class com.amazonaws.dynamodb.v20120810.{operation}Input",
        )
    return DynamoDBError("SerializationException", "Unexpected field type")


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
        index_config: IndexConfig | None = None,
    ) -> None:
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', not {durability!r}")
        # Resolved once, here: SQLite opens a relative path against the working directory of the
        # moment, and connections are opened later (per thread, by the TTL sweeper...), so a
        # chdir() in between would open a second, empty database elsewhere.
        self.path = None if path is None else os.path.abspath(os.fspath(path))
        self.durability: Durability = durability
        self.clock = clock or Clock()
        self.account_id = account_id
        self.default_region = region
        self.storage = Storage(self.path, durability=durability)
        # The hook lists features register on (context.py): called inside the write transaction
        # (change and table hooks) or before every operation (interceptors). Empty lists cost
        # one check. They are replaced, never changed in place (copy-on-write, under _hooks_lock),
        # so a call iterates the list it read.
        self.change_hooks: list[ChangeHook] = []
        # Per change hook (when it says): whether it acts on a table's writes at all. A write to
        # a table no hook acts on may take the single-statement fast path (see quiet()).
        self.change_watches: dict[ChangeHook, Callable[[TableRow], bool]] = {}
        # Per change hook (when it says): whether it may refuse a table's writes with a
        # DynamoDBError after they were made (see refusing()).
        self.change_refusals: dict[ChangeHook, Callable[[TableRow], bool]] = {}
        self.table_hooks: list[TableHook] = []
        self.interceptors: list[Interceptor] = []
        self._hooks_lock = threading.Lock()
        # Cost hints the operations keep for themselves (e.g. items.failed_already): what
        # recent calls did, to pick the cheaper way to the same answer. Never semantics.
        self.hints: dict[Any, Any] = {}
        # quiet()'s answers per catalog row (by id()), with the hook list they were made for.
        self._quiet: dict[int, tuple[TableRow, list[ChangeHook], int, bool]] = {}
        self._closed = False
        self._lock = threading.Lock()
        # The features, in the order their hooks run: tags first (CreateTable's tag check, so a
        # refusal is cheap), fault injection last (its hooks come and go with the faults).
        self.tags = Tags()
        self.streams = Streams()
        self.ttl = TimeToLive(ttl_config)  # the sweeper; engine.ttl.sweep_now() runs one now
        self.replication = Replication()  # global tables
        self.replicas = self.replication  # the same object, by the name tests reach for
        # Secondary indexes; after replication, whose replicas get their indexes from it.
        self.indexes = Indexes(index_config)
        self.faults = FaultInjector(enforce_throughput=enforce_throughput)  # off until added
        self.features: tuple[Feature, ...] = (
            self.tags,
            self.streams,
            self.ttl,
            self.replication,
            self.indexes,
            self.faults,
        )
        for feature in self.features:
            feature.install(self)
        for feature in self.features:  # background work only once every hook is in place
            feature.start()

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
        if request is None and not wire:
            request = {}
        elif type(request) is not dict and not isinstance(request, Mapping):
            raise not_an_object(operation, request)
        return self.run(fn, operation, request, region or self.default_region, wire)

    def run(
        self, fn: Operation, operation: str, request: Mapping[str, Any], region: str, wire: bool
    ) -> dict[str, Any]:
        """:meth:`execute` for an in-process client that looked ``operation`` up itself (``fn``,
        from ``operations.DYNAMODB`` or ``STREAMS``) and holds a mapping: the same call,
        less the lookup and the request's type checks."""
        ctx = Context(self, request, region, wire, operation)
        if self.interceptors:
            for intercept in self.interceptors:
                intercept(ctx)
            finish = ctx.finish_hooks
            if finish:
                return _finished(fn, ctx, finish)
        return fn(ctx)

    # hooks (context.py) -------------------------------------------------------------------

    def add_change_hook(
        self,
        hook: ChangeHook,
        watches: Callable[[TableRow], bool] | None = None,
        *,
        refuses: Callable[[TableRow], bool] | None = None,
    ) -> None:
        """Install ``hook``; it acts only on writes to tables for which ``watches`` holds
        (``None``: on every table's writes, so none takes the single-statement fast path).

        ``refuses``: the tables whose writes ``hook`` may refuse by raising a DynamoDBError
        (e.g. the item collection size limit); writes to them run under a savepoint, so the
        refusal undoes what the write had done (see :meth:`refusing`).
        """
        with self._hooks_lock:
            if hook in self.change_hooks:
                return
            if watches is not None:
                self.change_watches[hook] = watches
            if refuses is not None:
                self.change_refusals = {**self.change_refusals, hook: refuses}
            self.change_hooks = [*self.change_hooks, hook]

    def remove_change_hook(self, hook: ChangeHook) -> None:
        with self._hooks_lock:
            self.change_hooks = [h for h in self.change_hooks if h != hook]
            self.change_watches.pop(hook, None)
            self.change_refusals = {h: r for h, r in self.change_refusals.items() if h != hook}

    def refusing(self, *rows: TableRow) -> bool:
        """Whether a change hook may refuse a write to any of ``rows``' tables after the write
        was made: such writes run under a savepoint (``Storage.write(savepoint=True)``)."""
        refusals = self.change_refusals
        return bool(refusals) and any(r(row) for row in rows for r in refusals.values())

    def add_table_hook(self, hook: TableHook) -> None:
        """Install ``hook`` into CreateTable, UpdateTable and DeleteTable's transaction."""
        with self._hooks_lock:
            if hook not in self.table_hooks:
                self.table_hooks = [*self.table_hooks, hook]

    def add_interceptor(self, hook: Interceptor, *, first: bool = False) -> None:
        """Install ``hook`` before every operation (``first``: before those installed already)."""
        with self._hooks_lock:
            current = self.interceptors
            if hook not in current:
                self.interceptors = [hook, *current] if first else [*current, hook]

    def remove_interceptor(self, hook: Interceptor) -> None:
        with self._hooks_lock:
            self.interceptors = [h for h in self.interceptors if h != hook]

    def quiet(self, row: TableRow) -> bool:
        """Whether no change hook acts on writes to ``row``'s table (hooks installed without a
        ``watches`` predicate, e.g. by fault injection, act on every table)."""
        # Cached per catalog row (one object per table id and version, held by the entry, so
        # its id() names it) for the current hook list (installers replace the list; its
        # length guards against an append in place).
        hooks = self.change_hooks
        cached = self._quiet.get(id(row))
        if (
            cached is not None
            and cached[0] is row
            and cached[1] is hooks
            and cached[2] == len(hooks)
        ):
            return cached[3]
        watches = self.change_watches
        quiet = True
        for hook in hooks:
            watch = watches.get(hook)
            if watch is None or watch(row):
                quiet = False
                break
        if len(self._quiet) >= _QUIET_CACHE_MAX:
            self._quiet.clear()
        self._quiet[id(row)] = (row, hooks, len(hooks), quiet)
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
                for feature in reversed(self.features):
                    feature.close()
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
