"""How features plug into the engine: one explicit list, one install/start/close protocol, hooks.

Tags, streams, TTL, regions, indexes, backups and faults are :class:`~firstwrite.engine.context.Feature` objects
the engine lists where it is built; they register hooks through the engine's hook API and
nothing else. The reader hook is how an interceptor changes what eventually consistent reads
see, without the operations knowing who set it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.context import Context, Feature
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.features.backups import Backups
from firstwrite.engine.features.faults.injector import FaultInjector
from firstwrite.engine.features.indexes.maintenance import Indexes
from firstwrite.engine.features.insights import ContributorInsights
from firstwrite.engine.features.policies import ResourcePolicies
from firstwrite.engine.features.regions import Replication
from firstwrite.engine.features.streams import Streams
from firstwrite.engine.features.tags import Tags
from firstwrite.engine.features.ttl import TimeToLive, TTLConfig

FEATURES = (
    Tags,
    ResourcePolicies,
    Streams,
    TimeToLive,
    Replication,
    Indexes,
    Backups,
    FaultInjector,
    ContributorInsights,
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with Engine(tmp_path / "features.db") as engine:
        yield engine


def _table(client: DirectClient) -> None:
    client.create_table(
        TableName="tbl",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def test_the_engine_lists_its_features_in_hook_order(engine: Engine) -> None:
    assert [type(f) for f in engine.features] == list(FEATURES)
    assert all(isinstance(f, Feature) for f in engine.features)
    assert engine.features == (
        engine.tags,
        engine.policies,
        engine.streams,
        engine.ttl,
        engine.replication,
        engine.indexes,
        engine.backups,
        engine.faults,
        engine.insights,
    )
    # The hooks in force are the features' own, in the listed order (faults: none until used).
    owners = [getattr(h, "__self__", None) or h.__module__ for h in engine.hooks.change_hooks]
    assert owners == [
        "firstwrite.engine.features.streams",
        "firstwrite.engine.features.ttl",
        engine.replication,
        engine.indexes,
        "firstwrite.engine.features.backups",
    ]
    assert [h.__module__ for h in engine.hooks.table_hooks] == [
        "firstwrite.engine.features.tags",
        "firstwrite.engine.features.policies",
        "firstwrite.engine.features.streams",
        "firstwrite.engine.features.ttl",
        "firstwrite.engine.features.regions",
        "firstwrite.engine.features.indexes.maintenance",
        "firstwrite.engine.features.backups",
        "firstwrite.engine.features.insights",
    ]
    assert engine.hooks.interceptors == []  # insights' only while a table has them enabled


def test_every_feature_is_installed_before_any_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    steps: list[tuple[str, str]] = []
    for cls in FEATURES:
        for step in ("install", "start", "close"):
            original = getattr(cls, step)

            def record(self: Any, *args: Any, _step: str = step, _original: Any = original) -> Any:
                steps.append((type(self).__name__, _step))
                return _original(self, *args)

            monkeypatch.setattr(cls, step, record)
    Engine(tmp_path / "order.db").close()
    names = [cls.__name__ for cls in FEATURES]
    assert steps == [
        *((name, "install") for name in names),
        *((name, "start") for name in names),
        *((name, "close") for name in reversed(names)),
    ]


def test_closing_the_engine_stops_the_background_work(tmp_path: Path) -> None:
    engine = Engine(tmp_path / "close.db", ttl_config=TTLConfig(sweep_interval=0.05))
    sweeper = engine.ttl._thread
    assert sweeper is not None and sweeper.is_alive()
    engine.close()
    assert not sweeper.is_alive()


def test_hooks_are_replaced_not_changed_in_place(engine: Engine) -> None:
    """A call iterates the list it read: adding or removing a hook makes a new list."""
    before = engine.hooks.interceptors

    def intercept(ctx: Context) -> None:
        pass

    engine.hooks.add_interceptor(intercept)
    engine.hooks.add_interceptor(intercept)  # once only
    assert before == [] and engine.hooks.interceptors == [intercept]
    during = engine.hooks.interceptors
    engine.hooks.remove_interceptor(intercept)
    assert during == [intercept] and engine.hooks.interceptors == []


def test_a_hook_without_a_watch_makes_every_table_loud(engine: Engine) -> None:
    client = DirectClient(engine)
    _table(client)
    row = engine.storage.cached_table(engine.default_region, "tbl")
    assert row is not None and engine.hooks.quiet(row)  # streams, TTL and replication ignore it
    seen: list[str] = []

    def hook(ctx: Context, w: Any, row: Any, old: Any, new: Any) -> None:
        seen.append(ctx.operation)

    engine.hooks.add_change_hook(hook)
    assert not engine.hooks.quiet(row)
    client.put_item(
        TableName="tbl", Item={"pk": {"S": "k"}}, ConditionExpression="attribute_not_exists(pk)"
    )
    assert seen == ["PutItem"]  # the single-statement path would have skipped the hook
    engine.hooks.remove_change_hook(hook)
    assert engine.hooks.quiet(row)


class _Past:
    """A reader that answers every item read with one fixed item."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def get(self, table_id: int, pk: bytes, sk: bytes = b"") -> dict[str, Any]:
        return {"pk": {"S": "k"}, "v": {"S": "as the hook sees it"}}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def test_eventually_consistent_reads_go_through_the_calls_reader_hook(engine: Engine) -> None:
    client = DirectClient(engine)
    _table(client)
    client.put_item(TableName="tbl", Item={"pk": {"S": "k"}, "v": {"S": "stored"}})

    def intercept(ctx: Context) -> None:
        if ctx.operation == "GetItem":
            ctx.reader_hook = _Past

    engine.hooks.add_interceptor(intercept)
    key = {"pk": {"S": "k"}}
    eventual = client.get_item(TableName="tbl", Key=key)
    strong = client.get_item(TableName="tbl", Key=key, ConsistentRead=True)
    assert eventual["Item"]["v"] == {"S": "as the hook sees it"}
    assert strong["Item"]["v"] == {"S": "stored"}  # a strongly consistent read never is
    engine.hooks.remove_interceptor(intercept)
    assert client.get_item(TableName="tbl", Key=key)["Item"]["v"] == {"S": "stored"}
