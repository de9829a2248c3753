"""What the consumers use of a guard: :class:`EventGuard` (``Idempotency`` is one).

The layer's :class:`~firstwrite.idempotency.Guard` plus what a consumer needs besides: ``renew``
(a long handler keeps its lease), ``get`` (reading a record back), ``config`` (the lease to
cap) and ``metrics`` (the sink the consumers count outcomes in).
"""

from __future__ import annotations

from typing import Any, Protocol

from firstwrite.idempotency import UNSET, Claim, IdempotencyConfig, Metrics, Outcome, Record, Replay

__all__ = ["EventGuard"]


class EventGuard(Protocol):
    """A synchronous guard, as :class:`firstwrite.idempotency.Idempotency` is."""

    @property
    def config(self) -> IdempotencyConfig: ...

    @property
    def metrics(self) -> Metrics: ...

    def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
    ) -> Outcome: ...

    def complete(self, claim: Claim, result: Any = None) -> Replay: ...

    def fail(
        self, claim: Claim, error: BaseException | str, *, retryable: bool, data: Any = None
    ) -> None: ...

    def renew(self, claim: Claim, lease: float | None = None) -> Claim: ...

    def get(self, key: str, *, scope: str | None = None) -> Record | None: ...
