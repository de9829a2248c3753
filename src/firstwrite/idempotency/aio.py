"""The asyncio version over aiobotocore: the same requests, decisions and guarantees as
:class:`~firstwrite.idempotency.guard.Idempotency`, with ``await``.

``client`` is an aiobotocore DynamoDB client (already entered: ``async with
session.create_client("dynamodb") as client``). Without one, the local engine's boto3 client is
driven from a worker thread (:class:`ThreadedClient`), so a newcomer's first async call works
too.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from . import serialization
from .config import IdempotencyConfig
from .errors import (
    BusinessConditionFailedError,
    InProgressError,
    SerializationError,
    TransactionConflictError,
)
from .guard import (
    _MAX_ROUNDS,
    UNSET,
    Claim,
    Clock,
    Outcome,
    Replay,
    Verdict,
    _Core,
    fenced_outcome,
    transient_cancellation,
)
from .metrics import Metrics
from .record import Record, Status, millis
from .retry import AsyncRetrier, error_code
from .store import Item, Key, Requests, _log_error, cancellation_reasons

T = TypeVar("T")


class ThreadedClient:
    """Async facade over a synchronous boto3 client: each call runs in a worker thread."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.meta = client.meta
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._client, name)

        async def call(**kwargs: Any) -> Any:
            return await asyncio.to_thread(functools.partial(method, **kwargs))

        return call


