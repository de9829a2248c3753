"""The idempotency layer's errors: one small, flat hierarchy under :class:`IdempotencyError`.

Callers catch the class they can act on. Every error names the caller's own idempotency key
(``.key``, as passed to ``claim``/``run``), never the internal partition key; the record's id
(``IDEMPOTENCY#<scope>#<key>``) is on ``.record_id`` for logs and support. DynamoDB errors that
are not answers (validation, access, exhausted retries) are not wrapped, except where the layer
can say something more useful: a missing table (:class:`TableNotFoundError`, still a
``ClientError``) and a completion that could not be written after the side effect ran
(:class:`CompletionNotRecordedError`).

Size: one concept, every error a caller can catch in one place (http/problems.py answers each).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class IdempotencyError(Exception):
    """Base class of every error raised by :mod:`firstwrite.idempotency`."""


class ConfigurationError(IdempotencyError, ValueError):
    """A configuration value is invalid (also a ``ValueError``, as style asks)."""


class MissingKeyError(IdempotencyError, ValueError):
    """No idempotency key could be derived where one is required (HTTP 400)."""


class InProgressError(IdempotencyError):
    """Another live claim holds the key (HTTP 409).

    ``retry_after`` (seconds) is what the configuration's :class:`~.config.RetryAfter` policy
    answers; ``retry_after_header`` is the same rounded up to whole seconds, the form of an HTTP
    ``Retry-After`` header; ``lease_remaining`` is how long until the live claim could be taken
    over."""

    def __init__(
        self,
        key: str,
        retry_after: float,
        *,
        record_id: str | None = None,
        lease_remaining: float | None = None,
    ) -> None:
        super().__init__(key, retry_after)  # the message is made only if asked for (hot path)
        self.key = key
        self.retry_after = retry_after
        self.record_id = record_id if record_id is not None else key
        self.lease_remaining = retry_after if lease_remaining is None else lease_remaining

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` in whole seconds (rounded up, so a client never comes back early)."""
        return str(max(0, math.ceil(self.retry_after)))

    def __str__(self) -> str:
        return f"request {self.key!r} is already in progress; retry after {self.retry_after:.3f}s"


class DeadlineExceededError(IdempotencyError):
    """The call's time budget (``IdempotencyConfig.budget``, or ``budget=`` on the call) ran
    out while DynamoDB kept failing (throttling, 5xx, dropped connections): nothing more fits,
    so the layer stopped instead of retrying past it. Retryable: ``retry_after`` (seconds) is
    how long to wait first, ``retry_after_header`` the same rounded up for an HTTP
    ``Retry-After``. ``dynamo_error_code`` is the last error DynamoDB (or the SDK) gave,
    ``operation`` the request that was being retried, ``budget`` the budget and ``elapsed`` how
    much of it the call used.

    The side effect has not run. A claim whose answer was lost may have been written: it stays
    under its lease like any claim, so a retry gets "in progress" until the lease ends and then
    takes the key over; the function still runs at most once."""

    retryable = True

    def __init__(
        self,
        key: str,
        *,
        retry_after: float,
        budget: float,
        elapsed: float,
        operation: str,
        dynamo_error_code: str,
        record_id: str | None = None,
    ) -> None:
        super().__init__(
            f"{operation} for {key!r} gave up after {elapsed:.3f}s of its {budget:.3f}s budget "
            f"({dynamo_error_code}); retry after {retry_after:.3f}s"
        )
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.retry_after = retry_after
        self.budget = budget
        self.elapsed = elapsed
        self.operation = operation
        self.dynamo_error_code = dynamo_error_code

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` in whole seconds (rounded up, at least 1)."""
        return str(max(1, math.ceil(self.retry_after)))


class ClockSkewError(IdempotencyError):
    """A takeover refused because this guard's clock cannot be trusted against DynamoDB's
    (:mod:`firstwrite.idempotency.clock_skew`): the key's record holds a lease that looks over,
    but the estimated offset plus its uncertainty is larger than ``bound`` (``offset`` and
    ``uncertainty`` in seconds, ``None`` before any estimate), so the lease might still be
    live. Nothing ran and nothing was written. Retryable: ``retry_after`` seconds, by which a
    guard whose clock is right (or this one, once its estimate settles) can take the key over;
    a clock this far off needs fixing (NTP), see docs/guarantees.md, "Clocks"."""

    retryable = True

    def __init__(
        self,
        key: str,
        reason: str,
        *,
        offset: float | None,
        uncertainty: float | None,
        bound: float,
        retry_after: float = 1.0,
        record_id: str | None = None,
    ) -> None:
        super().__init__(f"takeover of {key!r} refused: {reason}; retry after {retry_after:.0f}s")
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.reason = reason
        self.offset = offset
        self.uncertainty = uncertainty
        self.bound = bound
        self.retry_after = retry_after

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` in whole seconds (rounded up, at least 1)."""
        return str(max(1, math.ceil(self.retry_after)))


class PayloadMismatchError(IdempotencyError):
    """The key was used before with a different request fingerprint (HTTP 422)."""

    def __init__(
        self, key: str, stored: str | None, given: str, *, record_id: str | None = None
    ) -> None:
        super().__init__(f"idempotency key {key!r} was already used with a different request")
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.stored_fingerprint = stored
        self.fingerprint = given


class LostClaimError(IdempotencyError):
    """Our claim's fencing condition failed: the lease ran out and another worker took over
    (or the record is gone). Nothing was written; the new owner's record is untouched."""

    def __init__(
        self,
        key: str,
        owner: str,
        current_owner: str | None,
        status: str | None,
        *,
        record_id: str | None = None,
    ) -> None:
        super().__init__(
            f"lost the claim on {key!r}: now owned by {current_owner!r} (status {status!r}); "
            "the outcome was not recorded"
        )
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.owner = owner
        self.current_owner = current_owner
        self.status = status


