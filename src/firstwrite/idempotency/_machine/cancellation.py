"""Variant 3: what a cancelled ``TransactWriteItems`` means, read item by item (pure).

DynamoDB answers a cancelled transaction with one reason per item, in request order; the layer's
own item (the claim, or the fenced completion) is always first, the caller's items follow:

=================================== ===================== ===================================
reason                              on the layer's item   on one of the caller's items
=================================== ===================== ===================================
``ConditionalCheckFailed``          duplicate / fence     the caller's business condition
``TransactionConflict``,            retried with backoff, then :class:`~firstwrite.idempotency.errors.TransactionConflictError`
``ThrottlingError``,
``ProvisionedThroughputExceeded``
``ValidationError``                 :class:`~firstwrite.idempotency.errors.TransactionValidationError` (not retryable)
``ItemCollectionSizeLimitExceeded`` :class:`~firstwrite.idempotency.errors.ItemCollectionSizeLimitError` (not retryable)
anything else                       :class:`~firstwrite.idempotency.errors.TransactionCancelledError` (not retryable)
=================================== ===================== ===================================

Several failures: a validation error wins, then the layer's condition (a duplicate is the
answer even when the caller's failed too), a caller's condition, the size limit, then the rest.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any

TRANSIENT_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
_NONE = (None, "None")


class Kind(enum.Enum):
    OWN_CONDITION = "own_condition"  # the claim's condition (a duplicate) or the fence
    BUSINESS = "business"
    VALIDATION = "validation"
    SIZE = "size"
    TRANSIENT = "transient"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Cancellation:
    """One cancelled transaction, read. ``business`` maps the caller's item index (0-based) to
    its reason, for the caller's failed conditions."""

    kind: Kind
    reasons: list[dict[str, Any]]
    business: dict[int, dict[str, Any]]
    labels: list[str]  # one metric label per failing item

    @property
    def own_item(self) -> dict[str, Any] | None:
        """The layer's item as stored (``ALL_OLD``), when its condition failed."""
        item = self.reasons[0].get("Item") if self.reasons else None
        return item if isinstance(item, dict) else None

    @property
    def level(self) -> int:
        """How loudly to log it: a duplicate or a business refusal is an everyday answer."""
        return logging.INFO if self.kind in (Kind.OWN_CONDITION, Kind.BUSINESS) else logging.WARNING


def read(reasons: list[dict[str, Any]], own_label: str) -> Cancellation:
    """Read ``CancellationReasons``; ``own_label`` names a failed condition on the layer's item
    in the ``transact_write_cancellations_total`` metric (``duplicate``, ``fence``)."""
    codes = [r.get("Code") for r in reasons]
    business = {
        i - 1: r
        for i, r in enumerate(reasons)
        if i > 0 and r.get("Code") == "ConditionalCheckFailed"
    }
    labels = []
    for i, code in enumerate(codes):
        if code in _NONE:
            continue
        if code == "ConditionalCheckFailed":
            labels.append(own_label if i == 0 else "business_condition_failed")
        else:
            labels.append(str(code))
    failing = {c for c in codes if c not in _NONE}
    if "ValidationError" in failing:
        kind = Kind.VALIDATION
    elif codes and codes[0] == "ConditionalCheckFailed":
        kind = Kind.OWN_CONDITION
    elif business:
        kind = Kind.BUSINESS
    elif "ItemCollectionSizeLimitExceeded" in failing:
        kind = Kind.SIZE
    elif failing and failing <= TRANSIENT_REASONS:
        kind = Kind.TRANSIENT
    else:
        kind = Kind.UNKNOWN
    return Cancellation(kind, list(reasons), business, labels)
