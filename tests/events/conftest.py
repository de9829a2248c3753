"""Fixtures for firstwrite.events: the layer on the local engine, sample events (the Lambda
context is :class:`firstwrite.testing.events.FakeContext`).

``guard`` is an :class:`~firstwrite.Idempotency` on a fresh engine database through a bound
boto3 client (no sockets; the same client would be real DynamoDB), with its table created and
a :class:`~firstwrite.MemoryMetrics` sink. ``sample(name)`` loads ``tests/events/<name>.json``
(AWS's published sample-event shapes), a fresh copy each time.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency import Idempotency, IdempotencyConfig, MemoryMetrics

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

HERE = Path(__file__).resolve().parent
TABLE = "events-idem"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Any]:
    from firstwrite.engine import Engine

    engine = Engine(str(tmp_path / "events.db"))
    yield engine
    engine.close()


@pytest.fixture
def make_guard(engine: Any) -> Callable[..., Idempotency]:
    from firstwrite.engine import local_client

    client = local_client(engine)

    def make(**config: Any) -> Idempotency:
        config.setdefault("table_name", TABLE)
        guard = Idempotency(
            IdempotencyConfig(**config),
            client=client,
            clock=engine.clock.now,
            metrics=MemoryMetrics(),
        )
        guard.ensure_table()
        return guard

    return make


@pytest.fixture
def guard(make_guard: Callable[..., Idempotency]) -> Idempotency:
    return make_guard()


_SAMPLES: dict[str, Any] = {}


def sample(name: str) -> Any:
    if name not in _SAMPLES:
        _SAMPLES[name] = json.loads((HERE / f"{name}.json").read_text())
    return copy.deepcopy(_SAMPLES[name])


@pytest.fixture(scope="session")
def moto_sqs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real SQS-API server: ``python -m moto.server`` on a free loopback port."""
    from brokers import start_moto

    broker = start_moto(tmp_path_factory.mktemp("moto"))
    yield broker
    broker.stop()


@pytest.fixture
def sqs(moto_sqs: Any) -> Any:
    import boto3

    return boto3.client(
        "sqs",
        endpoint_url=moto_sqs.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def queue_url(sqs: Any, request: pytest.FixtureRequest) -> str:
    import uuid

    name = f"q-{uuid.uuid4().hex[:12]}"
    return str(sqs.create_queue(QueueName=name)["QueueUrl"])


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[Any]:
    """Debian's rabbitmq-server, on a free loopback port, stopped with rabbitmqctl."""
    from brokers import start_rabbitmq
    from tools import need_tool

    need_tool("rabbitmq-server")
    broker = start_rabbitmq()
    yield broker
    broker.stop()
