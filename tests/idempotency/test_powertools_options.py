"""Powertools' idempotency options, firstwrite's way, through the real layer on the engine:
a request without a key (``on_missing_key``), the switch that disables the layer for local runs
(``FIRSTWRITE_IDEMPOTENCY_DISABLED``), and the hook on replays (``on_replay``), sync and async."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from event_samples import FakeContext, http_event
from firstwrite.idempotency import config as config_module
from firstwrite.idempotency.aio import AsyncIdempotency, ThreadedClient
from firstwrite.idempotency.config import DISABLED_ENV, IdempotencyConfig
from firstwrite.idempotency.decorators import idempotent, idempotent_handler
from firstwrite.idempotency.errors import (
    ConfigurationError,
    MissingKeyError,
    ReplayedFailureError,
)
from firstwrite.idempotency.guard import Idempotency
from firstwrite.idempotency.metrics import MemoryMetrics

from .conftest import TABLE, Backend

UNGUARDED = "firstwrite_unguarded_runs_total"


def _records(backend: Backend) -> int:
    return int(backend.client.scan(TableName=TABLE)["Count"])


def _async_guard(backend: Backend, config: IdempotencyConfig, **kwargs: Any) -> AsyncIdempotency:
    return AsyncIdempotency(
        config, client=ThreadedClient(backend.client), clock=backend.now, **kwargs
    )


# -- on_missing_key ------------------------------------------------------------------------------


def test_a_request_without_a_key_raises_by_default(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    guard = backend.guard(metrics=metrics)
    assert guard.config.on_missing_key == "raise"
    runs: list[int] = []

    @idempotent_handler(guard, key="body.order_id")
    def handler(event: dict[str, Any], context: Any) -> None:
        runs.append(1)

    answer = handler(http_event("api_gateway_v2", {"amount": 5}), FakeContext())
    assert answer["statusCode"] == 400  # an HTTP event: answered as the middleware does
    assert "idempotency-key-missing" in answer["body"]

    @idempotent_handler(guard, key="body.order_id", on_error="raise")
    def raising(event: dict[str, Any], context: Any) -> None:
        runs.append(1)

    with pytest.raises(MissingKeyError):
        raising(http_event("api_gateway_v2", {"amount": 5}), FakeContext())
    assert runs == [] and metrics.total(UNGUARDED) == 0


def test_run_unguarded_runs_warns_and_counts(
    backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = MemoryMetrics()
    config = IdempotencyConfig(table_name=TABLE, on_missing_key="run-unguarded")
    guard = backend.guard(config, metrics=metrics)
    runs: list[str] = []

    @idempotent_handler(guard, key="body.order_id")
    def handler(event: dict[str, Any], context: Any) -> str:
        runs.append("handler")
        return "ran"

    @idempotent(guard, key="order.id")
    def charge(order: dict[str, Any]) -> str:
        runs.append("charge")
        return "charged"

    keyless = http_event("alb", {"amount": 5}, "base64+gzip")
    with caplog.at_level(logging.WARNING, logger="firstwrite.idempotency"):
        assert handler(keyless, FakeContext()) == handler(keyless, FakeContext()) == "ran"
        assert charge({"amount": 1}) == "charged"
    assert runs == ["handler", "handler", "charge"]  # every call ran: nothing guarded them
    assert metrics.total(UNGUARDED, reason="missing_key") == 3
    warnings = [r for r in caplog.records if "runs unguarded" in r.getMessage()]
    assert len(warnings) == 3 and all(r.levelno == logging.WARNING for r in warnings)
    assert _records(backend) == 0
    # A request with a key is still guarded.
    keyed = http_event("alb", {"order_id": "o-1"}, "base64+gzip")
    assert handler(keyed, FakeContext()) == handler(keyed, FakeContext()) == "ran"
    assert runs.count("handler") == 3 and _records(backend) == 1


def test_run_unguarded_async(backend: Backend, table: str) -> None:
    metrics = MemoryMetrics()
    config = IdempotencyConfig(table_name=TABLE, on_missing_key="run-unguarded")
    aguard = _async_guard(backend, config, metrics=metrics)
    sync_guard = backend.guard(config, metrics=metrics)
    runs: list[str] = []

    @idempotent_handler(aguard, key="body.order_id")
    async def handler(event: dict[str, Any], context: Any) -> str:
        runs.append("async guard")
        return "ran"

    @idempotent(sync_guard, key_arg="order_id")
    async def charge(order_id: str) -> str:
        runs.append("sync guard")
        return "charged"

    async def main() -> None:
        event = http_event("function_url", {"amount": 5})
        assert await handler(event, FakeContext()) == await handler(event, FakeContext())
        assert await charge("") == await charge("") == "charged"

    asyncio.run(main())
    assert runs == ["async guard"] * 2 + ["sync guard"] * 2
    assert metrics.total(UNGUARDED) == 4 and _records(backend) == 0


def test_on_missing_key_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="on_missing_key"):
        IdempotencyConfig(on_missing_key="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="on_replay"):
        IdempotencyConfig(on_replay="mark")  # type: ignore[arg-type]


# -- FIRSTWRITE_IDEMPOTENCY_DISABLED ------------------------------------------------------------


@pytest.fixture
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_module, "_warned_disabled", False)


@pytest.mark.usefixtures("fresh_warning")
def test_the_switch_makes_guards_call_functions_directly(
    backend: Backend, table: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(DISABLED_ENV, "1")
    with caplog.at_level(logging.WARNING, logger="firstwrite.idempotency"):
        guard = backend.guard()
        aguard = _async_guard(backend, IdempotencyConfig(table_name=TABLE))
    assert guard.config.disabled and aguard.config.disabled
    said = [r for r in caplog.records if DISABLED_ENV in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING  # once, for both guards
    runs: list[str] = []

    @idempotent_handler(guard, key="body.order_id")
    def handler(event: dict[str, Any], context: Any) -> None:
        runs.append("handler")

    assert guard.run("k", lambda: runs.append("run")) is None
    guard.run("k", lambda: runs.append("run"))
    handler(http_event("api_gateway_v1", {"order_id": "o-1"}), FakeContext())
    handler(http_event("api_gateway_v1", {"order_id": "o-1"}), FakeContext())
    handler(http_event("api_gateway_v1", {}), FakeContext())  # no key: no error either

    async def arun() -> None:
        async def work() -> None:
            runs.append("async")

        await aguard.run("k", work)
        await aguard.run("k", work)

    asyncio.run(arun())
    assert runs == ["run", "run", "handler", "handler", "handler", "async", "async"]
    assert _records(backend) == 0
    # Read at construction: unsetting it later changes nothing for these guards.
    monkeypatch.delenv(DISABLED_ENV)
    guard.run("k", lambda: runs.append("run"))
    assert runs.count("run") == 3 and _records(backend) == 0


@pytest.mark.usefixtures("fresh_warning")
@pytest.mark.parametrize("value", ["0", "", "false", "no"])
def test_the_switch_is_read_at_construction_and_only_when_true(
    backend: Backend, table: str, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(DISABLED_ENV, value)
    guard = backend.guard()
    assert not guard.config.disabled
    monkeypatch.setenv(DISABLED_ENV, "true")  # too late for this guard
    runs: list[int] = []
    assert guard.run("k", lambda: runs.append(1) or 1) == guard.run("k", lambda: 2) == 1
    assert runs == [1] and _records(backend) == 1
    assert backend.guard().config.disabled  # a guard built now is disabled


# -- on_replay -----------------------------------------------------------------------------------


class Marks:
    """An ``on_replay`` hook that records its calls and marks dict results."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, key: str, value: Any) -> Any:
        self.calls.append((key, value))
        if isinstance(value, dict):
            return {**value, "replayed": True}
        return None  # keep the value


