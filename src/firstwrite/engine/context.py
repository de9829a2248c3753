"""One call (Context), the host it runs on (Host) and the hooks registry features plug into.

An operation is a function ``(ctx: Context) -> dict``. Operations and features type against
:class:`Host`, never against the concrete :class:`~firstwrite.engine.api.Engine`: the front door
composes them, they do not know it. A feature (see :class:`Feature`) never patches an
operation: it registers hooks on ``host.hooks`` (:class:`Hooks`), called at fixed points:

* an :data:`Interceptor` runs before the operation (fault injection, the lazy replication
  apply); it may raise a DynamoDBError, register a :data:`FinishHook` with
  :meth:`Context.on_finish`, or set the call's :data:`ReaderHook`;
* a :data:`ChangeHook` runs for every changed item inside the write's own transaction (streams,
  the TTL index, replication, the stale-read history);
* a :data:`TableHook` runs inside the transaction of CreateTable, UpdateTable, DeleteTable and
  UpdateTimeToLive (``create``, ``update``, ``delete``, ``ttl``; ``replica``: a new replica's
  table); it returns the row unchanged for an action it does not handle;
* a :data:`SweepHook` runs after each background sweep (stream records past their retention).

Hook lists are replaced, never changed in place (copy-on-write under a lock), so a call
iterates the list it read.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from .clock import Clock
    from .errors import DynamoDBError
    from .operations.write_route import RouteHints
    from .storage import Reader, Storage, TableRow, Writer
    from .values import Item

__all__ = [
    "DEFAULT_ACCOUNT",
    "DEFAULT_REGION",
    "ChangeHook",
    "Context",
    "Durability",
    "Feature",
    "FinishHook",
    "Hooks",
    "Host",
    "Interceptor",
    "Operation",
    "ReaderHook",
    "Service",
    "SweepHook",
    "TableHook",
]

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "000000000000"

# Runs before every operation; may raise a DynamoDBError instead of the call.
Interceptor = Callable[["Context"], None]
# (ctx, writer, table, old item, new item): one item changed; None means absent.
ChangeHook = Callable[["Context", "Writer", "TableRow", "Item | None", "Item | None"], None]
# (ctx, writer, table, "create" | "update" | "delete", request params) -> the table row to use.
TableHook = Callable[["Context", "Writer", "TableRow", str, Mapping[str, Any]], "TableRow"]
# (ctx, response or None, error or None): registered by an interceptor with Context.on_finish.
FinishHook = Callable[["Context", "dict[str, Any] | None", "DynamoDBError | None"], None]
# The reader an eventually consistent read of this call uses instead of the current one.
ReaderHook = Callable[["Reader"], "Reader"]
Operation = Callable[["Context"], dict[str, Any]]
Durability = Literal["full", "normal"]
Service = Literal["dynamodb", "streams"]
# (now): runs after each background sweep, outside any transaction.
SweepHook = Callable[[float], None]
# The table-row cache of Hooks.quiet() is dropped whole past this many rows.
_QUIET_CACHE_MAX = 4096


@dataclass(slots=True)
class Context:
    """What an operation sees of one call: its parameters and the engine serving it."""

    engine: Host
    params: Mapping[str, Any]
    region: str = DEFAULT_REGION
    wire: bool = False  # B values are base64 text (JSON callers) rather than bytes
    operation: str = ""
    # Per-call state of the features (e.g. regions marks a replicated write), by their own keys.
    extras: dict[str, Any] = field(default_factory=dict)
    # Who makes the change when it is not a caller: a stream record's userIdentity (TTL deletes).
    principal: str | None = None
    # The access key of a caller the HTTP server verified (--require-auth): resource policies
    # apply to it (operations/policies.py). None for in-process and unsigned calls.
    caller: str | None = None
    # Set by an interceptor: eventually consistent reads go through it (faults: stale reads).
    reader_hook: ReaderHook | None = None
    finish_hooks: list[FinishHook] | None = None

    @property
    def storage(self) -> Storage:
        return self.engine.storage

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    def now(self) -> float:
        return self.engine.clock.now()

    def reader(self, reader: Reader, *, consistent: bool) -> Reader:
        """The reader a read of this call uses: ``reader`` itself for a strongly consistent
        read or when no interceptor set a :data:`ReaderHook`, else what the hook makes of it."""
        hook = self.reader_hook
        return reader if hook is None or consistent else hook(reader)

    def on_finish(self, hook: FinishHook) -> None:
        """Call ``hook(ctx, response, error)`` once this call has returned or failed.

        For interceptors that act after the operation (capacity accounting, crash points):
        the response is the operation's dict, before any adapter encodes it.
        """
        if self.finish_hooks is None:
            self.finish_hooks = [hook]
        else:
            self.finish_hooks.append(hook)


class Feature(ABC):
    """A feature riding on the engine's hooks: tags, streams, TTL, regions, faults.

    The engine lists its features where it is built (:class:`~firstwrite.engine.api.Engine`)
    and drives them in three steps: :meth:`install` every feature (register hooks), then
    :meth:`start` every feature (background work), and at
    :meth:`Engine.close <firstwrite.engine.api.Engine.close>` :meth:`close` them in reverse
    order. Starting only once all are installed means no background write
    (a TTL delete, an applied replica write) can run before every change hook is in place.
    """

    @abstractmethod
    def install(self, engine: Host) -> None:
        """Register this feature's hooks on ``engine.hooks`` (called once, before any
        :meth:`start`)."""

    def start(self) -> None:  # noqa: B027  (most features have no background work)
        """Begin background work, if the feature has any."""

    def close(self) -> None:  # noqa: B027
        """Stop background work; the engine closes its storage afterwards."""


class Hooks:
    """The hook lists of one engine, and the questions the write path asks of them."""

    def __init__(self) -> None:
        self.change_hooks: list[ChangeHook] = []
        # Per change hook (when it says): whether it acts on a table's writes at all. A write to
        # a table no hook acts on may take the single-statement fast path (see quiet()).
        self.change_watches: dict[ChangeHook, Callable[[TableRow], bool]] = {}
        # Per change hook (when it says): whether it may refuse a table's writes with a
        # DynamoDBError after they were made (see refusing()).
        self.change_refusals: dict[ChangeHook, Callable[[TableRow], bool]] = {}
        self.table_hooks: list[TableHook] = []
        self.interceptors: list[Interceptor] = []
        self.sweep_hooks: list[SweepHook] = []
        self._lock = threading.Lock()
        # quiet()'s answers per catalog row (by id()), with the hook list they were made for.
        self._quiet: dict[int, tuple[TableRow, list[ChangeHook], int, bool]] = {}

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
        with self._lock:
            if hook in self.change_hooks:
                return
            if watches is not None:
                self.change_watches[hook] = watches
            if refuses is not None:
                self.change_refusals = {**self.change_refusals, hook: refuses}
            self.change_hooks = [*self.change_hooks, hook]

    def remove_change_hook(self, hook: ChangeHook) -> None:
        with self._lock:
            self.change_hooks = [h for h in self.change_hooks if h != hook]
            self.change_watches.pop(hook, None)
            self.change_refusals = {h: r for h, r in self.change_refusals.items() if h != hook}

    def add_table_hook(self, hook: TableHook) -> None:
        """Install ``hook`` into the table operations' transaction (see the module docstring)."""
        with self._lock:
            if hook not in self.table_hooks:
                self.table_hooks = [*self.table_hooks, hook]

    def add_interceptor(self, hook: Interceptor, *, first: bool = False) -> None:
        """Install ``hook`` before every operation (``first``: before those installed already)."""
        with self._lock:
            current = self.interceptors
            if hook not in current:
                self.interceptors = [hook, *current] if first else [*current, hook]

    def remove_interceptor(self, hook: Interceptor) -> None:
        with self._lock:
            self.interceptors = [h for h in self.interceptors if h != hook]

    def add_sweep_hook(self, hook: SweepHook) -> None:
        """Install ``hook`` after each background sweep."""
        with self._lock:
            if hook not in self.sweep_hooks:
                self.sweep_hooks = [*self.sweep_hooks, hook]

    def refusing(self, *rows: TableRow) -> bool:
        """Whether a change hook may refuse a write to any of ``rows``' tables after the write
        was made: such writes run under a savepoint (``Storage.write(savepoint=True)``)."""
        refusals = self.change_refusals
        return bool(refusals) and any(r(row) for row in rows for r in refusals.values())

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

    def swept(self, now: float) -> None:
        """Run every sweep hook (the background sweeper calls this after each sweep)."""
        for hook in self.sweep_hooks:
            hook(now)


class Host(Protocol):
    """What features and operations use of the engine that serves them."""

    @property
    def storage(self) -> Storage: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def hooks(self) -> Hooks: ...

    @property
    def route_hints(self) -> RouteHints: ...

    @property
    def account_id(self) -> str: ...

    @property
    def default_region(self) -> str: ...

    @property
    def durability(self) -> Durability: ...

    def execute(
        self,
        operation: str,
        request: Mapping[str, Any] | None = None,
        *,
        region: str | None = None,
        wire: bool = False,
        service: Service = "dynamodb",
        caller: str | None = None,
    ) -> dict[str, Any]: ...
