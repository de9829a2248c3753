"""The asyncio guard over aiobotocore, against our engine's HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from firstwrite.idempotency.aio import AsyncIdempotency
from firstwrite.idempotency.clock_skew import ClockSkewPolicy
from firstwrite.idempotency.config import IdempotencyConfig
from firstwrite.idempotency.decorators import idempotent
from firstwrite.idempotency.errors import (
    BusinessConditionFailedError,
    InProgressError,
    LostClaimError,
    PayloadMismatchError,
    ReplayedFailureError,
)
from firstwrite.idempotency.guard import Claim, Replay
from firstwrite.idempotency.metrics import CallCounter

from .conftest import OffsetClock


@pytest.fixture
def endpoint(http_server: Any) -> str:
    return str(http_server.url)


@pytest_asyncio.fixture
async def aclient(endpoint: str) -> AsyncIterator[Any]:
    from aiobotocore.session import get_session

    session = get_session()
    async with session.create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
    ) as client:
        yield client


@pytest.fixture
def clock() -> OffsetClock:
    return OffsetClock()


@pytest_asyncio.fixture
async def aguard(
    aclient: Any, clock: OffsetClock, request: pytest.FixtureRequest
) -> AsyncIdempotency:
    import re
    import uuid

    name = re.sub(r"[^a-zA-Z0-9_.-]+", "-", request.node.name)[:180] + uuid.uuid4().hex[:6]
    # The tests move the guard's clock to stand for time passing; on DynamoDB's clock, as the
    # guard estimates it from the answers' Date (the default), it would not pass.
    config = IdempotencyConfig(table_name=name, clock_skew=ClockSkewPolicy(enabled=False))
    guard = AsyncIdempotency(config, client=aclient, clock=clock.now)
    await guard.ensure_table()
    return guard


@pytest.mark.asyncio
async def test_claim_complete_replay_costs(aguard: AsyncIdempotency) -> None:
    with CallCounter(aguard.client) as calls:
        claim = await aguard.claim("a1", {"x": 1})
        assert isinstance(claim, Claim)
        await aguard.complete(claim, {"ok": True})
        assert dict(calls.by_operation) == {"PutItem": 1, "UpdateItem": 1}
        calls.reset()
        replay = await aguard.claim("a1", {"x": 1})
        assert dict(calls.by_operation) == {"PutItem": 1}
    assert isinstance(replay, Replay) and replay.value() == {"ok": True}
    with pytest.raises(PayloadMismatchError) as mismatch:
        await aguard.claim("a1", {"x": 2})
    assert mismatch.value.__context__ is None  # not chained to the failed condition


@pytest.mark.asyncio
async def test_run_fills_the_local_cache(aguard: AsyncIdempotency) -> None:
    cached = AsyncIdempotency(
        IdempotencyConfig(table_name=aguard.config.table_name, local_cache_size=10),
        client=aguard.client,
    )

    async def work() -> dict[str, int]:
        return {"n": 1}

    assert await cached.run("a9", work, {"p": 1}) == {"n": 1}
    with CallCounter(aguard.client) as calls:
        assert await cached.run("a9", work, {"p": 1}) == {"n": 1}  # from the cache
        assert calls.total == 0


@pytest.mark.asyncio
async def test_concurrent_tasks_run_once(aguard: AsyncIdempotency) -> None:
    runs: list[int] = []

    async def work() -> int:
        runs.append(1)
        await asyncio.sleep(0.05)
        return 99

    results = await asyncio.gather(
        *(aguard.run("a2", work, wait=10) for _ in range(10)), return_exceptions=True
    )
    assert runs == [1]
    assert results == [99] * 10


@pytest.mark.asyncio
async def test_in_progress_takeover_and_fencing(
    aguard: AsyncIdempotency, clock: OffsetClock
) -> None:
    stale = await aguard.claim("a3", lease=5)
    assert isinstance(stale, Claim)
    with pytest.raises(InProgressError):
        await aguard.claim("a3")
    clock.advance(6)
    fresh = await aguard.claim("a3")
    assert isinstance(fresh, Claim) and fresh.taken_over
    with pytest.raises(LostClaimError):
        await aguard.complete(stale, "late")
    await aguard.complete(fresh, "fresh")
    assert await aguard.run("a3", _never) == "fresh"


async def _never() -> str:
    raise AssertionError("must not run")


class Final(Exception):
    idempotency_retryable = False


@pytest.mark.asyncio
async def test_failures(aguard: AsyncIdempotency) -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("blip")
        return "ok"

    with pytest.raises(ConnectionError):
        await aguard.run("a4", flaky)
    assert await aguard.run("a4", flaky) == "ok"

    async def final() -> str:
        raise Final("no")

    with pytest.raises(Final):
        await aguard.run("a5", final)
    with pytest.raises(ReplayedFailureError):
        await aguard.run("a5", final)


@pytest.mark.asyncio
async def test_async_decorator(aguard: AsyncIdempotency) -> None:
    runs: list[str] = []

    @idempotent(aguard, key_arg="order_id")
    async def charge(order_id: str, amount: int) -> dict[str, int]:
        runs.append(order_id)
        return {"amount": amount}

    assert await charge("o1", 5) == {"amount": 5}
    assert await charge("o1", amount=5) == {"amount": 5}
    with pytest.raises(PayloadMismatchError):
        await charge("o1", 6)
    assert runs == ["o1"]


@pytest.mark.asyncio
async def test_transactional_claim(aguard: AsyncIdempotency, aclient: Any) -> None:
    table = aguard.config.table_name
    business = {
        "Put": {
            "TableName": table,
            "Item": {"pk": {"S": "ORDER#1"}, "state": {"S": "paid"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }
    claim = await aguard.claim_with("a6", [business])
    assert isinstance(claim, Claim)
    await aguard.complete(claim, "paid")
    replay = await aguard.claim_with("a6", [business])
    assert isinstance(replay, Replay) and replay.value() == "paid"
    with pytest.raises(BusinessConditionFailedError):
        await aguard.claim_with("a7", [business])
    assert await aguard.get("a7") is None
