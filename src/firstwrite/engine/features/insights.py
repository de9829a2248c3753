"""Contributor Insights' top keys, counted per table with insights enabled.

Per table with insights ``ENABLED``: the partition keys that consumed the most capacity and
those throttled most often.

While at least one table has insights enabled, an interceptor sees every item read and write
(the operations the throughput buckets charge): it asks the call for its ConsumedCapacity
(hidden again from an answer that did not ask for it) and shares each table's units out
equally among the partition keys the request names (as the throughput buckets share them), and
counts one throttle per key named by a call refused for throughput. A Scan names no key and
counts for none. With mode ``THROTTLED_KEYS`` only throttles are counted. Counts start when
insights are enabled (or the engine starts) and live in this engine object; disabling drops
them. With no table enabled the interceptor is removed, so the engine's fast path is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..consumed import want_capacity
from ..context import Context, Feature
from ..operations._request_keys import (
    READ_OPERATIONS,
    WRITE_OPERATIONS,
    partition_keys,
    tables_of,
)
from ..storage import TableRow, Writer

if TYPE_CHECKING:
    from ..context import Host
    from ..errors import DynamoDBError

__all__ = ["ContributorInsights", "KeyCount"]

_THROTTLES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)


@dataclass(frozen=True, slots=True)
class KeyCount:
    """One partition key's counts: ``key`` as ``S:abc`` / ``N:12`` / ``B:<base64>``."""

    key: str
    consumed_units: float
    throttled: int


@dataclass(slots=True)
class _Counts:
    mode: str
    units: dict[str, float]
    throttles: dict[str, int]


class ContributorInsights(Feature):
    """``engine.insights``: :meth:`top_keys` of the tables with insights enabled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: Host | None = None
        self._tables: dict[tuple[str, str], _Counts] = {}  # (region, table) -> counts
        self._installed = False

    def install(self, engine: Host) -> None:
        self._engine = engine
        engine.hooks.add_table_hook(self._on_table)

    def start(self) -> None:
        assert self._engine is not None
        rows = self._engine.storage.read(lambda r: r.tables())
        for row in rows:
            self._follow(row)

    def top_keys(self, table: str, *, region: str | None = None, limit: int = 10) -> list[KeyCount]:
        """The ``limit`` partition keys of ``table`` with the most consumed capacity units,
        then the most throttles (empty when insights are not enabled on it)."""
        assert self._engine is not None
        scope = (region or self._engine.default_region, table)
        with self._lock:
            counts = self._tables.get(scope)
            if counts is None:
                return []
            keys = set(counts.units) | set(counts.throttles)
            found = [
                KeyCount(k, counts.units.get(k, 0.0), counts.throttles.get(k, 0)) for k in keys
            ]
        found.sort(key=lambda c: (-c.consumed_units, -c.throttled, c.key))
        return found[:limit]

    # --- following the tables' state ---------------------------------------------------------

    def _on_table(
        self, ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
    ) -> TableRow:
        if action == "delete":
            self._drop((row.region, row.name))
        elif action == "insights":
            self._follow(row)
        return row

    def _follow(self, row: TableRow) -> None:
        state = (row.definition.get("_insights") or {}).get("")
        scope = (row.region, row.name)
        if state is None or state["Status"] != "ENABLED":
            self._drop(scope)
            return
        with self._lock:
            counts = self._tables.get(scope)
            if counts is None:
                self._tables[scope] = _Counts(state["Mode"], {}, {})
            else:
                counts.mode = state["Mode"]
        self._sync()

    def _drop(self, scope: tuple[str, str]) -> None:
        with self._lock:
            self._tables.pop(scope, None)
        self._sync()

    def _sync(self) -> None:
        """The interceptor is installed exactly while a table has insights enabled."""
        assert self._engine is not None
        with self._lock:
            wanted = bool(self._tables)
            if wanted == self._installed:
                return
            self._installed = wanted
        if wanted:
            # First: its finish hook must also hear of a call the throughput buckets refuse.
            self._engine.hooks.add_interceptor(self._intercept, first=True)
        else:
            self._engine.hooks.remove_interceptor(self._intercept)

    # --- counting ----------------------------------------------------------------------------

    def _intercept(self, ctx: Context) -> None:
        operation = ctx.operation
        if operation not in READ_OPERATIONS and operation not in WRITE_OPERATIONS:
            return
        followed: list[tuple[str, list[str]]] = []
        for name in dict.fromkeys(tables_of(operation, ctx.params)):
            with self._lock:
                if (ctx.region, name) not in self._tables:
                    continue
            row = ctx.storage.cached_table(ctx.region, name)
            if row is None:
                continue
            keys = partition_keys(operation, ctx.params, name, row.key_schema.hash_name)
            if keys:
                followed.append((name, keys))
        if not followed:
            return
        want_capacity(ctx)

        def count(c: Context, response: dict[str, Any] | None, error: DynamoDBError | None) -> None:
            units: dict[str, float] = {}
            if response is not None:
                consumed = response.get("ConsumedCapacity")
                for entry in consumed if isinstance(consumed, list) else [consumed]:
                    if isinstance(entry, Mapping):
                        units[entry.get("TableName", "")] = float(entry.get("CapacityUnits", 0))
            throttled = error is not None and error.code in _THROTTLES
            with self._lock:
                for name, keys in followed:
                    counts = self._tables.get((c.region, name))
                    if counts is None:
                        continue
                    for key in keys:
                        if throttled:
                            counts.throttles[key] = counts.throttles.get(key, 0) + 1
                        elif counts.mode != "THROTTLED_KEYS":
                            share = units.get(name, 0.0) / len(keys)
                            counts.units[key] = counts.units.get(key, 0.0) + share

        ctx.on_finish(count)
