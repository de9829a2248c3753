"""The idempotency benchmark's libraries: firstwrite, Powertools and idemkit around one function.

Each wraps the same ``charge(order)`` (:class:`Library`) on the client of one :class:`Shared`
engine; the contenders that time them are in :mod:`.idempotency_contenders`.
"""

from __future__ import annotations

import json
import threading
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._calls import CallCounter, CountedClient, Recorded, Replayed, record_calls, replayable
from ._common import create_table, try_import
from .engine_bound import boto3_client

SCENARIOS = ("first call", "duplicate", "in progress")
TIME_TARGET = 0.8  # firstwrite time per request <= 0.8x Powertools
OURS = "firstwrite"
POWERTOOLS = "Powertools"
IDEMKIT = "idemkit"


class Shared:
    """One engine, one client (boto3 bound in process, or the DirectClient), one counter."""

    def __init__(self, directory: Path, *, direct: bool = False) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.engine.binding.sync import bind
        from firstwrite.engine.direct.client import DirectClient

        self.engine = Engine(directory / "idempotency.db", durability="normal")
        self.counter = CallCounter()
        self.client: Any
        if direct:
            self.client = CountedClient(DirectClient(self.engine), self.counter)
        else:
            self.client = bind(boto3_client(), self.engine)
            self.counter.attach(self.client)

    def record(self, fn: Callable[[], Any]) -> list[Recorded]:
        """The DynamoDB calls ``fn()`` makes on the shared client, in order."""
        if isinstance(self.client, CountedClient):
            self.client.recording = recorded = []
            try:
                fn()
            finally:
                self.client.recording = None
            return recorded
        return record_calls(self.client, fn)

    def replayable(self, recorded: list[Recorded], *, fresh: bool) -> list[Replayed]:
        """``recorded`` calls bound to the shared client's methods (:func:`replayable`)."""
        return replayable(self.client, recorded, fresh=fresh)

    def bound_resource(self) -> Any:
        """A boto3 DynamoDB resource whose client answers from the same engine."""
        import boto3

        from firstwrite.engine.binding.sync import bind

        resource = boto3.session.Session(
            aws_access_key_id="AKIDBENCH",
            aws_secret_access_key="bench-secret",
            region_name="us-east-1",
        ).resource("dynamodb", region_name="us-east-1")
        bind(resource.meta.client, self.engine)
        self.counter.attach(resource.meta.client)
        return resource

    def create_table(self, name: str, key: str, *, ttl_attribute: str | None = None) -> None:
        create_table(self.client, name, key, ttl_attribute=ttl_attribute)

    def close(self) -> None:
        self.engine.close()


def make_order(order_id: str, *, block: bool = False) -> dict[str, Any]:
    order: dict[str, Any] = {
        "order_id": order_id,
        "amount": 1000,
        "currency": "EUR",
        "card": "tok_visa",
    }
    if block:
        order["block"] = True
    return order


class Library:
    """One idempotency library wrapping ``charge(order)``; ``in_progress`` is its exception."""

    name: str
    in_progress: tuple[type[BaseException], ...] = ()
    tables: tuple[str, ...] = ()  # the tables its calls go to (what its calls are counted on)

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.entered = threading.Event()
        self.release = threading.Event()

    def body(self, order: dict[str, Any]) -> dict[str, Any]:
        """The side effect: blocks for the in-progress scenario, else returns at once."""
        if order.get("block"):
            self.entered.set()
            self.release.wait(60)
        return {"order_id": order["order_id"], "status": "charged", "amount": order["amount"]}

    def call(self, order: dict[str, Any]) -> Any:
        raise NotImplementedError