class CompletionNotRecordedError(IdempotencyError):
    """The side effect ran, but its result could not be recorded.

    The layer kept trying (renewing the claim's lease so no other worker could take the key
    over) for as long as the lease allowed, then gave up. ``result`` is what your function
    returned; ``claim`` is the claim as last renewed (pass it to ``complete`` to try again);
    ``__cause__`` is the last DynamoDB error. The key stays PENDING until the claim's lease
    ends (``lease_expires_at``, epoch seconds); a retry after that runs the side effect again
    (see ``docs/guarantees.md``)."""

    def __init__(
        self,
        key: str,
        result: Any,
        claim: Any,
        *,
        tried_for: float,
        lease_expires_at: float,
        reason: str,
        record_id: str | None = None,
    ) -> None:
        super().__init__(
            f"the side effect for {key!r} ran, but its result could not be recorded after "
            f"{tried_for:.1f}s of trying ({reason}); the key stays PENDING until its lease ends "
            f"in {lease_expires_at:.0f} (epoch s), and a retry after that runs the side effect "
            "again. The result is on this error's .result"
        )
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.result = result
        self.claim = claim
        self.tried_for = tried_for
        self.lease_expires_at = lease_expires_at


class LateRetryError(IdempotencyError):
    """A retry of a finished request arrived after its record's retention
    (``IdempotencyConfig(refuse_late_retries=True)``). Its record is past retention (or was
    removed by TTL and is remembered by the TTL audit), so running it would repeat the side
    effect; it is refused instead (HTTP 409 or 422, as your API prefers). ``age`` is the time
    since the original request was claimed."""

    def __init__(
        self,
        key: str,
        *,
        age: float | None,
        status: str,
        removed: bool,
        record_id: str | None = None,
    ) -> None:
        how = "removed by TTL" if removed else "past retention"
        aged = "an unknown time" if age is None else f"{age:.0f}s"
        super().__init__(
            f"request {key!r} was first made {aged} ago and its record ({status}) is {how}: "
            "refusing to run it again; raise retention (and client_retry_ceiling) if clients "
            "retry this late"
        )
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.age = age
        self.status = status
        self.removed = removed


class ReplayedFailureError(IdempotencyError):
    """A duplicate of a request that failed for good: the stored failure, replayed."""

    def __init__(
        self,
        key: str,
        error_type: str,
        message: str,
        data: Any = None,
        *,
        record_id: str | None = None,
    ) -> None:
        super().__init__(f"{error_type}: {message}")
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.error_type = error_type
        self.message = message
        self.data = data


class RecoveryRequiredError(IdempotencyError):
    """A claim replaced a record whose work had marked recovery points (it may have done its
    side effect), and no ``reconcile`` hook was given: the work is not rerun blind (HTTP 503,
    retryable). Give the guard (or the decorator, middleware, consumer) a hook
    (docs/recovery.md); ``points`` are the marks found, oldest first."""

    def __init__(
        self,
        key: str,
        points: tuple[Any, ...],
        *,
        record_id: str | None = None,
        retry_after: float = 1.0,
    ) -> None:
        steps = ", ".join(getattr(p, "step", "?") for p in points)
        super().__init__(
            f"request {key!r} was interrupted after its recovery points ({steps}) and no "
            "reconcile hook was given: it is not run again until one reconciles it"
        )
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.points = points
        self.retry_after = retry_after  # seconds (the HTTP answer's Retry-After)


