"""The engine's clock is DynamoDB's clock: its answers are dated from it, and a client can be
given a clock skewed from it (issue 41, point 2: "the engine can give a client a skewed clock").

DynamoDB dates every answer (``Date``, RFC 9110 IMF-fixdate, whole seconds); the idempotency
layer reads DynamoDB's time from it (docs/guarantees.md, "Clocks"). In process (boto3 and
aiobotocore bound clients, quick path and full stack, successes, final errors and retried
throttles; the direct client) and over HTTP, the ``Date`` is the engine clock's second, frozen or moved, and
``Clock.skewed`` follows every freeze, set and advance of the engine's clock.
"""

from __future__ import annotations

import asyncio
import math
import time
from email.utils import formatdate
from typing import Any

import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.aio import local_aio_client
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.clock import Clock
from firstwrite.engine.server.app import ServerThread

# Far from the wall clock, so that an answer dated from time.time() cannot pass.
STAGED = 1_900_000_000.75


def _date(at: float) -> str:
    return formatdate(int(at), usegmt=True)


def _dated(response: dict[str, Any]) -> str:
    return str(response["ResponseMetadata"]["HTTPHeaders"]["date"])


def _table(client: Any, name: str = "dated") -> None:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def test_a_skewed_clock_follows_every_freeze_set_and_advance_of_the_engines() -> None:
    clock = Clock()
    clock.freeze(STAGED)
    ahead, behind = clock.skewed(40), clock.skewed(-2.5)
    assert (ahead(), behind()) == (STAGED + 40, STAGED - 2.5)
    clock.advance(30)
    assert (ahead(), behind()) == (STAGED + 70, STAGED + 27.5)
    clock.set(1_000.0)
    assert ahead() == 1_040.0
    clock.unfreeze()  # running again, from where it stood: the skew rides along
    assert abs(ahead() - clock.now() - 40) < 0.05
    assert ahead() < time.time()  # still on the engine's (moved) clock, not the wall clock
    clock.reset()
    assert abs(behind() - (time.time() - 2.5)) < 0.05
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="finite number of seconds"):
            clock.skewed(bad)


def test_http_date_is_the_engine_clocks_whole_second() -> None:
    clock = Clock()
    clock.freeze(STAGED)
    assert clock.http_date() == "Sun, 17 Mar 2030 17:46:40 GMT" == _date(STAGED)
    clock.advance(0.24)  # still the same second
    assert clock.http_date() == _date(STAGED)
    clock.advance(0.01)
    assert clock.http_date() == _date(STAGED + 1)


@pytest.mark.parametrize("full_stack", [False, True], ids=["quick", "full-stack"])
def test_in_process_answers_are_dated_by_the_engine_clock(full_stack: bool) -> None:
    with Engine() as engine:
        engine.clock.freeze(STAGED)
        client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
        if full_stack:
            from firstwrite.engine.binding.sync import bind

            bind(client, engine, full_stack=True)
        _table(client)
        put = client.put_item(TableName="dated", Item={"pk": {"S": "a"}})
        assert _dated(put) == _date(STAGED)
        engine.clock.advance(3600)
        with pytest.raises(ClientError) as failed:  # a final error: the quick path's answer
            client.put_item(
                TableName="dated",
                Item={"pk": {"S": "a"}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        assert _dated(failed.value.response) == _date(STAGED + 3600)
        engine.clock.set(1_000_000_000.0)
        engine.faults.throttle(operation="GetItem", table="dated", count=1)
        with pytest.raises(ClientError) as throttled:  # handed to botocore's full path
            client.get_item(TableName="dated", Key={"pk": {"S": "a"}})
        assert throttled.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
        assert _dated(throttled.value.response) == "Sun, 09 Sep 2001 01:46:40 GMT"


def test_direct_client_answers_are_dated_by_the_engine_clock() -> None:
    """The direct client's answers carry the engine clock's ``date`` as the bound clients'
    do: successes, the engine's errors and unsendable requests (it carried none, so a guard
    over it had no estimate of DynamoDB's time)."""
    from firstwrite.engine.direct import DirectClient

    with Engine() as engine:
        engine.clock.freeze(STAGED)
        client = DirectClient(engine)
        _table(client)
        assert _dated(client.put_item(TableName="dated", Item={"pk": {"S": "a"}})) == _date(STAGED)
        engine.clock.advance(3600)
        with pytest.raises(ClientError) as failed:
            client.put_item(
                TableName="dated",
                Item={"pk": {"S": "a"}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        assert failed.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
        assert _dated(failed.value.response) == _date(STAGED + 3600)
        with pytest.raises(ClientError) as unsendable:  # a lone surrogate: refused in process
            client.put_item(TableName="dated", Item={"pk": {"S": "\ud800"}})
        assert _dated(unsendable.value.response) == _date(STAGED + 3600)
        engine.clock.set(1_000_000_000.0)
        assert _dated(client.list_tables()) == "Sun, 09 Sep 2001 01:46:40 GMT"


def test_a_retried_throttle_answer_is_dated_too() -> None:
    with Engine() as engine:
        engine.clock.freeze(STAGED)
        client = local_client(engine, config=Config(retries={"total_max_attempts": 3}))
        _table(client)
        engine.faults.throttle(operation="GetItem", table="dated", count=2)
        got = client.get_item(TableName="dated", Key={"pk": {"S": "a"}})
        assert got["ResponseMetadata"]["RetryAttempts"] == 2  # botocore's retries answered it
        assert _dated(got) == _date(STAGED)


@pytest.mark.parametrize("full_stack", [False, True], ids=["quick", "full-stack"])
def test_aiobotocore_answers_are_dated_by_the_engine_clock(full_stack: bool) -> None:
    async def run(engine: Engine) -> list[str]:
        async with local_aio_client(engine) as client:
            if full_stack:
                from firstwrite.engine.binding.sync import bind

                bind(client, engine, full_stack=True)
            first = await client.list_tables()
            engine.clock.advance(-86_400)
            second = await client.list_tables()
            return [_dated(first), _dated(second)]

    with Engine() as engine:
        engine.clock.freeze(STAGED)
        assert asyncio.run(run(engine)) == [_date(STAGED), _date(STAGED - 86_400)]


def test_over_http_answers_are_dated_by_the_engine_clock_across_uvicorns_ticks() -> None:
    with Engine() as engine:
        engine.clock.freeze(STAGED)
        with ServerThread(engine) as url, httpx.Client(base_url=url) as http:
            target = {"X-Amz-Target": "DynamoDB_20120810.ListTables"}
            headers = {"Content-Type": "application/x-amz-json-1.0", **target}
            seen = set()
            ends = time.monotonic() + 2.3  # past two of uvicorn's once-a-second renewals
            while time.monotonic() < ends:
                seen.add(http.post("/", content=b"{}", headers=headers).headers["date"])
                time.sleep(0.02)
            assert seen == {_date(STAGED)}
            engine.clock.advance(7200)
            answer = http.post("/", content=b"{}", headers=headers)
            assert answer.headers["date"] == _date(STAGED + 7200)
            refused = http.post("/", content=b"not json", headers=headers)  # an error: dated too
            assert refused.status_code == 400
            assert refused.headers["date"] == _date(STAGED + 7200)
            assert [v for k, v in refused.headers.multi_items() if k == "date"] == [
                _date(STAGED + 7200)
            ]
            engine.clock.reset()
            now = time.time()
            dated = http.get("/").headers["date"]
            assert dated in {_date(now), _date(now + 1)}
