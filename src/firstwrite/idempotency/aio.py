"""The asyncio driver over aiobotocore: the same requests, decisions and guarantees as
:class:`~firstwrite.idempotency.guard.Idempotency`, with ``await``.

The state machine itself is in :mod:`.guard` (:class:`~.guard.StateMachine`: every transition
is a generator that yields the DynamoDB effect it needs). :class:`AsyncIdempotency` performs
each effect by awaiting :class:`AsyncRecordStore` (or ``asyncio.sleep``) and sends the answer
back; only ``run``, which awaits the caller's coroutine function, is written here.

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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from .config import IdempotencyConfig
from .guard import (
    UNSET,
    Claim,
    Clock,
    Outcome,
    Replay,
    StateMachine,
    Steps,
    performers,
)
from .metrics import Metrics
from .record import Record
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


class AsyncIdempotency(StateMachine):
    """The asyncio API: ``await guard.claim(...)``, ``await guard.run(key, coro_fn)``...

    Drives the :class:`~.guard.StateMachine` transitions with ``await`` on the store."""

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
        self._io = performers(self.store, self._pause)

    def _pause(self, seconds: float) -> Awaitable[None]:
        return self.sleep(seconds)  # looked up per call, as in the sync guard

    async def _drive(self, steps: Steps[T]) -> T:
        """See :meth:`Idempotency._drive`; each effect is awaited."""
        io = self._io
        try:
            effect = next(steps)
            while True:
                try:
                    answer = await io[type(effect)](*effect)
                except BaseException as exc:
                    effect = steps.throw(exc)
                else:
                    effect = steps.send(answer)
        except StopIteration as stop:
            outcome: T = stop.value
            return outcome

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
        return await self._drive(self.claim_steps(key, payload, scope, lease, wait))

    async def complete(self, claim: Claim, result: Any = None) -> Replay:
        """See :meth:`Idempotency.complete`."""
        return await self._drive(self.complete_steps(claim, result))

    async def fail(
        self, claim: Claim, error: BaseException | str, *, retryable: bool, data: Any = None
    ) -> None:
        """See :meth:`Idempotency.fail`."""
        await self._drive(self.fail_steps(claim, error, retryable=retryable, data=data))

    async def renew(self, claim: Claim, lease: float | None = None) -> Claim:
        """See :meth:`Idempotency.renew`."""
        return await self._drive(self.renew_steps(claim, lease))

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
        return await self._drive(self.claim_with_steps(key, transact_items, payload, scope, lease))

    async def complete_with(
        self, claim: Claim, transact_items: Sequence[dict[str, Any]], result: Any = None
    ) -> Replay:
        """See :meth:`Idempotency.complete_with`."""
        return await self._drive(self.complete_with_steps(claim, transact_items, result))

    async def get(self, key: str, *, scope: str | None = None) -> Record | None:
        """See :meth:`Idempotency.get`."""
        return await self._drive(self.get_steps(key, scope))