class RecoveryFailedError(IdempotencyError):
    """The ``reconcile`` hook answered that an interrupted request failed for good
    (:class:`~firstwrite.idempotency.recovery.FailedFinally`): the record is FAILED, not
    retryable, with ``reason`` (HTTP 409: it will not run again for this key)."""

    idempotency_retryable = False

    def __init__(self, key: str, reason: str, *, record_id: str | None = None) -> None:
        super().__init__(f"request {key!r} was reconciled as failed for good: {reason}")
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.reason = reason


class SerializationError(IdempotencyError):
    """A result could not be serialised (or a stored one deserialised)."""


class ResultTooLargeError(SerializationError):
    """The result does not fit in a 400 KB DynamoDB item even compressed.

    The way out: store the result in your business state and return a small pointer to it
    (for example ``{"result_id": order.id}``) from the idempotent function.
    """

    def __init__(self, key: str, size: int, limit: int) -> None:
        super().__init__(
            f"the result for {key!r} needs {size} bytes but a DynamoDB item holds at most {limit}; "
            "return a pointer to the business state instead (e.g. {'result_id': ...}), see "
            "docs/patterns.md#large-results"
        )
        self.key = key
        self.size = size
        self.limit = limit


class TableNotFoundError(IdempotencyError):
    """The idempotency table (or a table your transaction items name) does not exist.

    Still the client's own error: what the layer raises (:meth:`raised_for`) is a subclass of
    this class *and* of the class of the error the client raised (botocore's
    ``ResourceNotFoundException``, a ``ClientError``), with its ``response`` and
    ``operation_name``, so existing handlers keep working; the message says what to do."""

    response: Mapping[str, Any]
    operation_name: str

    def __init__(
        self, tables: list[str], error_response: Mapping[str, Any], operation_name: str
    ) -> None:
        # With a client error class among the bases, its own __init__ (botocore builds the
        # message and sets both attributes); otherwise Exception's.
        super().__init__(error_response, operation_name)
        self.response = error_response
        self.operation_name = operation_name
        self.tables = tables
        names = " or ".join(repr(t) for t in tables) or "the table"
        self.hint = (
            f"DynamoDB table {names} does not exist (in this account and region): create it "
            "with guard.ensure_table() (on-demand, TTL on expires_at; safe to call at every "
            "start), or with your infrastructure code (docs/operating-on-aws.md#the-table)"
        )

    def __str__(self) -> str:
        return self.hint

    @classmethod
    def raised_for(
        cls,
        error: BaseException,
        tables: list[str],
        error_response: Mapping[str, Any],
        operation_name: str,
    ) -> TableNotFoundError:
        """The error to raise for ``error``, the client's ``ResourceNotFoundException`` (whose
        parsed response is ``error_response``): an instance of this class and of
        ``type(error)``. A class that cannot be combined gives this class alone."""
        return _beside(type(error))(tables, error_response, operation_name)


_BESIDE: dict[type[BaseException], type[TableNotFoundError]] = {}


def _beside(client_error: type[BaseException]) -> type[TableNotFoundError]:
    """:class:`TableNotFoundError` derived from ``client_error`` as well, made once per client
    error class (botocore makes its modeled exception classes once per session: a few)."""
    if issubclass(client_error, TableNotFoundError):
        return client_error
    known = _BESIDE.get(client_error)
    if known is not None:
        return known
    if len(_BESIDE) >= 16:
        _BESIDE.clear()
    namespace = {
        "__module__": __name__,
        "__qualname__": TableNotFoundError.__qualname__,
        "__doc__": TableNotFoundError.__doc__,
    }
    try:
        made = type(TableNotFoundError.__name__, (TableNotFoundError, client_error), namespace)
    except TypeError:  # a layout that cannot be combined
        return TableNotFoundError
    assert issubclass(made, TableNotFoundError)
    _BESIDE[client_error] = made
    return made


class BusinessConditionFailedError(IdempotencyError):
    """Variant 3: one of the caller's own transaction items failed its condition.

    The whole transaction was cancelled, so the claim was rolled back with it: nothing is
    orphaned and the key stays free. ``reasons`` maps the caller's item index (0-based, in the
    order given) to its DynamoDB cancellation reason dict.
    """

    def __init__(
        self, key: str, reasons: dict[int, dict[str, Any]], *, record_id: str | None = None
    ) -> None:
        codes = ", ".join(f"#{i}: {r.get('Code')}" for i, r in sorted(reasons.items()))
        super().__init__(f"business condition failed for {key!r} ({codes}); no claim was left")
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.reasons = reasons


