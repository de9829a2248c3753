"""aiobotocore clients bound in process (``engine/binding/aio.py``).

The same calls as ``test_binding_quick.py`` go through a bound aiobotocore client, quick path
and full stack, and through a bound boto3 client: every response and error must be the same.
Then what is particular to asyncio: aiobotocore's own retry handler, ``bind`` on a client
someone else created, and an engine call that may block running off the event loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path
from typing import Any

import pytest
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import ClientError, NoCredentialsError

from firstwrite.engine.api import Context, Engine
from firstwrite.engine.binding.aio import local_aio_client
from firstwrite.engine.binding.steps import FINAL_ERRORS
from firstwrite.engine.binding.sync import bind, local_client
from firstwrite.engine.clock import Clock

_spec = importlib.util.spec_from_file_location(
    "_binding_quick_steps", Path(__file__).with_name("test_binding_quick.py")
)
assert _spec is not None and _spec.loader is not None
quick = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quick)  # its STEPS and normalisation, not its tests

TABLE = quick.TABLE
NO_RETRIES = {"retries": {"total_max_attempts": 1}}


def _clock() -> Clock:
    clock = Clock()
    clock.freeze(1_750_000_000.0)
    return clock


async def _outcome(client: Any, method: str, params: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", quick._normalised(await getattr(client, method)(**params))
    except ClientError as error:
        return type(error).__name__ + ": " + str(error), quick._normalised(error.response)


@pytest.mark.parametrize("full_stack", [False, True], ids=["quick", "full-stack"])
def test_aio_answers_exactly_like_the_boto3_binding(full_stack: bool) -> None:
    sync_engine, aio_engine = Engine(clock=_clock()), Engine(clock=_clock())
    sync = local_client(sync_engine, config=Config(**NO_RETRIES))
    want = [quick._outcome(sync, method, params) for method, params in quick.STEPS]

    async def run() -> list[tuple[str, Any]]:
        async with local_aio_client(aio_engine, config=AioConfig(**NO_RETRIES)) as client:
            bind(client, aio_engine, full_stack=full_stack)
            return [await _outcome(client, method, params) for method, params in quick.STEPS]

    got = asyncio.run(run())
    assert [g[0] for g in got] == [w[0] for w in want]
    assert got == want
    assert sum(g[0] != "ok" for g in got) == 5  # the five errors of STEPS, compared too
    sync_engine.close()
    aio_engine.close()


def _counting(engine: Engine) -> list[str]:
    calls: list[str] = []
    engine.hooks.interceptors.insert(0, lambda ctx: calls.append(ctx.operation))
    return calls


@pytest.mark.parametrize("full_stack", [False, True], ids=["quick", "full-stack"])
def test_throttles_are_retried_by_aiobotocore_one_engine_call_per_attempt(
    full_stack: bool,
) -> None:
    engine = Engine()

    async def run() -> dict[str, Any]:
        config = AioConfig(retries={"mode": "standard", "max_attempts": 3})
        async with local_aio_client(engine, config=config) as client:
            bind(client, engine, full_stack=full_stack)
            await client.create_table(
                TableName=TABLE,
                KeySchema=quick.KEY,
                AttributeDefinitions=quick.ATTRS,
                BillingMode="PAY_PER_REQUEST",
            )
            engine.faults.throttle(operation="PutItem", count=2)
            calls.clear()
            response: dict[str, Any] = await client.put_item(
                TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"N": "1"}}
            )
            return response

    calls = _counting(engine)
    response = asyncio.run(run())
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert calls == ["PutItem"] * 3  # two throttled attempts and the one that wrote
    engine.close()


def test_a_throttle_with_retries_off_is_raised_after_one_engine_call() -> None:
    engine = Engine()

    async def run() -> ClientError:
        async with local_aio_client(engine, config=AioConfig(**NO_RETRIES)) as client:
            await client.create_table(
                TableName=TABLE,
                KeySchema=quick.KEY,
                AttributeDefinitions=quick.ATTRS,
                BillingMode="PAY_PER_REQUEST",
            )
            engine.faults.throttle(operation="PutItem", count=1)
            calls.clear()
            with pytest.raises(ClientError) as info:
                await client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"N": "1"}})
            return info.value

    calls = _counting(engine)
    error = asyncio.run(run())
    assert error.response["Error"]["Code"] not in FINAL_ERRORS
    assert calls == ["PutItem"]
    engine.close()


def test_bind_works_on_a_client_someone_else_created() -> None:
    # The issue: bind() on an aiobotocore client used to fail with a coroutine error.
    engine = Engine()

    async def run() -> list[str]:
        session = get_session()
        async with session.create_client(
            "dynamodb",
            region_name="eu-west-1",
            endpoint_url="http://127.0.0.1:9",  # nothing listens: only the engine can answer
            aws_access_key_id="AKIDAIO",
            aws_secret_access_key="aio-secret",
        ) as client:
            bind(client, engine)
            await client.create_table(
                TableName=TABLE,
                KeySchema=quick.KEY,
                AttributeDefinitions=quick.ATTRS,
                BillingMode="PAY_PER_REQUEST",
            )
            names: list[str] = (await client.list_tables())["TableNames"]
            return names

    assert asyncio.run(run()) == [TABLE]
    assert engine.execute("ListTables", {}, region="eu-west-1")["TableNames"] == [TABLE]
    engine.close()


@pytest.mark.parametrize("full_stack", [False, True], ids=["quick", "full-stack"])
def test_no_credentials_fail_as_aiobotocore_fails(full_stack: bool) -> None:
    engine = Engine()

    async def run() -> None:
        async with local_aio_client(engine) as client:
            bind(client, engine, full_stack=full_stack)
            client._request_signer._credentials = None  # what aiobotocore holds when it found none
            with pytest.raises(NoCredentialsError):
                await client.list_tables()

    asyncio.run(run())
    engine.close()


def test_streams_clients_bind_too() -> None:
    engine = Engine()

    async def run() -> list[str]:
        async with local_aio_client(engine) as ddb:
            await ddb.create_table(**quick.STEPS[0][1])
            await ddb.put_item(TableName=TABLE, Item=quick.ITEM)
            arn = (await ddb.describe_table(TableName=TABLE))["Table"]["LatestStreamArn"]
        async with local_aio_client(engine, service_name="dynamodbstreams") as streams:
            [shard] = (await streams.describe_stream(StreamArn=arn))["StreamDescription"]["Shards"]
            iterator = (
                await streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )
            )["ShardIterator"]
            records = (await streams.get_records(ShardIterator=iterator))["Records"]
            assert records[0]["dynamodb"]["NewImage"]["blob"] == {"B": b"\x00\xff"}
            return [r["eventName"] for r in records]

    assert asyncio.run(run()) == ["INSERT"]
    engine.close()


def test_an_engine_call_that_may_block_runs_off_the_event_loop() -> None:
    # While a fault is switched on, a call may sleep (injected latency): it must not stall the
    # loop. This interceptor blocks until another task on the loop sets the event; inline on
    # the loop, that task could never run and the wait would time out.
    engine = Engine()
    released = threading.Event()
    waited: list[bool] = []

    def hold(ctx: Context) -> None:
        if ctx.operation == "ListTables":
            waited.append(released.wait(timeout=30))

    async def run() -> None:
        async with local_aio_client(engine) as client:
            engine.hooks.interceptors.append(hold)
            call = asyncio.ensure_future(client.list_tables())
            await asyncio.sleep(0)
            released.set()  # runs while the call is in flight
            assert (await call)["TableNames"] == []

    asyncio.run(run())
    assert waited == [True]
    engine.close()


def test_local_aio_client_without_an_engine_owns_a_fresh_one() -> None:
    async def run() -> list[str]:
        async with local_aio_client() as client:
            await client.create_table(
                TableName=TABLE,
                KeySchema=quick.KEY,
                AttributeDefinitions=quick.ATTRS,
                BillingMode="PAY_PER_REQUEST",
            )
        async with local_aio_client() as client:  # another engine: the table is not there
            names: list[str] = (await client.list_tables())["TableNames"]
            return names

    assert asyncio.run(run()) == []
