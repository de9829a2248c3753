"""The engine's front door: ``Engine.execute(operation, request) -> response``.

One request shape everywhere: the DynamoDB JSON request as a dict in, the response dict out, or a
:class:`~firstwrite.engine.errors.DynamoDBError` raised. The HTTP server, the boto3 binding and
the direct client are thin adapters over :meth:`Engine.execute`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from . import operations
from .clock import Clock
from .consumed import hide_unasked
from .context import (
    DEFAULT_ACCOUNT,
    DEFAULT_REGION,
    Context,
    Durability,
    Feature,
    FinishHook,
    Hooks,
    Operation,
    Service,
)
from .errors import DynamoDBError
from .features.backups import Backups
from .features.faults.injector import FaultInjector
from .features.indexes.maintenance import IndexConfig, Indexes
from .features.insights import ContributorInsights
from .features.policies import ResourcePolicies
from .features.regions import Replication
from .features.streams import Streams
from .features.tags import Tags
from .features.ttl import TimeToLive, TTLConfig
from .operations.policies import check_access
from .operations.write_route import RouteHints
from .storage import Storage

__all__ = ["Durability", "Engine", "Service", "not_an_object", "operation_table"]


def operation_table(service: Service = "dynamodb") -> Mapping[str, Operation]:
    """DynamoDB's operation names, each to the function that serves it, for ``service``
    (``dynamodb``, or ``streams`` for the Streams API): what in-process clients look up once."""
    return operations.STREAMS if service == "streams" else operations.DYNAMODB


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


# The ``meta`` key under which an engine keeps its clock's setting (offset, frozen instant).
CLOCK_SETTING = "clock"


class Engine:
    """A local DynamoDB on one SQLite file (or in memory when ``path`` is ``None`` or
    ``":memory:"``, as SQLite names it).

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
        if path is not None and os.fspath(path) == ":memory:":
            path = None  # SQLite's name for a database in memory, not a file to create
        self.path = None if path is None else os.path.abspath(os.fspath(path))
        self.durability: Durability = durability
        self.clock = clock or Clock()
        self.account_id = account_id
        self.default_region = region
        self.storage = Storage(self.path, durability=durability)
        self._keep_clock()
        # The hooks features register on (context.Hooks), and the write path's cost hints.
        self.hooks = Hooks()
        self.route_hints = RouteHints()
        self._closed = False
        self._lock = threading.Lock()
        # The features, in the order their hooks run: tags first (CreateTable's tag check, so a
        # refusal is cheap), fault injection last (its hooks come and go with the faults).
        self.tags = Tags()
        self.policies = ResourcePolicies()  # CreateTable's ResourcePolicy, checked as early
        self.streams = Streams()
        self.ttl = TimeToLive(ttl_config)  # the sweeper; engine.ttl.sweep_now() runs one now
        self.replication = Replication()  # global tables
        # Secondary indexes; after replication, whose replicas get their indexes from it.
        self.indexes = Indexes(index_config)
        # Point-in-time recovery's history and the SYSTEM backup of a deleted table; after the
        # indexes, whose DeleteTable refusal comes first.
        self.backups = Backups()
        self.faults = FaultInjector(enforce_throughput=enforce_throughput)  # off until added
        # Contributor insights' top keys: an interceptor only while a table has them enabled.
        self.insights = ContributorInsights()
        self.features: tuple[Feature, ...] = (
            self.tags,
            self.policies,
            self.streams,
            self.ttl,
            self.replication,
            self.indexes,
            self.backups,
            self.faults,
            self.insights,
        )
        for feature in self.features:
            feature.install(self)
        for feature in self.features:  # background work only once every hook is in place
            feature.start()

    def _keep_clock(self) -> None:
        """Restore the clock's setting kept in the database, and keep every change of it there:
        what a test staged on a moved or frozen clock still holds after a restart."""
        kept = self.storage.read(lambda r: r.setting(CLOCK_SETTING))
        if kept is not None:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                setting = json.loads(kept)
                frozen = setting["frozen_at"]
                self.clock.restore(
                    float(setting["offset"]), None if frozen is None else float(frozen)
                )

        def keep(offset: float, frozen_at: float | None) -> None:
            text = json.dumps({"offset": offset, "frozen_at": frozen_at})
            self.storage.write(lambda w: w.save_setting(CLOCK_SETTING, text))

        self.clock.keep(keep)

    def execute(
        self,
        operation: str,
        request: Mapping[str, Any] | None = None,
        *,
        region: str | None = None,
        wire: bool = False,
        service: Service = "dynamodb",
        caller: str | None = None,
    ) -> dict[str, Any]:
        """Run one operation. Raises :class:`DynamoDBError` exactly where DynamoDB would fail.

        ``caller`` is the access key of a verified signed request: the resource policies of
        what the call names then apply (``operations/policies.py``)."""
        fn = operation_table(service).get(operation)
        if fn is None:
            raise DynamoDBError("UnknownOperationException", "")
        if request is None and not wire:
            request = {}
        elif type(request) is not dict and not isinstance(request, Mapping):
            raise not_an_object(operation, request)
        if caller is not None:
            ctx = Context(self, request, region or self.default_region, wire, operation)
            ctx.caller = caller
            check_access(ctx)
        return self.run(fn, operation, request, region or self.default_region, wire, caller)

    def run(
        self,
        fn: Operation,
        operation: str,
        request: Mapping[str, Any],
        region: str,
        wire: bool,
        caller: str | None = None,
    ) -> dict[str, Any]:
        """:meth:`execute` for an in-process client that looked ``operation`` up itself (``fn``,
        from ``operations.DYNAMODB`` or ``STREAMS``) and holds a mapping: the same call,
        less the lookup and the request's type checks."""
        ctx = Context(self, request, region, wire, operation)
        ctx.caller = caller
        interceptors = self.hooks.interceptors
        if interceptors:
            try:
                for intercept in interceptors:
                    intercept(ctx)
            except DynamoDBError as error:  # refused by an interceptor: a failed call too
                for hook in ctx.finish_hooks or ():
                    hook(ctx, None, error)
                raise
            finish = ctx.finish_hooks
            if finish:
                return _finished(fn, ctx, finish)
        response = fn(ctx)
        finish = ctx.finish_hooks  # registered by the operation's own table hooks
        if finish:
            for hook in finish:
                hook(ctx, response, None)
            hide_unasked(ctx.extras, response)
        return response

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
    hide_unasked(ctx.extras, response)
    return response
