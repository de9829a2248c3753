"""firstwrite: exactly-once request deduplication on DynamoDB conditional writes.

The public API is the idempotency layer (:mod:`firstwrite.idempotency`), re-exported here.
Names load lazily, so ``import firstwrite.engine`` does not pay for botocore.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .idempotency import (
        UNSET,
        AsyncIdempotency,
        BusinessConditionFailedError,
        CallCounter,
        Claim,
        ClockSkewError,
        ClockSkewPolicy,
        CompletionNotRecordedError,
        ConfigurationError,
        DeadlineExceededError,
        FailedFinally,
        HomeRegionRouter,
        Idempotency,
        IdempotencyConfig,
        IdempotencyError,
        InFlight,
        InProgressError,
        Interrupted,
        ItemCollectionSizeLimitError,
        LateRetryError,
        LostClaimError,
        MissingKeyError,
        NotDone,
        PayloadMismatchError,
        Reconciled,
        Record,
        RecoveryFailedError,
        RecoveryPoint,
        RecoveryRequiredError,
        Replay,
        ReplayedFailureError,
        ResultTooLargeError,
        RetryAfter,
        RetryPolicy,
        RoutedIdempotency,
        SerializationError,
        Status,
        TableNotFoundError,
        TooManyTransactItemsError,
        TransactionCancelledError,
        TransactionConflictError,
        TransactionValidationError,
        TtlAudit,
        arecovery_point,
        idempotent,
        idempotent_handler,
        recovery_point,
    )

__all__ = [
    "UNSET",
    "AsyncIdempotency",
    "BusinessConditionFailedError",
    "CallCounter",
    "Claim",
    "ClockSkewError",
    "ClockSkewPolicy",
    "CompletionNotRecordedError",
    "ConfigurationError",
    "DeadlineExceededError",
    "FailedFinally",
    "HomeRegionRouter",
    "Idempotency",
    "IdempotencyConfig",
    "IdempotencyError",
    "InFlight",
    "InProgressError",
    "Interrupted",
    "ItemCollectionSizeLimitError",
    "LateRetryError",
    "LostClaimError",
    "MissingKeyError",
    "NotDone",
    "PayloadMismatchError",
    "Reconciled",
    "Record",
    "RecoveryFailedError",
    "RecoveryPoint",
    "RecoveryRequiredError",
    "Replay",
    "ReplayedFailureError",
    "ResultTooLargeError",
    "RetryAfter",
    "RetryPolicy",
    "RoutedIdempotency",
    "SerializationError",
    "Status",
    "TableNotFoundError",
    "TooManyTransactItemsError",
    "TransactionCancelledError",
    "TransactionConflictError",
    "TransactionValidationError",
    "TtlAudit",
    "arecovery_point",
    "idempotent",
    "idempotent_handler",
    "recovery_point",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".idempotency", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
