"""What the consumers' recovery tests share: a downstream provider that keeps charges by
reference, the hook that asks it, and a record's earlier run that marked and died."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from firstwrite.events import Consumer
from firstwrite.idempotency import (
    AsyncIdempotency,
    Claim,
    Idempotency,
    Interrupted,
    NotDone,
    Reconciled,
)

PROVIDER: dict[str, dict[str, str]] = {}  # the downstream system's charges, by reference


def ledger_hook(interrupted: Interrupted) -> Reconciled | NotDone:
    """Asks the provider by the last mark's reference."""
    found = PROVIDER.get(interrupted.last.reference or "")
    return Reconciled(found) if found is not None else NotDone()


async def aledger_hook(interrupted: Interrupted) -> Reconciled | NotDone:
    """:func:`ledger_hook` as a coroutine function (for an asyncio guard)."""
    return ledger_hook(interrupted)


def _claim_of(consumer: Consumer[Any], record: Any) -> tuple[str, object]:
    key = consumer.key(record)
    return key, (consumer.payload(record) if consumer.payload is not None else None)


def _after_mark(guard: Any, engine: Any, key: str, charged: bool) -> str:
    reference = f"charge-{key}"
    if charged:
        PROVIDER[reference] = {"charge": reference}
    engine.clock.advance(guard.config.lease + 5)
    return reference


def died_after_marking(
    guard: Idempotency, engine: Any, consumer: Consumer[Any], record: Any, charged: bool
) -> str:
    """The record's earlier run: claimed with the consumer's own key and payload, marked
    before the charge (made when ``charged``), then dead; its lease runs out on the engine's
    clock (the guard's). Returns the mark's reference."""
    key, payload = _claim_of(consumer, record)
    claim = guard.claim(key, payload)
    assert isinstance(claim, Claim), "a fresh key"
    guard.mark(claim, "charge", f"charge-{key}")
    return _after_mark(guard, engine, key, charged)


async def adied_after_marking(
    guard: AsyncIdempotency, engine: Any, consumer: Consumer[Any], record: Any, charged: bool
) -> str:
    """:func:`died_after_marking` through an asyncio guard."""
    key, payload = _claim_of(consumer, record)
    claim = await guard.claim(key, payload)
    assert isinstance(claim, Claim), "a fresh key"
    await guard.mark(claim, "charge", f"charge-{key}")
    return _after_mark(guard, engine, key, charged)


def counted(guard: Any, outcome: str) -> float:
    """``firstwrite_recovery_takeovers_total{outcome}`` in the guard's MemoryMetrics."""
    total: Callable[..., float] = guard.metrics.total
    return total("firstwrite_recovery_takeovers_total", outcome=outcome)
