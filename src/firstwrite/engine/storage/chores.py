"""Chores: background work that writers carry in their own write transactions.

A background task with a lot of small writes to make (the TTL sweep) would otherwise take the
lead from writers for each of its slices, and every writer arriving meanwhile waits for the
slice *and* for the hand-over between two threads (two wake-ups and the GIL: about as long again
as the slice; docs/engine.md, "TTL sweep"). Instead the task posts a :class:`Chore` on the
storage (:meth:`~.database.Storage.post_chore`) and the writer leading each batch runs a
small, bounded piece of it inside its own transaction, after its callers' functions, under a
savepoint (:func:`carry`): no thread switch, no wait, a small fixed budget per batch.

* The piece is committed with the batch, so durability ``full`` covers it with the writer's own
  fsync. :meth:`Chore.committed` is called after the COMMIT, still holding the lead (so pieces
  are reported in commit order); a batch that rolls back never reports its piece, and the work
  is still there to be done by a later batch.
* A chore that raises rolls back only its own piece (the savepoint); the callers' writes commit
  as if it had not run. The failure is logged, the chore withdrawn and told
  (:meth:`Chore.failed`), so a broken chore costs each writer nothing more.
* With no writer for a while, the task runs pieces itself (:meth:`~.database.Storage.run_chore`,
  a background write), larger ones, as :meth:`Chore.run`'s ``idle`` says.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Protocol

from .access import Writer
from .base import Catalog

__all__ = ["Chore", "carry", "report"]

log = logging.getLogger(__name__)


class Chore(Protocol):
    """Work posted on a storage for its writers to carry, a bounded piece per batch."""

    def run(self, w: Writer, idle: bool) -> Any:
        """Do a piece of the work in ``w``'s transaction: at most a writer's budget, or a
        larger one when ``idle`` (the task's own background write). May raise: only the
        piece is rolled back."""

    def committed(self, piece: Any, seq: int) -> None:
        """``piece`` (:meth:`run`'s result) is committed, in commit ``seq``."""

    def failed(self, error: Exception) -> None:
        """:meth:`run` raised ``error`` (the chore is withdrawn)."""


def carry(
    conn: sqlite3.Connection, w: Writer, catalog: Catalog, chore: Chore, idle: bool
) -> tuple[Any] | None:
    """Run a piece of ``chore`` inside the open transaction, under a savepoint: ``(piece,)``,
    or ``None`` if it raised (its piece rolled back, the failure logged and reported)."""
    conn.execute("SAVEPOINT chore")
    try:
        piece = chore.run(w, idle)
    except Exception as exc:
        conn.execute("ROLLBACK TO chore")
        conn.execute("RELEASE chore")
        catalog.clear()  # rows it read may be ones it rolled back
        log.exception("a chore failed; its piece was rolled back and the chore withdrawn")
        chore.failed(exc)
        return None
    conn.execute("RELEASE chore")
    return (piece,)


def report(chore: Chore, piece: Any, seq: int) -> None:
    """:meth:`Chore.committed`, after the COMMIT: a failure there is logged, never the
    batch's (its callers' writes are committed)."""
    try:
        chore.committed(piece, seq)
    except Exception:
        log.exception("a chore failed to take its committed piece")
