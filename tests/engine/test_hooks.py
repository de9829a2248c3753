"""The hooks registry and the write route: what features and operations meet through.

* a table hook sees UpdateTimeToLive (action ``ttl``) after the operation's own checks and may
  refuse it, leaving the table as it was;
* a finish hook an operation's table hook registers runs once the call has succeeded;
* sweep hooks run after each background sweep, with the engine clock's time;
* the put route and its hints: bounded, and only ever about cost.
"""

from __future__ import annotations

from typing import Any

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.clock import Clock
from firstwrite.engine.context import Context
from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.engine.operations.write_route import RouteHints, put_route
from firstwrite.engine.storage import TableRow, Writer


def _frozen(at: float) -> Clock:
    clock = Clock()
    clock.freeze(at)
    return clock


def _table(engine: Engine, name: str = "hooks") -> None:
    engine.execute(
        "CreateTable",
        {
            "TableName": name,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


def _ttl(engine: Engine, enabled: bool = True) -> dict[str, Any]:
    return engine.execute(
        "UpdateTimeToLive",
        {
            "TableName": "hooks",
            "TimeToLiveSpecification": {"Enabled": enabled, "AttributeName": "expires_at"},
        },
    )


def test_update_time_to_live_runs_the_table_hooks_and_a_refusal_changes_nothing() -> None:
    seen: list[tuple[str, str]] = []

    def refuse(ctx: Context, w: Writer, row: TableRow, action: str, params: Any) -> TableRow:
        seen.append((action, row.name))
        if action == "ttl":
            raise DynamoDBError("ValidationException", "refused by a hook")
        return row

    with Engine() as engine:
        _table(engine)
        engine.hooks.add_table_hook(refuse)
        with pytest.raises(DynamoDBError, match="refused by a hook"):
            _ttl(engine)
        assert seen == [("ttl", "hooks")]
        assert engine.execute("DescribeTimeToLive", {"TableName": "hooks"}) == {
            "TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}
        }


def test_the_operations_own_checks_come_before_the_hooks() -> None:
    calls: list[str] = []

    def count(ctx: Context, w: Writer, row: TableRow, action: str, params: Any) -> TableRow:
        calls.append(action)
        return row

    with Engine() as engine:
        _table(engine)
        engine.hooks.add_table_hook(count)
        with pytest.raises(DynamoDBError, match="already disabled"):
            _ttl(engine, enabled=False)
        assert calls == []


def test_the_change_interval_rule_is_the_ttl_features() -> None:
    config = TTLConfig(sweep_interval=None, change_interval=3600.0)
    with Engine(clock=_frozen(1_000_000.0), ttl_config=config) as engine:
        _table(engine)
        _ttl(engine)
        with pytest.raises(DynamoDBError, match="modified multiple times"):
            _ttl(engine, enabled=False)
        engine.ttl.configure(change_interval=None)
        assert _ttl(engine, enabled=False)["TimeToLiveSpecification"]["Enabled"] is False


def test_a_finish_hook_registered_by_an_operation_runs_after_success_only() -> None:
    finished: list[tuple[str, bool]] = []

    def on_ttl(ctx: Context, w: Writer, row: TableRow, action: str, params: Any) -> TableRow:
        if action == "ttl":
            ctx.on_finish(lambda c, response, error: finished.append((c.operation, error is None)))
            if not params["TimeToLiveSpecification"]["Enabled"]:
                raise DynamoDBError("ValidationException", "no")
        return row

    with Engine(ttl_config=TTLConfig(sweep_interval=None, change_interval=None)) as engine:
        _table(engine)
        engine.hooks.add_table_hook(on_ttl)
        _ttl(engine)
        assert finished == [("UpdateTimeToLive", True)]
        with pytest.raises(DynamoDBError, match=r"^no$"):
            _ttl(engine, enabled=False)
        assert finished == [("UpdateTimeToLive", True)]


def test_sweep_hooks_run_after_each_sweep_with_the_engine_clock() -> None:
    clock = _frozen(2_000_000.0)
    swept: list[float] = []
    with Engine(clock=clock) as engine:
        engine.hooks.add_sweep_hook(swept.append)
        engine.hooks.add_sweep_hook(swept.append)  # once only
        engine.ttl.sweep_now()
        clock.advance(5)
        engine.ttl.sweep_now()
        assert swept == [2_000_000.0, 2_000_005.0]


def test_stream_records_past_retention_go_at_a_sweep() -> None:
    clock = _frozen(3_000_000.0)
    with Engine(clock=clock) as engine:
        _table(engine)
        engine.execute(
            "UpdateTable",
            {
                "TableName": "hooks",
                "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
            },
        )
        engine.execute("PutItem", {"TableName": "hooks", "Item": {"pk": {"S": "a"}}})
        assert engine.storage.read(lambda r: r.stream_records_before(clock.now() + 1))
        clock.advance(24 * 3600 + 1)
        engine.ttl.sweep_now()
        assert not engine.storage.read(lambda r: r.stream_records_before(clock.now()))


def test_route_hints_are_bounded_and_forget_a_success() -> None:
    hints = RouteHints()
    hints.record(1, "attribute_not_exists(pk)", failed=True)
    assert hints.failed_last(1, "attribute_not_exists(pk)")
    assert not hints.failed_last(2, "attribute_not_exists(pk)")
    hints.record(1, "attribute_not_exists(pk)", failed=False)
    assert not hints.failed_last(1, "attribute_not_exists(pk)")
    for n in range(RouteHints.MAX + 10):
        hints.record(n, "c", failed=True)
    assert len(hints) <= RouteHints.MAX


def test_the_put_route() -> None:
    hints = RouteHints()
    keys = ("pk", None)
    plain = put_route("pk", None, "attribute_not_exists(pk)", keys, 1, hints, quiet=True)
    assert (plain.if_absent, plain.insert_first, plain.autocommit) == (True, False, True)
    watched = put_route("pk", None, "attribute_not_exists(pk)", keys, 1, hints, quiet=False)
    assert (watched.if_absent, watched.autocommit) == (True, False)
    either = put_route(None, "pk", "attribute_not_exists(pk) OR v < :v", keys, 1, hints, True)
    assert (either.if_absent, either.insert_first, either.autocommit) == (False, True, True)
    hints.record(1, "attribute_not_exists(pk) OR v < :v", failed=True)
    again = put_route(None, "pk", "attribute_not_exists(pk) OR v < :v", keys, 1, hints, True)
    assert (again.insert_first, again.autocommit) == (False, False)
    other = put_route("other", None, "attribute_not_exists(other)", keys, 1, hints, True)
    assert (other.if_absent, other.insert_first, other.autocommit) == (False, False, False)


def test_a_duplicate_create_keeps_the_failed_hint_of_its_table() -> None:
    with Engine() as engine:
        _table(engine)
        put = {
            "TableName": "hooks",
            "Item": {"pk": {"S": "k"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        engine.execute("PutItem", put)
        assert len(engine.route_hints) == 0
        with pytest.raises(DynamoDBError, match="conditional request failed"):
            engine.execute("PutItem", put)
        assert len(engine.route_hints) == 1
        engine.execute("DeleteItem", {"TableName": "hooks", "Key": {"pk": {"S": "k"}}})
        engine.execute("PutItem", put)
        assert len(engine.route_hints) == 0