class AsyncRecordStore:
    """Every DynamoDB call of the async guard (mirror of :class:`.store.RecordStore`)."""

    def __init__(
        self,
        client: Any,
        config: IdempotencyConfig,
        *,
        metrics: Metrics,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        from .store import RecordStore

        self.client = client
        self.requests = Requests(config)
        self.metrics = metrics
        # Reuse the sync store's retry reporting (logs + metrics) without its client.
        self._report = RecordStore.__new__(RecordStore)
        self._report.metrics = metrics
        self.retrier = AsyncRetrier(
            config.retry, sleep=sleep, rng=rng, on_retry=self._report._on_retry
        )

    async def _call(
        self, operation: str, fn: Callable[..., Awaitable[Any]], request: dict[str, Any]
    ) -> Any:
        if not self.metrics.enabled:
            return await self.retrier.acall(operation, fn, request)
        start = time.perf_counter()
        try:
            return await self.retrier.acall(operation, fn, request)
        finally:
            self.metrics.observe(
                "firstwrite_operation_seconds", time.perf_counter() - start, operation=operation
            )

    async def _conditional(
        self, operation: str, fn: Callable[..., Awaitable[Any]], request: dict[str, Any]
    ) -> tuple[bool, Item | None]:
        try:
            response = await self._call(operation, fn, request)
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                _log_error(operation, exc)
                raise
            return False, exc.response.get("Item")
        return True, response.get("Attributes")

    async def put_claim(self, request: dict[str, Any]) -> tuple[bool, Item | None]:
        return await self._conditional("PutItem", self.client.put_item, request)

    async def update(self, request: dict[str, Any]) -> tuple[bool, Item | None]:
        return await self._conditional("UpdateItem", self.client.update_item, request)

    async def get(self, key: Key) -> Item | None:
        response = await self._call("GetItem", self.client.get_item, self.requests.get(key))
        item: Item | None = response.get("Item")
        return item

    async def transact(
        self, items: Sequence[dict[str, Any]], token: str
    ) -> list[dict[str, Any]] | None:
        request = {"TransactItems": list(items), "ClientRequestToken": token}
        try:
            await self._call("TransactWriteItems", self.client.transact_write_items, request)
        except ClientError as exc:
            reasons = cancellation_reasons(exc)
            if reasons is None:
                _log_error("TransactWriteItems", exc)
                raise
            return reasons
        return None

    async def ensure_table(self) -> bool:
        created = False
        try:
            await self.client.create_table(**self.requests.create_table())
            created = True
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                raise
        for _ in range(120):
            desc = await self.client.describe_table(TableName=self.requests.table)
            if desc["Table"].get("TableStatus", "ACTIVE") == "ACTIVE":
                break
            await asyncio.sleep(0.5)
        try:
            ttl = await self.client.describe_time_to_live(TableName=self.requests.table)
        except ClientError as exc:
            if error_code(exc) != "UnknownOperationException":
                raise
            return created  # an emulator without TTL (see RecordStore.ensure_table)
        if ttl.get("TimeToLiveDescription", {}).get("TimeToLiveStatus") not in (
            "ENABLED",
            "ENABLING",
        ):
            try:
                await self.client.update_time_to_live(**self.requests.enable_ttl())
            except ClientError as exc:
                if error_code(exc) != "ValidationException":
                    raise
        return created


class AsyncIdempotency(_Core):
    """The asyncio API: ``await guard.claim(...)``, ``await guard.run(key, coro_fn)``..."""

    def __init__(
        self,
        config: IdempotencyConfig | None = None,
        *,
        client: Any = None,
        clock: Clock = time.time,
        metrics: Metrics | None = None,
        non_retryable: Sequence[type[BaseException]] = (),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        super().__init__(config, clock, metrics, non_retryable)
        if client is None:
            from .local import default_client

            client = ThreadedClient(default_client(self.config))
        self.client = client
        self.store = AsyncRecordStore(
            client, self.config, metrics=self.metrics, sleep=sleep, rng=rng
        )
        self.sleep = sleep
        self.rng = rng

    async def ensure_table(self) -> bool:
        return await self.store.ensure_table()

    async def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
    ) -> Outcome:
        """See :meth:`Idempotency.claim`."""
        dkey, record_id = self.keys.key(key, scope)
        fp = self.fingerprint_of(payload)
        hit = self.cached(record_id, fp)
        if hit is not None:
            return hit
        budget = self.config.in_progress_wait if wait is None else wait
        deadline = time.monotonic() + budget
        interval = self.config.poll_interval
        for _ in range(_MAX_ROUNDS):
            claim, item, now = self.new_claim(record_id, dkey, fp, lease)
            ok, old = await self.store.put_claim(self.requests.put_claim(item, fp, now))
            if ok:
                return self.claimed(claim, old)
            if old is None:
                old = await self.store.get(dkey)
                if old is None:
                    continue
            rec = Record.from_item(old)
            while True:
                verdict = self.on_conflict(claim, rec, self.clock())
                if verdict is Verdict.OURS:
                    return self.claimed(claim, None)
                if verdict is Verdict.REPLAY:
                    return self.replay_of(claim, rec)
                if verdict is Verdict.CLAIMABLE:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.in_progress(claim, rec, self.clock())
                await self.sleep(min(interval, remaining))
                interval = min(interval * 2, 0.5)
                if self.metrics.enabled:
                    self.metrics.count("firstwrite_in_progress_polls_total")
                current = await self.store.get(dkey)
                if current is None:
                    break
                rec = Record.from_item(current)
        raise InProgressError(record_id, self.config.poll_interval)

    async def complete(self, claim: Claim, result: Any = None) -> Replay:
        """See :meth:`Idempotency.complete`."""
        try:
            value = self.encode_result(claim, result)
        except SerializationError as exc:
            await self.fail(claim, exc, retryable=False)
            raise
        ok, old = await self.store.update(
            self.requests.complete(claim.key, claim.owner, claim.version, value)
        )
        if not ok:
            rec = None if old is None else Record.from_item(old)
            if not fenced_outcome(rec, claim, Status.COMPLETED):
                raise self.lost(claim, rec, "complete")
        return self.completed(claim, value)

    async def fail(
        self, claim: Claim, error: BaseException | str, *, retryable: bool, data: Any = None
    ) -> None:
        """See :meth:`Idempotency.fail`."""
        info = serialization.error_info(error, data)
        ok, old = await self.store.update(
            self.requests.fail(claim.key, claim.owner, claim.version, info, retryable)
        )
        if not ok:
            rec = None if old is None else Record.from_item(old)
            if not fenced_outcome(rec, claim, Status.FAILED):
                raise self.lost(claim, rec, "fail")

    async def renew(self, claim: Claim, lease: float | None = None) -> Claim:
        """See :meth:`Idempotency.renew`."""
        now = self.clock()
        lease_ms = millis(now + (self.config.lease if lease is None else lease))
        expires = int(now + self.config.retention)  # as in the renew request
        ok, old = await self.store.update(
            self.requests.renew(claim.key, claim.owner, claim.version, lease_ms, now)
        )
        if not ok:
            rec = None if old is None else Record.from_item(old)
            if not fenced_outcome(rec, claim, Status.PENDING):
                raise self.lost(claim, rec, "renew")
            assert rec is not None
            lease_ms = rec.lease_expires_at or lease_ms
            expires = rec.expires_at
        return replace(
            claim, version=claim.version + 1, lease_expires_at=lease_ms, expires_at=expires
        )

    async def run(
        self,
        key: str,
        fn: Callable[[], Awaitable[T]],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        result_type: Any = None,
        lease: float | None = None,
        wait: float | None = None,
    ) -> T:
        """See :meth:`Idempotency.run`; ``fn`` is a coroutine function. Cancellation of the
        task marks the key FAILED (retryable), so a retry need not wait for the lease."""
        outcome = await self.claim(key, payload, scope=scope, lease=lease, wait=wait)
        if isinstance(outcome, Replay):
            value: T = outcome.value(result_type)
            return value
        try:
            result = await fn()
        except BaseException as exc:
            try:
                await asyncio.shield(self.fail(outcome, exc, retryable=self.is_retryable(exc)))
            except Exception:
                pass  # the caller's exception matters more; the lease will expire
            raise
        await self.complete(outcome, result)
        return result

    async def claim_with(
        self,
        key: str,
        transact_items: Sequence[dict[str, Any]],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
    ) -> Outcome:
        """See :meth:`Idempotency.claim_with`."""
        dkey, record_id = self.keys.key(key, scope)
        fp = self.fingerprint_of(payload)
        attempt = 0
        while True:
            claim, item, now = self.new_claim(record_id, dkey, fp, lease)
            items = [self.requests.transact_claim(item, fp, now), *transact_items]
            reasons = await self.store.transact(items, claim.owner)
            if reasons is None:
                return self.claimed(claim, None)
            old, claim_failed, business = self.split_reasons(claim, reasons)
            if claim_failed:
                if old is None:
                    old = await self.store.get(dkey)
                    if old is None:
                        continue
                rec = Record.from_item(old)
                verdict = self.on_conflict(claim, rec, self.clock())
                if verdict is Verdict.OURS:
                    return self.claimed(claim, None)
                if verdict is Verdict.REPLAY:
                    return self.replay_of(claim, rec)
                if verdict is Verdict.IN_PROGRESS:
                    raise self.in_progress(claim, rec, self.clock())
                continue
            if business:
                raise BusinessConditionFailedError(record_id, business)
            attempt += 1
            if not transient_cancellation(reasons) or attempt >= self.config.retry.max_attempts:
                raise TransactionConflictError(record_id, reasons)
            await self.sleep(self.backoff(attempt))

    async def complete_with(
        self, claim: Claim, transact_items: Sequence[dict[str, Any]], result: Any = None
    ) -> Replay:
        """See :meth:`Idempotency.complete_with`."""
        value = self.encode_result(claim, result)
        token = uuid.uuid4().hex
        attempt = 0
        while True:
            update = self.requests.complete(claim.key, claim.owner, claim.version, value)
            update.pop("ReturnConsumedCapacity", None)
            reasons = await self.store.transact([{"Update": update}, *transact_items], token)
            if reasons is None:
                break
            old, fence_failed, business = self.split_reasons(claim, reasons)
            if fence_failed:
                rec = None if old is None else Record.from_item(old)
                if fenced_outcome(rec, claim, Status.COMPLETED):
                    break
                raise self.lost(claim, rec, "complete")
            if business:
                raise BusinessConditionFailedError(claim.record_id, business)
            attempt += 1
            if not transient_cancellation(reasons) or attempt >= self.config.retry.max_attempts:
                raise TransactionConflictError(claim.record_id, reasons)
            token = uuid.uuid4().hex
            await self.sleep(self.backoff(attempt))
        return self.completed(claim, value)

    async def get(self, key: str, *, scope: str | None = None) -> Record | None:
        dkey, _ = self.keys.key(key, scope)
        item = await self.store.get(dkey)
        return None if item is None else Record.from_item(item)
