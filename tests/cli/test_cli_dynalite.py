"""``table create``, ``race`` and the layer against dynalite 4.0.0 (pinned in
tests/cli/dynalite/package-lock.json, installed with ``npm ci``, started here): an endpoint
with DescribeTimeToLive but no UpdateTimeToLive, that ignores
``ReturnValuesOnConditionCheckFailure``. TTL is skipped with a warning, and ``race`` reports the
missing item apart from any violation."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

import independent_dynamodb
from firstwrite.cli.race_verdict import NO_ITEMS

pytestmark = [
    pytest.mark.needs_tool("node", "npm"),
    pytest.mark.slow,
    pytest.mark.xdist_group("dynalite"),  # one npm ci at a time in tests/cli/dynalite
]
NO_TTL = "has no UpdateTimeToLive: TTL not enabled on expires_at"


@pytest.fixture(scope="module")
def dynalite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A dynalite server (in memory) on a free port, stopped at teardown; its URL."""
    with independent_dynamodb.dynalite(tmp_path_factory.mktemp("dynalite")) as url:
        yield url


def _client(url: str) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="firstwrite",
        aws_secret_access_key="local",
    )


def test_the_endpoint_is_what_this_file_is_about(dynalite: str) -> None:
    """dynalite answers DescribeTimeToLive but not UpdateTimeToLive, and returns no item on a
    failed condition although asked to: if a later dynalite changes that, these tests no longer
    test the missing features."""
    client = _client(dynalite)
    client.create_table(
        TableName="probe",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName="probe")
    ttl = client.describe_time_to_live(TableName="probe")["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "DISABLED"
    with pytest.raises(client.exceptions.ClientError) as unknown:
        client.update_time_to_live(
            TableName="probe",
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
        )
    assert unknown.value.response["Error"]["Code"] == "UnknownOperationException"
    put = {"TableName": "probe", "Item": {"pk": {"S": "a"}}}
    client.put_item(**put)
    with pytest.raises(client.exceptions.ConditionalCheckFailedException) as failed:
        client.put_item(
            **put,
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert "Item" not in failed.value.response
    client.delete_table(TableName="probe")


def test_table_create_skips_ttl_with_a_warning(
    cli: Callable[..., Any], dynalite: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = cli("table", "create", "--endpoint-url", dynalite, "--table", "dyn-created")
    assert first.code == 0, first.err
    assert f"table dyn-created created at {dynalite}" in first.out
    assert f"warning: {dynalite} {NO_TTL}" in first.out
    # said once: not again by the layer's own log line (stderr, in a terminal)
    assert "TTL is not supported" not in caplog.text
    assert "TTL            DISABLED" in first.out
    assert "(this endpoint cannot enable it)" in first.out
    again = cli("table", "create", "--endpoint-url", dynalite, "--table", "dyn-created", "--json")
    assert again.code == 0, again.err
    report = again.json()
    assert report["created"] is False
    assert report["ttl"] == {"status": "DISABLED", "attribute": None}
    assert any(NO_TTL in warning for warning in report["warnings"])


def test_race_in_a_temporary_table(cli: Callable[..., Any], dynalite: str) -> None:
    result = cli("race", "--endpoint-url", dynalite, "--keys", "4", "--threads", "3")
    assert result.code == 0, result.out + result.err
    assert f"warning: {dynalite} {NO_TTL}" in result.out
    assert NO_ITEMS in result.out
    assert "VIOLATED" not in result.out
    assert "first-writer-wins held: one winner per key, every loser got " in result.out
    assert "ConditionalCheckFailedException, the stored item is the winner's" in result.out
    client = _client(dynalite)
    for name in client.list_tables()["TableNames"]:  # dynalite lists a table while DELETING
        if name.startswith("firstwrite-race-"):
            client.get_waiter("table_not_exists").wait(
                TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 10}
            )


def test_race_from_processes_in_an_existing_table(
    run_cli: Callable[..., Any], dynalite: str
) -> None:
    created = run_cli("table", "create", "--endpoint-url", dynalite, "--table", "dyn-race")
    assert created.code == 0, created.err
    result = run_cli(
        "race",
        "--endpoint-url",
        dynalite,
        "--table",
        "dyn-race",
        "--processes",
        "2",
        "--threads",
        "2",
        "--keys",
        "5",
        "--json",
    )
    assert result.code == 0, result.out + result.err
    report = result.json()
    assert report["items_returned"] is False
    assert report["first_writer_wins"] is True
    assert report["violations"] == {} and report["errors"] == {}
    assert report["winners"] == report["keys_with_one_winner"] == report["stored_is_winner"] == 5
    assert report["losers"] == 5 * 3 and report["losers_with_item"] == 0
    assert report["warnings"] == []  # the table was there: no TTL set-up by the race


def test_the_layer_runs_once_and_replays(cli: Callable[..., Any], dynalite: str) -> None:
    """The layer's own claims: a duplicate's failed condition carries no item, so the layer
    reads it, and replays the stored result."""
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    assert cli("table", "create", "--endpoint-url", dynalite, "--table", "dyn-layer").code == 0
    guard = Idempotency(IdempotencyConfig(table_name="dyn-layer"), client=_client(dynalite))
    calls: list[str] = []

    def charge() -> dict[str, str]:
        calls.append("charged")
        return {"charge": "ch_1"}

    assert guard.run("order-1", charge, {"amount": 5}) == {"charge": "ch_1"}
    assert guard.run("order-1", charge, {"amount": 5}) == {"charge": "ch_1"}
    assert calls == ["charged"]


def test_the_layers_ensure_table_skips_ttl_it_cannot_enable(
    dynalite: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``Idempotency.ensure_table`` itself (not only the CLI) takes an endpoint that describes
    TTL but cannot enable it: the table is made, and the missing TTL is logged, not raised."""
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    guard = Idempotency(IdempotencyConfig(table_name="dyn-ensure"), client=_client(dynalite))
    with caplog.at_level(logging.WARNING, logger="firstwrite.idempotency"):
        assert guard.ensure_table() is True
    assert "TTL is not supported by this endpoint" in caplog.text
    assert guard.ensure_table() is False
    assert guard.run("order-1", lambda: {"ok": 1}, {"n": 1}) == {"ok": 1}
