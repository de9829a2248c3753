"""Exactly-once request deduplication on DynamoDB conditional writes.

See ``docs/guarantees.md`` for what is (and is not) exactly-once, ``docs/patterns.md`` for the
three ways to use it, ``docs/idempotency-record.md`` for the record and its state machine.

Public modules (what this package exports comes from them; import from here or from them):
* :mod:`.guard` (:class:`Idempotency`) and :mod:`.aio` (:class:`AsyncIdempotency`): the guards.
* :mod:`.protocols`: :class:`Guard` and :class:`AsyncGuard`, what code built on a guard may
  rely on (the HTTP middleware and the event consumers are typed against them).
* :mod:`.steps`: a guard's calls as values (``ClaimKey``, ``CompleteClaim``, ``FailClaim``...)
  and their drivers (``drive``, ``adrive``), for code that writes its decisions once as
  generators over a guard (the middleware's and the consumers' decisions are).
* :mod:`.decorators`: ``@idempotent`` and ``@idempotent_handler``.
* :mod:`.config`, :mod:`.errors`, :mod:`.metrics`, :mod:`.audit`, :mod:`.router`.
* :mod:`.outcomes` (:class:`Claim`, :class:`Replay`, ``UNSET``), :mod:`.keys` (how keys and
  fingerprints are made), :mod:`.record` and :mod:`.requests` (the record's wire shape and every
  request the layer makes, for tools that read the table), :mod:`.record_view` (a record decoded
  for display), :mod:`.local` (the no-configuration local database).
* The vocabulary the state machine shares with the modules above: :mod:`.effects` (the
  DynamoDB calls a transition yields, and the one loop that performs effects),
  :mod:`.verdicts`, :mod:`.client_errors`, :mod:`.serialization`, :mod:`.typed_json`.

Internals live in the private :mod:`._machine` package, imported only by the guards and
:mod:`.local`. **The state machine is
:class:`firstwrite.idempotency._machine.machine.StateMachine`** (``_machine/machine.py``): every
decision, no I/O; the guards only perform the effects it yields. Two levels of effects: a guard
call (a step of :mod:`.steps`) runs one transition of the machine, whose effects are DynamoDB
calls (:mod:`.effects`).
"""

from __future__ import annotations

from .aio import AsyncIdempotency
from .audit import DynamoAuditStore, MemoryAuditStore, TtlAudit
from .config import IdempotencyConfig, InFlight, RetryAfter, RetryPolicy
from .decorators import idempotent, idempotent_handler
from .errors import (
    BusinessConditionFailedError,
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
from .router import HomeRegionRouter, RoutedIdempotency

__all__ = [
    "UNSET",
    "AsyncGuard",
    "AsyncIdempotency",
    "BusinessConditionFailedError",
    "CallCounter",
    "Claim",
    "CompletionNotRecordedError",
    "ConfigurationError",
    "DeadlineExceededError",
    "DynamoAuditStore",
    "Guard",
    "HomeRegionRouter",
    "HookMetrics",
    "Idempotency",
    "IdempotencyConfig",
    "IdempotencyError",
    "InFlight",
    "InProgressError",
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
    "NullMetrics",
    "OpenTelemetryMetrics",
    "Outcome",
    "PayloadMismatchError",
    "PrometheusMetrics",
    "Record",
    "RecordLayout",
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
    "canonical_json",
    "fingerprint",
    "idempotent",
    "idempotent_handler",
]
