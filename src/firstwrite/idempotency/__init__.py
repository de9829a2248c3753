"""Exactly-once request deduplication on DynamoDB conditional writes.

See ``docs/guarantees.md`` (what is exactly-once), ``docs/patterns.md`` (the three ways to use
it), ``docs/idempotency-record.md`` (the record and its state machine). Public modules:

* :mod:`.guard`, :mod:`.aio`: the guards; :mod:`.protocols`: what code built on them relies on.
* :mod:`.steps`: a guard's calls as values and their drivers, for decisions written once as
  generators (the middleware's and the consumers').
* :mod:`.decorators`, :mod:`.config`, :mod:`.errors`, :mod:`.metrics`, :mod:`.audit`,
  :mod:`.router`, :mod:`.outcomes`, :mod:`.keys`, :mod:`.record`, :mod:`.requests` (every
  request the layer makes), :mod:`.record_view`, :mod:`.local`, :mod:`.result_store`,
  :mod:`.result_cipher`, :mod:`.spooled_results`, :mod:`.clock_skew`, :mod:`.recovery`.
* Vocabulary shared with the state machine: :mod:`.effects`, :mod:`.verdicts`,
  :mod:`.client_errors`, :mod:`.serialization`, :mod:`.typed_json`.

**The state machine is** :class:`firstwrite.idempotency._machine.machine.StateMachine`, in the
private :mod:`._machine` package (imported only by the guards and :mod:`.local`): every
decision, no I/O. A guard call (a step of :mod:`.steps`) runs one transition of it, whose
effects are DynamoDB calls (:mod:`.effects`).
"""

from __future__ import annotations

from .aio import AsyncIdempotency
from .audit import DynamoAuditStore, MemoryAuditStore, TtlAudit
from .clients import dynamodb_client, sdk_settings
from .clock_skew import ClockSkewPolicy
from .config import IdempotencyConfig, InFlight, RetryAfter, RetryPolicy
from .decorators import idempotent, idempotent_handler
from .errors import (
    BusinessConditionFailedError,
    ClockSkewError,
    CompletionNotRecordedError,
    ConfigurationError,
    DeadlineExceededError,
    IdempotencyError,
    InProgressError,
    ItemCollectionSizeLimitError,
    LateRetryError,
    LostClaimError,
    MissingKeyError,
    PayloadMismatchError,
    RecoveryFailedError,
    RecoveryRequiredError,
    ReplayedFailureError,
    ResultTooLargeError,
    SerializationError,
    TableNotFoundError,
    TooManyTransactItemsError,
    TransactionCancelledError,
    TransactionConflictError,
    TransactionValidationError,
)
from .guard import Idempotency
from .key_migration import KeyMigration, KeyScheme
from .keys import canonical_json, fingerprint
from .layout import RecordLayout
from .metrics import (
    CallCounter,
    HookMetrics,
    MemoryMetrics,
    Metrics,
    MultiMetrics,
    NullMetrics,
    OpenTelemetryMetrics,
    PrometheusMetrics,
)
from .outcomes import UNSET, Claim, Outcome, Replay
from .protocols import AsyncGuard, Guard
from .record import Record, Status
from .recovery import (
    FailedFinally,
    Interrupted,
    NotDone,
    Reconciled,
    RecoveryPoint,
    arecovery_point,
    recovery_point,
)
from .router import HomeRegionRouter, RoutedIdempotency
from .spooled_results import SpooledResult

__all__ = [
    "UNSET",
    "AsyncGuard",
    "AsyncIdempotency",
    "BusinessConditionFailedError",
    "CallCounter",
    "Claim",
    "ClockSkewError",
    "ClockSkewPolicy",
    "CompletionNotRecordedError",
    "ConfigurationError",
    "DeadlineExceededError",
    "DynamoAuditStore",
    "FailedFinally",
    "Guard",
    "HomeRegionRouter",
    "HookMetrics",
    "Idempotency",
    "IdempotencyConfig",
    "IdempotencyError",
    "InFlight",
    "InProgressError",
    "Interrupted",
    "ItemCollectionSizeLimitError",
    "KeyMigration",
    "KeyScheme",
    "LateRetryError",
    "LostClaimError",
    "MemoryAuditStore",
    "MemoryMetrics",
    "Metrics",
    "MissingKeyError",
    "MultiMetrics",
    "NotDone",
    "NullMetrics",
    "OpenTelemetryMetrics",
    "Outcome",
    "PayloadMismatchError",
    "PrometheusMetrics",
    "Reconciled",
    "Record",
    "RecordLayout",
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
    "SpooledResult",
    "Status",
    "TableNotFoundError",
    "TooManyTransactItemsError",
    "TransactionCancelledError",
    "TransactionConflictError",
    "TransactionValidationError",
    "TtlAudit",
    "arecovery_point",
    "canonical_json",
    "dynamodb_client",
    "fingerprint",
    "idempotent",
    "idempotent_handler",
    "recovery_point",
    "sdk_settings",
]
