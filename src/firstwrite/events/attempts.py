"""How many runs of a record failed: counted in the idempotency table, one slot per failed run.

A record's run that raised, or that was abandoned (its worker died or timed out, and a later
delivery took its claim over), takes the next free slot: slot ``n`` is the key claimed under the
scope ``firstwrite-attempt-<n>`` (one conditional PutItem, then its completion with the reason),
so two consumers failing the same record at once take two slots and the count stays exact. A
record that succeeds at once costs nothing here. The count survives redeliveries to any
consumer, any process, any invocation; SQS's ``ApproximateReceiveCount`` would also count the
deliveries that found the record in progress elsewhere, and other brokers have no such count.
"""

from __future__ import annotations

from firstwrite.idempotency import UNSET

from ._adriving import adrive
from ._driving import drive
from .guard import AnyEventGuard, async_guard, sync_guard
from .steps import ClaimKey, CompleteClaim, ReadRecord, Steps

__all__ = ["AttemptLedger", "attempt_scope"]


def attempt_scope(scope: str | None, n: int) -> str:
    """The per-call scope of attempt slot ``n`` of a record claimed in ``scope``."""
    slot = f"firstwrite-attempt-{n}"
    return f"{scope}#{slot}" if scope else slot


class AttemptLedger:
    """Failed runs of each key, up to ``limit`` (the count never needs to go past it)."""

    __slots__ = ("guard", "limit", "scope")

    def __init__(self, guard: AnyEventGuard, limit: int, scope: str | None = None) -> None:
        self.guard = guard
        self.limit = limit
        self.scope = scope

    def note(self, key: str, reason: str) -> int:
        """Record one failed run of ``key`` and return how many there have been (at most
        ``limit``: ``limit`` means "at least that many"). A synchronous guard only (an asyncio
        consumer drives :meth:`note_steps` itself)."""
        return drive(self.note_steps(key, reason), sync_guard(self.guard), _no_handler)

    def note_steps(self, key: str, reason: str) -> Steps[int]:
        """:meth:`note` as effects (see :mod:`.steps`), for any driver."""
        from firstwrite.idempotency import Claim, InProgressError

        for n in range(1, self.limit + 1):
            try:
                outcome = yield ClaimKey(key, UNSET, attempt_scope(self.scope, n), wait=0)
            except InProgressError:  # another consumer is taking this slot right now
                continue
            if isinstance(outcome, Claim):
                yield CompleteClaim(outcome, {"reason": reason[:1000]})
                return n
        return self.limit

    def count(self, key: str) -> int:
        """How many failed runs of ``key`` are recorded (consistent reads; for tools and
        tests). A synchronous guard; with an asyncio one, await :meth:`acount`."""
        return drive(self.count_steps(key), sync_guard(self.guard), _no_handler)

    async def acount(self, key: str) -> int:
        """:meth:`count` with an asyncio guard."""
        return await adrive(self.count_steps(key), async_guard(self.guard), _no_async_handler)

    def count_steps(self, key: str) -> Steps[int]:
        """:meth:`count` as effects (see :mod:`.steps`), for any driver."""
        n = 0
        while n < self.limit and (yield ReadRecord(key, attempt_scope(self.scope, n + 1))):
            n += 1
        return n


def _no_handler(record: object) -> object:
    raise AssertionError("the attempt ledger runs no handler")


async def _no_async_handler(record: object) -> object:
    raise AssertionError("the attempt ledger runs no handler")
