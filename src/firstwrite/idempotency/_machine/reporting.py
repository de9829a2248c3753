"""Every log record and metric the layer emits, written once.

The state machine and the retry loop call a :class:`Reporter`; the drivers never log or count,
so the synchronous and asynchronous guards emit exactly the same records and samples. Log
records go to the ``firstwrite.idempotency`` logger with structured ``extra`` fields:
``idempotency_key`` (the caller's key), ``record_id`` (the item's partition key),
``operation`` and ``dynamo_error_code`` where a DynamoDB error is involved. Metric names are in
:mod:`firstwrite.idempotency.metrics`.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from ..effects import Call
from ..metrics import NULL, Metrics
from ..serialization import item_size

log = logging.getLogger("firstwrite.idempotency")


def estimated_write_units(call: Call, stored: dict[str, Any] | None) -> float:
    """What DynamoDB charges for a write whose condition failed: write units for the larger of
    the item it tried to write and the item stored (1 KB each, at least 1), as for the same
    write had it succeeded. An *estimate*: the error carries no ``ConsumedCapacity``, and an
    UpdateItem's would-be item is not known here (the stored item's size stands in for it)."""
    tried = item_size(call.params["Item"]) if "Item" in call.params else 0
    held = item_size(stored) if stored else 0
    return float(max(1, math.ceil(max(tried, held) / 1024)))


def _public(reason: dict[str, Any]) -> dict[str, Any]:
    """A cancellation reason for a log: its code and message, and whether DynamoDB returned the
    stored item (the item itself stays out of logs: it may hold results and business data)."""
    out = {"Code": reason.get("Code")}
    if "Message" in reason:
        out["Message"] = reason["Message"]
    if "Item" in reason:
        out["ItemReturned"] = True
    return out


class Reporter:
    """Logs and metrics of one guard."""

    __slots__ = ("enabled", "metrics")

    def __init__(self, metrics: Metrics | None) -> None:
        self.metrics = metrics or NULL
        self.enabled = self.metrics.enabled

    # -- DynamoDB calls (the retry loop) ---------------------------------------------------------

    def start(self) -> float:
        return time.perf_counter() if self.enabled else 0.0

    def _elapsed(self, call: Call, start: float) -> None:
        self.metrics.observe(
            "firstwrite_operation_seconds", time.perf_counter() - start, operation=call.operation
        )

    def answered(self, call: Call, response: dict[str, Any], start: float) -> None:
        if not self.enabled:
            return
        self._elapsed(call, start)
        consumed = response.get("ConsumedCapacity") if isinstance(response, dict) else None
        if consumed:
            units = sum(
                float(entry.get("CapacityUnits", 0.0))
                for entry in (consumed if isinstance(consumed, list) else [consumed])
            )
            self.metrics.count(
                "firstwrite_consumed_capacity_total",
                units,
                operation=call.operation,
                source="reported",
            )

    def refused(self, call: Call, exc: Any, start: float) -> None:
        """A failed condition or a cancelled transaction (an answer, not an error). DynamoDB
        charges a failed conditional write but reports nothing: it is estimated. What a
        cancelled transaction is charged is not documented: nothing is counted for it."""
        if not self.enabled:
            return
        self._elapsed(call, start)
        if call.operation != "TransactWriteItems" and call.params.get("ReturnConsumedCapacity") in (
            "TOTAL",
            "INDEXES",
        ):
            self.metrics.count(
                "firstwrite_consumed_capacity_total",
                estimated_write_units(call, exc.response.get("Item")),
                operation=call.operation,
                source="estimated",
            )

    def gave_up(
        self, call: Call, code: str, retryable: bool, key: str, record_id: str, start: float
    ) -> None:
        log.error(
            "%s failed for %r: %s",
            call.operation,
            key,
            code,
            extra={
                "dynamo_error_code": code,
                "operation": call.operation,
                "retryable": retryable,
                "idempotency_key": key,
                "record_id": record_id,
            },
        )
        if self.enabled:
            self._elapsed(call, start)

    def retrying(
        self,
        operation: str,
        kind: str,
        code: str,
        attempt: int,
        delay: float,
        key: str,
        record_id: str,
    ) -> None:
        log.warning(
            "retrying %s for %r after %s (attempt %d, sleeping %.3fs)",
            operation,
            key,
            code,
            attempt,
            delay,
            extra={
                "dynamo_error_code": code,
                "operation": operation,
                "idempotency_key": key,
                "record_id": record_id,
            },
        )
        if self.enabled:
            self.metrics.count(
                "firstwrite_dynamodb_retries_total",
                operation=operation,
                kind=kind,
                dynamo_error_code=code,
            )
            if kind == "throttle":
                self.metrics.count(
                    "firstwrite_dynamodb_throttles_total",
                    operation=operation,
                    dynamo_error_code=code,
                )

    def deadline_exceeded(
        self,
        operation: str,
        code: str,
        key: str,
        record_id: str,
        budget: float,
        elapsed: float,
    ) -> None:
        """A call stopped at its time budget while ``operation`` kept failing with ``code``."""
        if self.enabled:
            self.metrics.count(
                "firstwrite_deadline_exceeded_total", operation=operation, dynamo_error_code=code
            )
        log.error(
            "%s for %r stopped at its time budget (%.3fs of %.3fs): %s",
            operation,
            key,
            elapsed,
            budget,
            code,
            extra={
                "dynamo_error_code": code,
                "operation": operation,
                "idempotency_key": key,
                "record_id": record_id,
                "budget": budget,
                "elapsed": elapsed,
            },
        )

    # -- the record's life -----------------------------------------------------------------------

    def no_ttl(self) -> None:
        log.warning("TTL is not supported by this endpoint; expired records stay stored")

    def clock_estimate(self, offset: float, uncertainty: float) -> None:
        """The guard's estimate of DynamoDB's clock moved (:mod:`firstwrite.idempotency.clock_skew`)."""
        if self.enabled:
            self.metrics.gauge("firstwrite_clock_offset_seconds", offset)
            self.metrics.gauge("firstwrite_clock_offset_uncertainty_seconds", uncertainty)

    def clock_refused(self, key: str, record_id: str, reason: str) -> None:
        """A takeover refused: the clock cannot be trusted against DynamoDB's."""
        self.claim("clock_skew_refused")
        log.warning(
            "takeover of %r refused: %s",
            key,
            reason,
            extra={"idempotency_key": key, "record_id": record_id},
        )

    def claim(self, outcome: str) -> None:
        if self.enabled:
            self.metrics.count("firstwrite_claims_total", outcome=outcome)

    def legacy_hit(self, scheme: str) -> None:
        if self.enabled:
            self.metrics.count("firstwrite_legacy_key_hits_total", scheme=scheme)

    def cache_hit(self) -> None:
        if self.enabled:
            self.metrics.count("firstwrite_cache_hits_total")

    def poll(self) -> None:
        if self.enabled:
            self.metrics.count("firstwrite_in_progress_polls_total")

    def cross_region(self, region: str) -> None:
        if self.enabled:
            self.metrics.count("dynamo_cross_region_duplicate_detected_total", region=region)

    def takeover(self, key: str, record_id: str, previous_owner: str) -> None:
        log.warning(
            "took over the abandoned claim on %r (previous owner %s)",
            key,
            previous_owner,
            extra={"idempotency_key": key, "record_id": record_id},
        )

    def lost(self, key: str, record_id: str, operation: str, current_owner: str | None) -> None:
        if self.enabled:
            self.metrics.count("firstwrite_lost_claims_total", operation=operation)
        log.error(
            "lost the claim on %r at %s: now owned by %s",
            key,
            operation,
            current_owner,
            extra={
                "idempotency_key": key,
                "record_id": record_id,
                "dynamo_error_code": "ConditionalCheckFailedException",
                "operation": operation,
            },
        )

    def fail_not_recorded(self, key: str, record_id: str) -> None:
        log.exception(
            "could not record the failure of %r; its claim stays until the lease ends",
            key,
            extra={"idempotency_key": key, "record_id": record_id},
        )

    def completion_retry(self, key: str, record_id: str, code: str, attempt: int) -> None:
        log.warning(
            "the side effect for %r ran; recording its result failed (%s), trying again "
            "(attempt %d)",
            key,
            code,
            attempt,
            extra={
                "idempotency_key": key,
                "record_id": record_id,
                "dynamo_error_code": code,
                "operation": "UpdateItem",
            },
        )

    def completion_not_recorded(
        self, key: str, record_id: str, code: str, tried_for: float
    ) -> None:
        if self.enabled:
            self.metrics.count("firstwrite_completions_not_recorded_total")
        log.error(
            "the side effect for %r ran but its result could not be recorded after %.1fs (%s): "
            "a retry after the lease runs it again",
            key,
            tried_for,
            code,
            extra={
                "idempotency_key": key,
                "record_id": record_id,
                "dynamo_error_code": code,
                "operation": "UpdateItem",
            },
        )

    def late_retry(
        self,
        key: str,
        record_id: str,
        *,
        age: float | None,
        status: str,
        removed: bool,
        refused: bool,
    ) -> None:
        """A request for a key whose finished record is past retention (still stored, or
        removed by TTL and remembered by a tombstone): an error when it runs again (a duplicate
        side effect), a warning when it is refused."""
        if self.enabled:
            self.metrics.count(
                "firstwrite_late_retries_total", record="removed" if removed else "expired"
            )
            if removed:
                self.metrics.count("dynamo_ttl_delete_before_retry_total")
        log.log(
            logging.WARNING if refused else logging.ERROR,
            "late retry of %r: first made %s ago, its %s record is %s; %s",
            key,
            "?" if age is None else f"{age:.0f}s",
            status,
            "removed by TTL" if removed else "past retention",
            "refused" if refused else "running it again (refuse_late_retries is off)",
            extra={
                "idempotency_key": key,
                "record_id": record_id,
                "record_age": age,
                "dynamo_error_code": "TTLDeleteBeforeRetry" if removed else "RetentionExpired",
            },
        )

    def cancellation(
        self,
        key: str,
        record_id: str,
        operation: str,
        reasons: list[dict[str, Any]],
        labels: list[str],
        level: int,
    ) -> None:
        """One cancelled TransactWriteItems of variant 3: every reason, with the caller's key
        (``operation``: ``claim`` or ``complete``)."""
        if self.enabled:
            for label in labels:
                self.metrics.count(
                    "transact_write_cancellations_total", transact_write_cancellation_reason=label
                )
        log.log(
            level,
            "transaction %s for %r cancelled: %s",
            operation,
            key,
            [r.get("Code") for r in reasons],
            extra={
                "idempotency_key": key,
                "record_id": record_id,
                "operation": operation,
                "dynamo_error_code": "TransactionCanceledException",
                "cancellation_reasons": [_public(r) for r in reasons],
            },
        )
