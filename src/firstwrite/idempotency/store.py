"""Every DynamoDB call the layer makes, and nothing else.

:class:`Requests` builds the request dicts (shared by the sync :class:`RecordStore` and the
asyncio store in :mod:`.aio`); expression strings and attribute-name maps are built once per
configuration, so a call costs one ``Item``/values dict build. The stores run a request, apply
the retry policy (throttling and 5xx only) and report what DynamoDB answered: a failed condition
comes back as data (the ``ALL_OLD`` item), never as a blind retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from . import record as r
from .config import IdempotencyConfig
from .keys import NO_FINGERPRINT
from .metrics import NULL, Metrics
from .retry import Retrier, classify, error_code

log = logging.getLogger("firstwrite.idempotency")

Item = dict[str, dict[str, Any]]
Key = dict[str, dict[str, str]]

_ZERO = {"N": "0"}

# Claimable: absent; past retention (TTL deletes late, so an expired item still there counts as
# absent); or, for the same request only, a lease that is over: an abandoned PENDING claim, or a
# retryable FAILED one (its lease is 0). Only those two states carry a lease, so ``#lease < :now``
# needs no status test. The fingerprint guard on that branch is new compared with the starting
# design: without it a different request reusing the key could take over a half-done or failed
# claim. ``:now`` is epoch seconds (as ``expires_at``), ``:now_ms`` milliseconds (as the lease).
CLAIM_CONDITION = (
    "attribute_not_exists(#pk) OR #exp < :now OR "
    "(#lease < :now_ms AND (#fp = :fp OR attribute_not_exists(#fp)))"
)
CLAIM_CONDITION_ANY = "attribute_not_exists(#pk) OR #exp < :now OR #lease < :now_ms"
# The fence: the owner value is ``<token>:<version>``. Requiring the lease makes COMPLETED and
# final FAILED records immune to any later fenced write; renew and fail bump the version, so a
# copy of the claim from before them is refused too. Completion is terminal and keeps the version.
FENCE = "#own = :own AND attribute_exists(#lease)"
# Retention runs from the claim (or the last renewal): client retries are bounded by the time
# since their first attempt, which is when the claim was made, so completing or failing need
# not move ``expires_at``.
COMPLETE_UPDATE = "SET #res = :res REMOVE #lease"
FAIL_UPDATE = "SET #err = :err, #own = :nown REMOVE #lease"
FAIL_RETRYABLE_UPDATE = "SET #err = :err, #own = :nown, #lease = :zero"
RENEW_UPDATE = "SET #lease = :lease, #own = :nown, #exp = :exp"


class Requests:
    """Request builders for one configuration."""

    __slots__ = (
        "_claim_names",
        "_claim_names_any",
        "_complete_names",
        "_fail_names",
        "_renew_names",
        "capacity",
        "config",
        "region",
        "retention",
        "table",
    )

    def __init__(self, config: IdempotencyConfig) -> None:
        self.config = config
        self.table = config.table_name
        self.retention = config.retention
        self.region = None if config.region is None else {"S": config.region}
        self.capacity = (
            {"ReturnConsumedCapacity": "TOTAL"} if config.return_consumed_capacity else {}
        )
        self._claim_names_any = {
            "#pk": config.partition_key,
            "#exp": r.A_EXPIRES,
            "#lease": r.A_LEASE,
        }
        self._claim_names = self._claim_names_any | {"#fp": r.A_FINGERPRINT}
        fence = {"#own": r.A_OWNER, "#lease": r.A_LEASE}
        self._complete_names = fence | {"#res": r.A_RESULT}
        self._fail_names = fence | {"#err": r.A_ERROR}
        self._renew_names = fence | {"#exp": r.A_EXPIRES}

    # -- items -------------------------------------------------------------------------------

    def claim_item(self, key: Key, owner: str, fingerprint: str, now: float, lease: float) -> Item:
        item: Item = {
            **key,
            r.A_OWNER: {"S": r.fence(owner, 1)},
            r.A_LEASE: {"N": str(r.millis(now + lease))},
            r.A_EXPIRES: {"N": str(int(now + self.retention))},
        }
        if fingerprint != NO_FINGERPRINT:
            item[r.A_FINGERPRINT] = {"S": fingerprint}
        if self.region is not None:
            item[r.A_REGION] = self.region
        return item

    def _claim_condition(self, fingerprint: str, now: float) -> dict[str, Any]:
        values = {":now": {"N": str(int(now))}, ":now_ms": {"N": str(r.millis(now))}}
        if fingerprint == NO_FINGERPRINT:
            return {
                "ConditionExpression": CLAIM_CONDITION_ANY,
                "ExpressionAttributeNames": self._claim_names_any,
                "ExpressionAttributeValues": values,
            }
        values[":fp"] = {"S": fingerprint}
        return {
            "ConditionExpression": CLAIM_CONDITION,
            "ExpressionAttributeNames": self._claim_names,
            "ExpressionAttributeValues": values,
        }

    # -- requests ----------------------------------------------------------------------------

    def put_claim(self, item: Item, fingerprint: str, now: float) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Item": item,
            **self._claim_condition(fingerprint, now),
            # On success ALL_OLD tells a takeover from a first claim (and costs nothing for a
            # new key); on failure it carries the stored record, so a duplicate costs one write
            # and no read.
            "ReturnValues": "ALL_OLD",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **self.capacity,
        }

    def transact_claim(self, item: Item, fingerprint: str, now: float) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": item,
                **self._claim_condition(fingerprint, now),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def complete(
        self, key: Key, owner: str, version: int, result: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Key": key,
            "ConditionExpression": FENCE,
            "UpdateExpression": COMPLETE_UPDATE,
            "ExpressionAttributeNames": self._complete_names,
            "ExpressionAttributeValues": {
                ":own": {"S": r.fence(owner, version)},
                ":res": result,
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **self.capacity,
        }

    def fail(
        self, key: Key, owner: str, version: int, error: str, retryable: bool
    ) -> dict[str, Any]:
        values = {
            ":own": {"S": r.fence(owner, version)},
            ":nown": {"S": r.fence(owner, version + 1)},
            ":err": {"S": error},
        }
        if retryable:
            values[":zero"] = _ZERO
        return {
            "TableName": self.table,
            "Key": key,
            "ConditionExpression": FENCE,
            "UpdateExpression": FAIL_RETRYABLE_UPDATE if retryable else FAIL_UPDATE,
            "ExpressionAttributeNames": self._fail_names,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **self.capacity,
        }

    def renew(
        self, key: Key, owner: str, version: int, lease_ms: int, now: float
    ) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Key": key,
            "ConditionExpression": FENCE,
            "UpdateExpression": RENEW_UPDATE,
            "ExpressionAttributeNames": self._renew_names,
            "ExpressionAttributeValues": {
                ":own": {"S": r.fence(owner, version)},
                ":nown": {"S": r.fence(owner, version + 1)},
                ":lease": {"N": str(lease_ms)},
                ":exp": {"N": str(int(now + self.retention))},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **self.capacity,
        }

    def get(self, key: Key) -> dict[str, Any]:
        return {"TableName": self.table, "Key": key, "ConsistentRead": True, **self.capacity}

    def delete(self, key: Key) -> dict[str, Any]:
        return {"TableName": self.table, "Key": key}

    def create_table(self) -> dict[str, Any]:
        cfg = self.config
        schema = [{"AttributeName": cfg.partition_key, "KeyType": "HASH"}]
        attrs = [{"AttributeName": cfg.partition_key, "AttributeType": "S"}]
        if cfg.sort_key is not None:
            schema.append({"AttributeName": cfg.sort_key, "KeyType": "RANGE"})
            attrs.append({"AttributeName": cfg.sort_key, "AttributeType": "S"})
        return {
            "TableName": self.table,
            "KeySchema": schema,
            "AttributeDefinitions": attrs,
            "BillingMode": "PAY_PER_REQUEST",
        }

    def enable_ttl(self) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "TimeToLiveSpecification": {"Enabled": True, "AttributeName": r.TTL_ATTRIBUTE},
        }


def cancellation_reasons(exc: ClientError) -> list[dict[str, Any]] | None:
    """The per-item reasons of a ``TransactionCanceledException``, else ``None``."""
    if error_code(exc) != "TransactionCanceledException":
        return None
    reasons = exc.response.get("CancellationReasons")
    return list(reasons) if isinstance(reasons, list) else []


class RecordStore:
    """The synchronous store over a boto3 low-level DynamoDB client."""

    def __init__(
        self,
        client: Any,
        config: IdempotencyConfig,
        *,
        metrics: Metrics = NULL,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.client = client
        self.requests = Requests(config)
        self.metrics = metrics
        kwargs: dict[str, Any] = {"sleep": sleep, "on_retry": self._on_retry}
        if rng is not None:
            kwargs["rng"] = rng
        self.retrier = Retrier(config.retry, **kwargs)
        self._put_item = client.put_item
        self._update_item = client.update_item
        self._get_item = client.get_item
        self._transact = client.transact_write_items

    def _on_retry(self, operation: str, kind: str, code: str, attempt: int, delay: float) -> None:
        log.warning(
            "retrying %s after %s (attempt %d, sleeping %.3fs)",
            operation,
            code,
            attempt,
            delay,
            extra={"dynamo_error_code": code, "operation": operation},
        )
        if self.metrics.enabled:
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

    def _call(self, operation: str, fn: Callable[..., Any], request: dict[str, Any]) -> Any:
        if not self.metrics.enabled:
            return self.retrier.call(operation, fn, request)
        start = time.perf_counter()
        try:
            response = self.retrier.call(operation, fn, request)
        finally:
            self.metrics.observe(
                "firstwrite_operation_seconds", time.perf_counter() - start, operation=operation
            )
        consumed = response.get("ConsumedCapacity") if isinstance(response, dict) else None
        if consumed:
            for entry in consumed if isinstance(consumed, list) else [consumed]:
                units = float(entry.get("CapacityUnits", 0.0))
                self.metrics.count("firstwrite_consumed_capacity_total", units, operation=operation)
        return response

    def _conditional(
        self, operation: str, fn: Callable[..., Any], request: dict[str, Any]
    ) -> tuple[bool, Item | None]:
        """``(True, returned attributes)`` or ``(False, ALL_OLD item or None)``."""
        try:
            response = self._call(operation, fn, request)
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                _log_error(operation, exc)
                raise
            return False, exc.response.get("Item")
        return True, response.get("Attributes")

    def put_claim(self, request: dict[str, Any]) -> tuple[bool, Item | None]:
        return self._conditional("PutItem", self._put_item, request)

    def update(self, request: dict[str, Any]) -> tuple[bool, Item | None]:
        return self._conditional("UpdateItem", self._update_item, request)

    def get(self, key: Key) -> Item | None:
        try:
            response = self._call("GetItem", self._get_item, self.requests.get(key))
        except ClientError as exc:
            _log_error("GetItem", exc)
            raise
        item: Item | None = response.get("Item")
        return item

    def transact(self, items: Sequence[dict[str, Any]], token: str) -> list[dict[str, Any]] | None:
        """Run one TransactWriteItems; ``None`` when applied, else the cancellation reasons."""
        request = {
            "TransactItems": list(items),
            "ClientRequestToken": token,
            **self.requests.capacity,
        }
        try:
            self._call("TransactWriteItems", self._transact, request)
        except ClientError as exc:
            reasons = cancellation_reasons(exc)
            if reasons is None:
                _log_error("TransactWriteItems", exc)
                raise
            return reasons
        return None

    def delete(self, key: Key) -> None:
        self._call("DeleteItem", self.client.delete_item, self.requests.delete(key))

    def ensure_table(self, *, wait: float = 60.0) -> bool:
        """Create the table (on-demand, TTL on ``expires_at``) unless it exists. ``True`` when
        this call created it. Safe to call from many processes at once."""
        created = False
        try:
            self.client.create_table(**self.requests.create_table())
            created = True
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                raise
        deadline = time.monotonic() + wait
        while True:
            status = self.client.describe_table(TableName=self.requests.table)["Table"].get(
                "TableStatus", "ACTIVE"
            )
            if status == "ACTIVE" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        try:
            ttl = self.client.describe_time_to_live(TableName=self.requests.table)
        except ClientError as exc:
            if error_code(exc) != "UnknownOperationException":
                raise
            # An emulator without TTL: expiry is still enforced in code, only deletion is lost.
            log.warning("TTL is not supported by this endpoint; expired records stay stored")
            return created
        desc = ttl.get("TimeToLiveDescription", {})
        if desc.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            try:
                self.client.update_time_to_live(**self.requests.enable_ttl())
            except ClientError as exc:  # a concurrent ensure_table enabled it first
                if error_code(exc) != "ValidationException":
                    raise
        return created


def _log_error(operation: str, exc: ClientError) -> None:
    code = error_code(exc)
    log.error(
        "%s failed: %s",
        operation,
        code,
        extra={
            "dynamo_error_code": code,
            "operation": operation,
            "retryable": classify(exc) is not None,
        },
    )
