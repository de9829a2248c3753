"""One call as operations and features see it, and the hooks through which features plug in.

An operation is a function ``(ctx: Context) -> dict``. A feature (tags, streams, TTL, regions,
faults; see :class:`Feature`) never patches an operation: it registers hooks on the engine,
which the engine and the operations call at fixed points of every call:

* an :data:`Interceptor` runs before the operation (fault injection, the lazy replication
  apply); it may raise a DynamoDBError, register a :data:`FinishHook` with
  :meth:`Context.on_finish`, or set the call's :data:`ReaderHook`;
* a :data:`ChangeHook` runs for every changed item inside the write's own transaction (streams,
  the TTL index, replication, the stale-read history);
* a :data:`TableHook` runs inside CreateTable, UpdateTable and DeleteTable's transaction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import Engine
    from .clock import Clock
    from .errors import DynamoDBError
    from .storage import Reader, Storage, TableRow, Writer
    from .values import Item

__all__ = [
    "DEFAULT_ACCOUNT",
    "DEFAULT_REGION",
    "ChangeHook",
    "Context",
    "Feature",
    "FinishHook",
    "Interceptor",
    "Operation",
    "ReaderHook",
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


@dataclass(slots=True)
class Context:
    """What an operation sees of one call: its parameters and the engine serving it."""

    engine: Engine
    params: Mapping[str, Any]
    region: str = DEFAULT_REGION
    wire: bool = False  # B values are base64 text (JSON callers) rather than bytes
    operation: str = ""
    # Per-call state of the features (e.g. regions marks a replicated write), by their own keys.
    extras: dict[str, Any] = field(default_factory=dict)
    # Who makes the change when it is not a caller: a stream record's userIdentity (TTL deletes).
    principal: str | None = None
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
    :meth:`start` every feature (background work), and at :meth:`Engine.close` :meth:`close`
    them in reverse order. Starting only once all are installed means no background write
    (a TTL delete, an applied replica write) can run before every change hook is in place.
    """

    @abstractmethod
    def install(self, engine: Engine) -> None:
        """Register this feature's hooks on ``engine`` (called once, before any :meth:`start`)."""

    def start(self) -> None:  # noqa: B027  (most features have no background work)
        """Begin background work, if the feature has any."""

    def close(self) -> None:  # noqa: B027
        """Stop background work; the engine closes its storage afterwards."""