class FirstwriteLib(Library):
    name = OURS

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        api = firstwrite_api()
        assert not isinstance(api, str)
        idempotency_cls, config_cls, in_progress = api
        self.in_progress = (in_progress,)
        table = f"firstwrite-{uuid.uuid4().hex[:8]}"
        self.tables = (table,)
        # A live duplicate answered at once, as Powertools and idemkit answer it: the default
        # in-progress wait's own cost is measured apart (bench/budget.py).
        config = config_cls(table_name=table, in_progress_wait=0)
        self.guard = idempotency_cls(config, client=shared.client)
        self.guard.ensure_table()
        from firstwrite import idempotent

        def charge(order: dict[str, Any]) -> dict[str, Any]:
            return self.body(order)

        # Key from order_id, every argument fingerprinted: the decorator's defaults.
        self.charge: Callable[..., Any] = idempotent(self.guard, key="order.order_id")(charge)

    def call(self, order: dict[str, Any]) -> Any:
        return self.charge(order=order)


class PowertoolsLib(Library):
    name = POWERTOOLS

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
        )

        self.in_progress = (IdempotencyAlreadyInProgressError,)
        # Outside Lambda it warns on every claim that it has no remaining-time context.
        warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")
        table = f"powertools-{uuid.uuid4().hex[:8]}"
        self.tables = (table,)
        shared.create_table(table, "id", ttl_attribute="expiration")
        persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=shared.client)
        # Key from order_id, the whole payload validated: what firstwrite does by default.
        config = IdempotencyConfig(event_key_jmespath="order_id", payload_validation_jmespath="@")

        def charge(order: dict[str, Any]) -> dict[str, Any]:
            return self.body(order)

        self.charge: Callable[..., Any] = idempotent_function(
            data_keyword_argument="order", persistence_store=persistence, config=config
        )(charge)

    def call(self, order: dict[str, Any]) -> Any:
        return self.charge(order=order)


class AsyncTable:
    """idemkit's DynamoBackend awaits an aioboto3 Table; this runs boto3's Table inline.

    aioboto3 is not installed (and not ours to add); awaiting a synchronous in-process call
    keeps idemkit's own logic unchanged and adds no I/O wait.
    """

    def __init__(self, table: Any) -> None:
        self._table = table

    async def update_item(self, **kwargs: Any) -> Any:
        return self._table.update_item(**kwargs)

    async def get_item(self, **kwargs: Any) -> Any:
        return self._table.get_item(**kwargs)

    async def delete_item(self, **kwargs: Any) -> Any:
        return self._table.delete_item(**kwargs)

    async def put_item(self, **kwargs: Any) -> Any:
        return self._table.put_item(**kwargs)


class IdemkitLib(Library):
    name = IDEMKIT

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        from idemkit import IdempotencyConflict, MethodConfig, idempotent_sync
        from idemkit.backends.dynamodb import PK, DynamoBackend

        self.in_progress = (IdempotencyConflict,)
        table = f"idemkit-{uuid.uuid4().hex[:8]}"
        self.tables = (table,)
        shared.create_table(table, PK, ttl_attribute="ttl")
        backend = DynamoBackend(table=table, create_table=False)
        backend._table = AsyncTable(shared.bound_resource().Table(table))
        config = MethodConfig(
            key_fields=["order.order_id"],
            validation_fingerprint=lambda args: json.dumps(args["order"], sort_keys=True).encode(),
            scope=lambda _args: "bench",
            wait_timeout_seconds=0.0,  # like the others: answer "in progress" at once
        )

        def charge(order: dict[str, Any]) -> dict[str, Any]:
            return self.body(order)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.charge: Callable[..., Any] = idempotent_sync(backend=backend, config=config)(
                charge
            )

    def call(self, order: dict[str, Any]) -> Any:
        return self.charge(order=order)


def firstwrite_api() -> tuple[Any, Any, type[BaseException]] | str:
    """(Idempotency, IdempotencyConfig, InProgressError) from the public API, or why not."""
    top, why = try_import(
        "firstwrite", "Idempotency", "IdempotencyConfig", "InProgressError", "idempotent"
    )
    if top is None:
        return why or "?"
    return top.Idempotency, top.IdempotencyConfig, top.InProgressError


def idemkit_available() -> str | None:
    mod, why = try_import("idemkit.backends.dynamodb", "DynamoBackend")
    return why if mod is None else None