class TransactionCancelledError(IdempotencyError):
    """Variant 3: the transaction was cancelled for a reason other than a duplicate or a
    business condition. Nothing was written. ``reasons`` is DynamoDB's ``CancellationReasons``
    (one per item, the layer's own ``own`` items first: one, or inside a key migration's window
    one more per previous scheme's key); ``items`` maps your item indexes (0-based) to the
    reasons that name them."""

    retryable = False

    def __init__(
        self,
        key: str,
        reasons: list[dict[str, Any]],
        *,
        record_id: str | None = None,
        own: int = 1,
    ) -> None:
        self.key = key
        self.record_id = record_id if record_id is not None else key
        self.reasons = reasons
        self.own = own
        self.items = {
            i - own: r
            for i, r in enumerate(reasons)
            if i >= own and r.get("Code") not in (None, "None")
        }
        super().__init__(self._message())

    def _message(self) -> str:
        codes = [r.get("Code") for r in self.reasons]
        return f"transaction for {self.key!r} cancelled: {codes}"


class TransactionConflictError(TransactionCancelledError):
    """The transaction kept conflicting with other transactions, or kept being throttled
    (``TransactionConflict``, ``ThrottlingError``, ``ProvisionedThroughputExceeded`` on any
    item, or a ``TransactionConflictException``), through the retry policy's attempts. Safe to
    retry later: nothing was written."""

    retryable = True

    def _message(self) -> str:
        codes = [r.get("Code") for r in self.reasons] or ["TransactionConflictException"]
        return f"transaction for {self.key!r} still conflicting after retries: {codes}; retry later"


class TransactionValidationError(TransactionCancelledError):
    """DynamoDB refused one of the items (``ValidationError``: a wrong key type, an update of a
    missing path, an item over 400 KB...). Retrying the same items cannot succeed."""

    def _message(self) -> str:
        found = next((r for r in self.reasons if r.get("Code") == "ValidationError"), {})
        return (
            f"transaction for {self.key!r} refused: {found.get('Message', 'ValidationError')} "
            f"(reasons {[r.get('Code') for r in self.reasons]})"
        )


class ItemCollectionSizeLimitError(TransactionCancelledError):
    """An item collection (items sharing a partition key in a table with a local secondary
    index) would exceed 10 GB. Retrying the same items cannot succeed."""

    def _message(self) -> str:
        return (
            f"transaction for {self.key!r} cancelled: an item collection would exceed its 10 GB "
            f"limit (reasons {[r.get('Code') for r in self.reasons]})"
        )


class TooManyTransactItemsError(IdempotencyError, ValueError):
    """Variant 3: more business items than fit beside the layer's own in one
    ``TransactWriteItems``. DynamoDB takes at most ``limit`` actions per transaction (100), and
    the claim (or the completion) is one of them, so ``limit - 1`` of yours fit; inside a key
    migration's window the claim (or completion) of each previous scheme's key is one more
    (``own`` counts the layer's items). Refused before any call: nothing was written and the
    key is untouched. Split the writes, or claim first and write the rest under the claim's
    fencing token."""

    def __init__(self, key: str, given: int, limit: int, *, operation: str, own: int = 1) -> None:
        mine = (
            "the layer's own item is one of them"
            if own == 1
            else f"the layer's own items (one per key: the current one and {own - 1} of "
            f"previous schemes) are {own} of them"
        )
        super().__init__(
            f"{operation} for {key!r} was given {given} transaction items, but a "
            f"TransactWriteItems takes at most {limit} and {mine}: "
            f"at most {limit - own} of yours fit"
        )
        self.key = key
        self.given = given
        self.limit = limit
        self.operation = operation
        self.own = own


class ResultStoreError(IdempotencyError):
    """A result store (:mod:`.result_store`) could not write or read a result: the store is
    down, refused the call, or the object is gone."""


class ResultStoreConflictError(ResultStoreError):
    """An object already exists at a result's address with other bytes: two writes for one
    record and owner disagreed (a store written by something else, or a bug)."""

    def __init__(self, location: str) -> None:
        super().__init__(f"another result is already stored at {location!r}")
        self.location = location


class ResultIntegrityError(ResultStoreError):
    """A stored result's bytes are not the ones its record points at (size or SHA-256): the
    object was altered or replaced. It is never replayed."""

    def __init__(self, location: str, expected_size: int, found_size: int) -> None:
        super().__init__(
            f"the stored result {location!r} does not match its record "
            f"(expected {expected_size} bytes with the recorded SHA-256, found {found_size})"
        )
        self.location = location


class ResultDecryptionError(IdempotencyError):
    """A sealed result could not be opened: the key is wrong or gone, or the ciphertext was
    made for another record (or altered). It is never replayed as text."""
