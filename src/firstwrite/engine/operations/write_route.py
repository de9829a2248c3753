"""How a single-item write goes to storage: the route choice and the hints it keeps.

Every route gives the same answer; the choice changes only what a write costs:

* ``if_absent``: a PutItem whose condition is ``attribute_not_exists(<key attribute>)`` holds
  exactly when no item is stored under the key, so it is one insert-if-absent statement;
* ``insert_first``: ``attribute_not_exists(<key>) OR ...`` holds whenever no item is stored, so
  an insert that lands needs no read; one that finds an item leaves the rest of the condition
  to the general path (read, evaluate, write);
* ``autocommit``: with either, on a table no change hook acts on (``quiet``), the statement is
  its own transaction;
* ``check_first``: when the same condition failed the last write to the same table, one
  consistent read answers a condition that fails again without taking the write lock.

:class:`RouteHints` remembers, per table and condition text, whether the last such write failed;
it is bounded and only ever changes the cost of a call, never its answer.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["PutRoute", "RouteHints", "put_route"]


class RouteHints:
    """Per (table id, condition text): whether the last write with that condition failed it.

    Bounded: past :attr:`MAX` entries the hints are dropped whole. Thread-safe in the sense
    that matters: a lost or stale hint costs a read or a lock, never a wrong answer.
    """

    MAX = 4096
    __slots__ = ("_failed",)

    def __init__(self) -> None:
        self._failed: dict[tuple[int, str], bool] = {}

    def failed_last(self, table_id: int, condition: str) -> bool:
        return (table_id, condition) in self._failed

    def record(self, table_id: int, condition: str, *, failed: bool) -> None:
        failed_hints = self._failed
        if failed:
            if len(failed_hints) >= self.MAX:
                failed_hints.clear()
            failed_hints[(table_id, condition)] = True
        elif failed_hints:
            failed_hints.pop((table_id, condition), None)

    def __len__(self) -> int:
        return len(self._failed)


class PutRoute(NamedTuple):
    """The route of one PutItem (see the module docstring); a named tuple, made on every put."""

    if_absent: bool
    insert_first: bool
    autocommit: bool


def put_route(
    absent: str | None,
    absent_or: str | None,
    condition: str,
    keys: tuple[str, str | None],
    table_id: int,
    hints: RouteHints,
    quiet: bool,
) -> PutRoute:
    """The route of a PutItem whose condition is ``condition`` (``absent``: the attribute of an
    ``attribute_not_exists(x)`` condition; ``absent_or``: of ``attribute_not_exists(x) OR ...``)
    on a table with key attributes ``keys``, where ``quiet`` says no change hook acts."""
    if_absent = absent is not None and absent in keys
    insert_first = (
        not if_absent
        and absent_or is not None
        and absent_or in keys
        and not hints.failed_last(table_id, condition)
    )
    return PutRoute(if_absent, insert_first, quiet and (if_absent or insert_first))
