"""Performing a transition's effects: the blocking driver and the asyncio driver, side by side.

The two drivers are the only place where sync and async differ (``await``, in the one effect
loop of :mod:`firstwrite.idempotency.effects`, whose twins :func:`~firstwrite.idempotency.effects.perform` and :func:`~firstwrite.idempotency.effects.aperform`
throw a failed call's exception into the transition); everything they perform comes from the
:class:`~.machine.StateMachine`. :class:`Driver` is what both public guards share around their
machine: the configuration, the client, the key helpers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..clock_skew import Estimate
from ..config import IdempotencyConfig
from ..effects import Call, Effect, Reconcile, Sleep, Steps, aperform, perform
from ..metrics import Metrics
from ..requests import Key
from . import budget
from .budget import CURRENT, Deadline
from .machine import StateMachine

T = TypeVar("T")


def drive(
    steps: Steps[T],
    methods: dict[str, Any],
    sleep: Callable[[float], Any],
    deadline: Deadline | None = None,
) -> T:
    """Perform ``steps``' effects with blocking calls (:func:`firstwrite.idempotency.effects.perform`: a client
    exception goes back into the transition, which turns answers into data and re-raises the
    rest). ``deadline`` is current (:data:`.budget.CURRENT`) meanwhile, so the client's own
    retries stay inside it."""

    def answer(effect: Effect) -> Any:
        if isinstance(effect, Call):
            return methods[effect.operation](**effect.params)
        if isinstance(effect, Sleep):
            return sleep(effect.seconds)
        return effect.run()

    token = CURRENT.set(deadline)
    try:
        return perform(steps, answer)
    finally:
        CURRENT.reset(token)


async def adrive(
    steps: Steps[T],
    methods: dict[str, Any],
    sleep: Callable[[float], Awaitable[Any]],
    deadline: Deadline | None = None,
) -> T:
    """:func:`drive` with each effect awaited (:func:`firstwrite.idempotency.effects.aperform`)."""

    def answer(effect: Effect) -> Awaitable[Any]:
        if isinstance(effect, Call):
            return methods[effect.operation](**effect.params)  # type: ignore[no-any-return]
        if isinstance(effect, Sleep):
            return sleep(effect.seconds)
        if isinstance(effect, Reconcile):  # the caller's hook, awaited or in a thread
            return effect.arun()
        return asyncio.to_thread(effect.run)  # the store's and the cipher's blocking I/O

    token = CURRENT.set(deadline)
    try:
        return await aperform(steps, answer)
    finally:
        CURRENT.reset(token)


class Driver:
    """What both guards expose besides their transitions."""

    __slots__ = ("_client", "_machine")

    def __init__(self, machine: StateMachine, client: Any) -> None:
        self._machine = machine
        self._client = client
        budget.install(client)
        budget.check_timeouts(client, machine.config.budget)

    def _deadline(self, budget_s: float | None) -> Deadline | None:
        """The deadline of a call starting now: ``budget_s`` seconds, or the configuration's
        ``budget`` when ``None``."""
        seconds = self._machine.config.budget if budget_s is None else budget_s
        return budget.deadline_for(seconds, self._machine.monotonic)

    @property
    def config(self) -> IdempotencyConfig:
        """The (immutable) configuration."""
        return self._machine.config

    @property
    def client(self) -> Any:
        """The DynamoDB client every request goes through."""
        return self._client

    @property
    def metrics(self) -> Metrics:
        """The metrics sink (:class:`~firstwrite.idempotency.metrics.NullMetrics` unless one was given)."""
        return self._machine.metrics

    def clock_estimate(self) -> Estimate | None:
        """DynamoDB's clock minus this guard's, as estimated from the answers so far
        (:mod:`firstwrite.idempotency.clock_skew`); ``None`` before any answer or with the
        estimate off."""
        return self._machine.skew.estimate()

    def record_id(self, key: str, *, scope: str | None = None) -> str:
        """The record's id for ``key`` (its partition key, ``|`` sort key with a sort-key
        layout): what logs and the console call the record."""
        return self._machine.keys.key(key, scope)[1]

    def dynamodb_key(self, key: str, *, scope: str | None = None) -> Key:
        """The record's DynamoDB ``Key`` for ``key``, to read it with your own client."""
        return self._machine.keys.key(key, scope)[0]
