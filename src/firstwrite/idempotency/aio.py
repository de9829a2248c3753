"""The asyncio guard: :class:`AsyncIdempotency`.

The same machine as :class:`~firstwrite.idempotency.guard.Idempotency`, driven with ``await``.

It holds a :class:`~._machine.machine.StateMachine` and awaits each effect on an aiobotocore client
(:func:`._machine.driving.adrive`); only ``run``, which awaits your coroutine function, is written here.
So both guards make the same requests, decisions, logs and metrics
(``tests/idempotency/test_parity.py`` runs the same scenarios through both).

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
from typing import Any, ClassVar, Literal, TypeVar

from ._machine import abandon, completion, migration, recovery, table_setup, transactional
from ._machine.budget import Deadline, release_grace, slowest_attempt, spent_before_run
from ._machine.driving import Driver, adrive
from ._machine.machine import Clock, Monotonic, StateMachine
from .config import IdempotencyConfig, from_environment
from .effects import Steps, bind
from .metrics import Metrics
from .outcomes import UNSET, Claim, Outcome, Replay
from .record import Record
from .recovery import RUNNING, AnyHook, RecoveryPoint

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


class AsyncIdempotency(Driver):
    """The asyncio API: ``await guard.claim(...)``, ``await guard.run(key, coro_fn)``...

    The same constructor, methods and attributes as :class:`~.guard.Idempotency`, each method
    awaitable; ``sleep`` is an async sleep; ``reconcile`` may be a coroutine function or a
    blocking one (called in a worker thread)."""

    __slots__ = ("_methods", "_sleep")

    is_async: ClassVar[Literal[True]] = True
    """``True``: an :class:`~.protocols.AsyncGuard`: calls are awaited."""

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
        monotonic: Monotonic = time.monotonic,
        reconcile: AnyHook | None = None,
    ) -> None:
        resolved = from_environment(config) or IdempotencyConfig()
        if client is None:
            from .local import default_client, default_clock

            client = ThreadedClient(default_client(resolved))
            if clock is time.time:  # the local engine's clock is DynamoDB's here
                clock = default_clock()
        machine = migration.install(
            StateMachine(
                resolved,
                clock=clock,
                metrics=metrics,
                non_retryable=non_retryable,
                rng=rng,
                monotonic=monotonic,
            )
        )
        super().__init__(machine, client)
        slowest = slowest_attempt(client)
        self._methods = {op: abandon.aheld(m, slowest) for op, m in bind(client).items()}
        self._sleep = sleep
        recovery.install(machine, reconcile)  # a coroutine function, or a blocking one

    async def _drive(self, steps: Steps[T], deadline: Deadline | None = None) -> T:
        return await adrive(steps, self._methods, self._sleep, deadline)

    async def ensure_table(self) -> bool:
        """See :meth:`~.guard.Idempotency.ensure_table`."""
        return await self._drive(table_setup.ensure_table(self._machine))

    async def claim(
        self,
        key: str,
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        wait: float | None = None,
        budget: float | None = None,
    ) -> Outcome:
        """See :meth:`~.guard.Idempotency.claim`."""
        deadline = self._deadline(budget)
        steps = self._machine.claim(key, payload, scope, lease, wait, deadline)
        return await self._drive(steps, deadline)

    async def complete(
        self, claim: Claim, result: Any = None, *, budget: float | None = None
    ) -> Replay:
        """See :meth:`~.guard.Idempotency.complete`."""
        deadline = self._deadline(budget)
        return await self._drive(
            completion.answered(self._machine, claim, result, deadline), deadline
        )

    async def fail(
        self,
        claim: Claim,
        error: BaseException | str,
        *,
        retryable: bool,
        data: Any = None,
        budget: float | None = None,
    ) -> None:
        """See :meth:`~.guard.Idempotency.fail`."""
        deadline = self._deadline(budget)
        steps = self._machine.fail(claim, error, retryable=retryable, data=data, deadline=deadline)
        await self._drive(steps, deadline)

    async def renew(
        self, claim: Claim, lease: float | None = None, *, budget: float | None = None
    ) -> Claim:
        """See :meth:`~.guard.Idempotency.renew`."""
        deadline = self._deadline(budget)
        return await self._drive(self._machine.renew(claim, lease, deadline), deadline)

    async def mark(
        self,
        claim: Claim,
        step: str,
        reference: str | None = None,
        *,
        budget: float | None = None,
    ) -> RecoveryPoint:
        """See :meth:`~.guard.Idempotency.mark`."""
        deadline = self._deadline(budget)
        steps = recovery.mark(self._machine, claim, step, reference, deadline)
        return await self._drive(steps, deadline)

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
        budget: float | None = None,
    ) -> T:
        """See :meth:`~.guard.Idempotency.run`; ``fn`` is a coroutine function. Cancellation of the
        task marks the key FAILED (retryable), so a retry need not wait for the lease."""
        machine = self._machine
        if machine.config.disabled:
            return await fn()
        deadline = self._deadline(budget)
        outcome = await self._drive(
            machine.claim(key, payload, scope, lease, wait, deadline), deadline
        )
        if isinstance(outcome, Replay):
            value: T = outcome.answer(result_type, machine.config.on_replay)
            return value
        late = spent_before_run(outcome.idempotency_key or key, outcome.record_id, deadline)
        if late is not None:  # the budget is spent: release the claim, never start fn
            assert deadline is not None
            grace = release_grace(deadline)
            await self._drive(machine.fail_quietly(outcome, late, grace), grace)
            raise late
        token = RUNNING.set((self, outcome))
        try:
            result = await fn()
        except BaseException as exc:
            failing = machine.fail_quietly(outcome, exc, deadline)
            await asyncio.shield(self._drive(failing, deadline))
            raise
        finally:
            RUNNING.reset(token)
        await self._drive(completion.complete(machine, outcome, result, False, deadline), deadline)
        return result

    async def claim_with(
        self,
        key: str,
        transact_items: Sequence[dict[str, Any]],
        payload: Any = UNSET,
        *,
        scope: str | None = None,
        lease: float | None = None,
        budget: float | None = None,
    ) -> Outcome:
        """See :meth:`~.guard.Idempotency.claim_with`."""
        deadline = self._deadline(budget)
        steps = transactional.claim_with(
            self._machine, key, transact_items, payload, scope, lease, deadline
        )
        return await self._drive(steps, deadline)

    async def complete_with(
        self,
        claim: Claim,
        transact_items: Sequence[dict[str, Any]],
        result: Any = None,
        *,
        budget: float | None = None,
    ) -> Replay:
        """See :meth:`~.guard.Idempotency.complete_with`."""
        deadline = self._deadline(budget)
        steps = transactional.complete_with(self._machine, claim, transact_items, result, deadline)
        return await self._drive(steps, deadline)

    async def replays(
        self,
        requests: Sequence[tuple[str, Any]],
        *,
        scope: str | None = None,
        budget: float | None = None,
    ) -> list[Replay | None]:
        """See :meth:`~.guard.Idempotency.replays`."""
        deadline = self._deadline(budget)
        return await self._drive(self._machine.replays(requests, scope, deadline), deadline)

    async def get(
        self, key: str, *, scope: str | None = None, budget: float | None = None
    ) -> Record | None:
        """See :meth:`~.guard.Idempotency.get`."""
        deadline = self._deadline(budget)
        return await self._drive(self._machine.get(key, scope, deadline), deadline)