def test_on_replay_is_called_once_per_replay_never_on_a_first_run(
    backend: Backend, table: str
) -> None:
    marks = Marks()
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, on_replay=marks))
    assert guard.run("a", lambda: {"n": 1}) == {"n": 1}
    assert marks.calls == []
    assert guard.run("a", lambda: {"n": 2}) == {"n": 1, "replayed": True}
    assert guard.run("a", lambda: {"n": 3}) == {"n": 1, "replayed": True}
    assert marks.calls == [("a", {"n": 1}), ("a", {"n": 1})]
    # A hook answering None leaves the value as it is.
    assert guard.run("b", lambda: 7) == 7
    assert guard.run("b", lambda: 8) == 7
    assert marks.calls[-1] == ("b", 7) and len(marks.calls) == 3


def test_on_replay_through_the_lambda_decorator(backend: Backend, table: str) -> None:
    marks = Marks()
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, on_replay=marks))

    @idempotent_handler(guard, key="body.order_id")
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"statusCode": 201, "headers": {}}

    event = http_event("api_gateway_v2", {"order_id": "o-9"}, "base64")
    assert handler(event, FakeContext()) == {"statusCode": 201, "headers": {}}
    assert handler(event, FakeContext())["replayed"] is True
    assert [key for key, _ in marks.calls] == ["o-9"]


def test_on_replay_is_not_called_for_a_replayed_failure(backend: Backend, table: str) -> None:
    class Declined(Exception):
        idempotency_retryable = False

    marks = Marks()
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, on_replay=marks))

    def decline() -> None:
        raise Declined("no")

    with pytest.raises(Declined):
        guard.run("f", decline)
    with pytest.raises(ReplayedFailureError):
        guard.run("f", decline)
    assert marks.calls == []


def test_on_replay_with_the_local_cache_is_still_once_per_replay(
    backend: Backend, table: str
) -> None:
    marks = Marks()
    config = IdempotencyConfig(table_name=TABLE, on_replay=marks, local_cache_size=8)
    guard = backend.guard(config)
    guard.run("c", lambda: {"v": 1})
    for _ in range(3):
        assert guard.run("c", lambda: {"v": 2}) == {"v": 1, "replayed": True}
    assert len(marks.calls) == 3


def test_on_replay_async(backend: Backend, table: str) -> None:
    marks = Marks()
    config = IdempotencyConfig(table_name=TABLE, on_replay=marks)
    aguard = _async_guard(backend, config)
    sync_guard: Idempotency = backend.guard(config)

    @idempotent(sync_guard, key_arg="order_id")  # a coroutine function over a sync guard
    async def charge(order_id: str) -> dict[str, str]:
        return {"order": order_id}

    async def main() -> None:
        async def first() -> dict[str, int]:
            return {"n": 1}

        async def again() -> dict[str, int]:
            return {"n": 2}

        assert await aguard.run("x", first) == {"n": 1}
        assert marks.calls == []
        assert await aguard.run("x", again) == {"n": 1, "replayed": True}
        assert await charge("o-1") == {"order": "o-1"}
        assert len(marks.calls) == 1
        assert await charge("o-1") == {"order": "o-1", "replayed": True}

    asyncio.run(main())
    assert marks.calls == [("x", {"n": 1}), ("o-1", {"order": "o-1"})]
