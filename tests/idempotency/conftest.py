"""Fixtures for the idempotency tests: our engine, reached only through boto3, and its clock.

Every test uses only the low-level boto3 client API, so the same test would run on DynamoDB.
The multi-process and asyncio tests go over HTTP (the shared ``http_server`` fixture).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from firstwrite.idempotency.config import IdempotencyConfig
from firstwrite.idempotency.guard import Idempotency

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


class OffsetClock:
    """For clients of the HTTP server (another process, whose engine clock a test cannot move):
    wall time plus an offset the test moves. The layer's decisions use only this clock."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> float:
        self.offset += seconds
        return self.now()


@dataclass
class Backend:
    name: str
    client: Any
    now: Callable[[], float]
    advance: Callable[[float], float]
    db_path: str | None = None
    engine: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def new_client(self, **kwargs: Any) -> Any:
        """Another client on the same database (for the engine: a fresh boto3 binding)."""
        if self.engine is not None:
            from firstwrite.engine.binding.sync import local_client

            return local_client(self.engine, region=kwargs.pop("region", "us-east-1"), **kwargs)
        raise RuntimeError("no engine")

    def guard(self, config: IdempotencyConfig | None = None, **kwargs: Any) -> Idempotency:
        kwargs.setdefault("clock", self.now)
        return Idempotency(
            config or IdempotencyConfig(table_name=TABLE), client=self.client, **kwargs
        )


TABLE = "idem"


@pytest.fixture
def backend(tmp_path: Any) -> Iterator[Backend]:
    """Our engine on a database file, through a real boto3 client bound in-process (the whole
    botocore stack: serialisation to DynamoDB JSON, parsing, exceptions; no sockets)."""
    from firstwrite.engine.api import Engine
    from firstwrite.engine.binding.sync import local_client

    path = str(tmp_path / "engine.db")
    engine = Engine(path)
    client = local_client(engine, region="us-east-1")
    yield Backend("engine", client, engine.clock.now, engine.clock.advance, path, engine)
    engine.close()


def create_table(client: Any, config: IdempotencyConfig) -> None:
    """The layer's own ``ensure_table`` (on-demand, TTL on ``expires_at``)."""
    Idempotency(config, client=client).ensure_table()


@pytest.fixture
def table(backend: Backend) -> str:
    create_table(backend.client, IdempotencyConfig(table_name=TABLE))
    return TABLE


@pytest.fixture
def guard(backend: Backend, table: str) -> Idempotency:
    return backend.guard()
