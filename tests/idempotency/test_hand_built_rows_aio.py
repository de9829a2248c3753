"""Hand-built seed 001 rows (no ``owner``) through the asyncio guard over aiobotocore: the same
state machine as the blocking guard, so the same answers; 8 tasks per key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from firstwrite.idempotency import IdempotencyConfig, InProgressError, RecordLayout
from firstwrite.idempotency.aio import AsyncIdempotency

from .test_hand_built_rows import hand_row
from .test_seed_layout import seed_table


@pytest_asyncio.fixture
async def aclient(http_server: Any) -> AsyncIterator[Any]:
    from aiobotocore.session import get_session

    async with get_session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=str(http_server.url),
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
    ) as client:
        yield client


@pytest.mark.asyncio
async def test_hand_built_rows_through_the_async_guard(
    aclient: Any, make_ddb: Callable[..., Any]
) -> None:
    sync = make_ddb("http")
    table = seed_table(sync)
    now = time.time()
    rows = {
        "live": hand_row("live", "in_progress", claimed=now - 5, expires=now + 3600),
        "abandoned": hand_row("abandoned", "in_progress", claimed=now - 600, expires=now + 3600),
        "done": hand_row("done", "succeeded", claimed=now, expires=now + 3600, result_id="r-1"),
        "failed": hand_row("failed", "failed", claimed=now, expires=now + 3600),
    }
    for row in rows.values():
        sync.put_item(TableName=table, Item=row)
    layout = RecordLayout.seed_001("lower", hold=60)
    guard = AsyncIdempotency(
        IdempotencyConfig(table_name=table, layout=layout, in_progress_wait=2.0), client=aclient
    )
    runs: dict[str, int] = {key: 0 for key in rows}

    def work(key: str) -> Callable[[], Any]:
        async def run() -> str:
            runs[key] += 1
            await asyncio.sleep(0.05)
            return f"ran {key}"

        return run

    answers = {
        key: await asyncio.gather(
            *(guard.run(key, work(key)) for _ in range(8)), return_exceptions=True
        )
        for key in rows
    }
    assert runs == {"live": 0, "abandoned": 1, "done": 0, "failed": 1}
    assert all(isinstance(a, InProgressError) for a in answers["live"])
    assert answers["abandoned"] == ["ran abandoned"] * 8
    assert answers["failed"] == ["ran failed"] * 8
    assert answers["done"] == ["r-1"] * 8
