"""Variant 3: what a cancelled ``TransactWriteItems`` means, read item by item (pure).

One reason per item, in request order: the layer's own items first (the claim, or the fenced
completion, under the current key, then under each old key in a key migration's window):

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

Several failures: a validation error wins, then the layer's condition (the first refusing own
item is judged, even when the caller's failed too), a caller's condition, the size limit, the rest.
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
_FAILED = "ConditionalCheckFailed"


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
    its reason, for the caller's failed conditions; ``own`` is how many items were the layer's
    (the first ones); ``refused`` the first of them whose condition failed (0: the current
    key; ``n``: the ``n``-th previous scheme's key), ``None`` when none did."""

    kind: Kind
    reasons: list[dict[str, Any]]
    business: dict[int, dict[str, Any]]
    labels: list[str]  # one metric label per failing item
    own: int = 1
    refused: int | None = None

    @property
    def own_item(self) -> dict[str, Any] | None:
        """The refusing own item as stored (``ALL_OLD``), when its condition failed."""
        if self.refused is None or self.refused >= len(self.reasons):
            return None
        item = self.reasons[self.refused].get("Item")
        return item if isinstance(item, dict) else None

    @property
    def level(self) -> int:
        """How loudly to log it: a duplicate or a business refusal is an everyday answer."""
        return logging.INFO if self.kind in (Kind.OWN_CONDITION, Kind.BUSINESS) else logging.WARNING


def read(reasons: list[dict[str, Any]], own_label: str, own: int = 1) -> Cancellation:
    """Read ``CancellationReasons`` of a transaction whose first ``own`` items are the layer's;
    ``own_label`` names a failed condition on the current key's item in the
    ``transact_write_cancellations_total`` metric (``duplicate``, ``fence``), ``legacy_`` before
    it on a previous scheme's key."""
    codes = [r.get("Code") for r in reasons]
    business = {
        i - own: r
        for i, r in enumerate(reasons)
        if i >= own and r.get("Code") == "ConditionalCheckFailed"
    }
    refused = None
    for i, code in enumerate(codes[:own]):
        if code == _FAILED:
            refused = i
            break
    labels = []
    for i, code in enumerate(codes):
        if code in _NONE:
            continue
        if code == _FAILED:
            labels.append(
                own_label
                if i == 0
                else f"legacy_{own_label}"
                if i < own
                else "business_condition_failed"
            )
        else:
            labels.append(str(code))
    failing = {c for c in codes if c not in _NONE}
    if "ValidationError" in failing:
        kind = Kind.VALIDATION
    elif refused is not None:
        kind = Kind.OWN_CONDITION
    elif business:
        kind = Kind.BUSINESS
    elif "ItemCollectionSizeLimitExceeded" in failing:
        kind = Kind.SIZE
    elif failing and failing <= TRANSIENT_REASONS:
        kind = Kind.TRANSIENT
    else:
        kind = Kind.UNKNOWN
    return Cancellation(kind, list(reasons), business, labels, own, refused)
