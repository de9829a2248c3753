"""``firstwrite table create|describe`` on the local engine in process and over HTTP, and the
one-line errors of every command that talks to DynamoDB (shown here on ``table describe``)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from firstwrite.engine import Engine, local_client


def test_create_then_describe_on_the_default_local_database(
    cli: Callable[..., Any], clean_env: dict[str, str]
) -> None:
    first = cli("table", "create", "--json")
    assert first.code == 0, first.err
    info = first.json()
    assert info["created"] is True
    assert info["partition_key"] == {"name": "pk", "type": "S"}
    assert info["billing_mode"] == "PAY_PER_REQUEST"
    assert info["ttl"] == {"status": "ENABLED", "attribute": "expires_at"}
    assert info["problems"] == [] and info["warnings"] == []
    assert Path(clean_env["FIRSTWRITE_LOCAL_DB"]).exists()

    again = cli("table", "create")
    assert again.code == 0
    assert "already exists" in again.out

    described = cli("table", "describe")
    assert described.code == 0
    assert "TTL            ENABLED on expires_at" in described.out
    assert "ok: the table suits the idempotency layer" in described.out
    assert "warning" not in described.out


def test_create_with_a_sort_key_and_a_name(cli: Callable[..., Any], tmp_path: Path) -> None:
    db = str(tmp_path / "app.db")
    result = cli("table", "create", "--db", db, "--table", "idem-sk", "--sort-key", "sk", "--json")
    assert result.code == 0, result.err
    assert result.json()["sort_key"] == {"name": "sk", "type": "S"}
    [warning] = result.json()["warnings"]
    assert "one partition per scope" in warning and "KeyRangeThroughputExceeded" in warning
    described = cli("table", "describe", "--db", db, "--table", "idem-sk")
    assert described.code == 0  # a warning, not a problem
    assert "warning: with a sort key the layer writes one partition per scope" in described.out
    assert "ok: the table suits the idempotency layer" in described.out
    assert cli("table", "create", "--db", db, "--table", "x").code == 2  # invalid table name


def test_over_http_against_engine_serve(
    cli: Callable[..., Any], cli_server: Callable[..., Any]
) -> None:
    server = cli_server()
    created = cli("table", "create", "--endpoint-url", server.url, "--json")
    assert created.code == 0, created.err
    assert created.json()["where"] == server.url
    described = cli("table", "describe", "--endpoint-url", server.url, "--json")
    assert described.json()["status"] == "ACTIVE"
    assert described.json()["problems"] == []


def test_describe_names_what_the_layer_would_trip_on(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "odd.db"
    with Engine(db) as engine:
        local_client(engine).create_table(
            TableName="odd",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "N"}],
            ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 3},
        )
    result = cli("table", "describe", "--db", str(db), "--table", "odd", "--json")
    assert result.code == 0
    info = result.json()
    assert info["billing_mode"] == "PROVISIONED"
    assert info["provisioned"] == {"read": 5, "write": 3}
    problems = " | ".join(info["problems"])
    assert "must be a string (S)" in problems
    assert "TTL is not enabled" in problems
    text = cli("table", "describe", "--db", str(db), "--table", "odd").out
    assert "problem: TTL is not enabled" in text


# -- one-line errors ------------------------------------------------------------------------------


def test_missing_table(
    cli: Callable[..., Any], one_line_error: Callable[..., str], tmp_path: Path
) -> None:
    db = str(tmp_path / "empty.db")
    assert cli("table", "create", "--db", db, "--table", "other").code == 0
    result = cli("table", "describe", "--db", db)
    assert result.code == 1
    line = one_line_error(result)
    assert "table 'firstwrite-idempotency' does not exist" in line
    # the command to paste creates that very table, where it was looked for
    assert f"`firstwrite table create --table firstwrite-idempotency --db {db}`" in line


def test_missing_table_named_by_the_user(
    cli: Callable[..., Any], one_line_error: Callable[..., str], tmp_path: Path
) -> None:
    db = str(tmp_path / "empty.db")
    assert cli("table", "create", "--db", db, "--table", "other").code == 0
    line = one_line_error(cli("keys", "list", "--db", db, "--table", "nope"))
    assert f"`firstwrite table create --table nope --db {db}`" in line


def test_the_ttl_hint_switches_ttl_on(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A table without TTL: the problem names the command that enables it (--enable-ttl:
    `table create` leaves an existing table's TTL alone otherwise)."""
    from firstwrite.engine import Engine, local_client

    db = str(tmp_path / "no-ttl.db")
    with Engine(db) as engine:
        local_client(engine).create_table(
            TableName="plain",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    described = cli("table", "describe", "--db", db, "--table", "plain")
    hint = f"run `firstwrite table create --table plain --db {db} --enable-ttl` to enable it"
    assert hint in described.out + described.err
    fixed = cli(*hint.split("`")[1].split()[1:])
    assert fixed.code == 0
    again = cli("table", "describe", "--db", db, "--table", "plain")
    assert "TTL is not enabled" not in again.out + again.err


def test_missing_database(
    cli: Callable[..., Any], one_line_error: Callable[..., str], tmp_path: Path
) -> None:
    result = cli("table", "describe", "--db", str(tmp_path / "nothing-here.db"))
    assert result.code == 1
    assert "no local engine database at" in one_line_error(result)
    assert not (tmp_path / "nothing-here.db").exists()  # reading never creates one


def test_db_in_a_missing_directory(
    cli: Callable[..., Any], one_line_error: Callable[..., str], tmp_path: Path
) -> None:
    result = cli("table", "create", "--db", str(tmp_path / "no" / "such" / "dir.db"))
    assert result.code == 1
    assert "does not exist" in one_line_error(result)


def test_db_that_is_not_a_database(
    cli: Callable[..., Any], one_line_error: Callable[..., str], tmp_path: Path
) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not SQLite" * 100)
    result = cli("table", "describe", "--db", str(junk))
    assert result.code == 1
    assert "database" in one_line_error(result)


def test_unreachable_endpoint(cli: Callable[..., Any], one_line_error: Callable[..., str]) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = cli("table", "describe", "--endpoint-url", f"http://127.0.0.1:{port}")
    assert result.code == 1
    assert f"cannot reach http://127.0.0.1:{port}" in one_line_error(result)


def test_aws_without_a_region_or_credentials(
    cli: Callable[..., Any], one_line_error: Callable[..., str]
) -> None:
    no_region = cli("table", "describe", "--aws")
    assert no_region.code == 1
    assert "no AWS region" in one_line_error(no_region)
    no_credentials = cli("table", "describe", "--aws", "--region", "eu-west-1")
    assert no_credentials.code == 1
    assert "no AWS credentials found" in one_line_error(no_credentials)


def test_db_and_endpoint_are_exclusive(cli: Callable[..., Any]) -> None:
    result = cli("table", "describe", "--db", "x.db", "--endpoint-url", "http://127.0.0.1:1")
    assert result.code == 2
    assert "not allowed with argument" in result.err


def test_the_default_database_is_the_layers(
    cli: Callable[..., Any], clean_env: dict[str, str], one_line_error: Callable[..., str]
) -> None:
    """Without --db, commands use the database the layer's zero-config default writes."""
    missing = cli("keys", "list")
    assert missing.code == 1
    assert "from $FIRSTWRITE_LOCAL_DB" in one_line_error(missing)
    from firstwrite import Idempotency

    Idempotency().run("made-by-the-app", lambda: "ok")
    listed = cli("keys", "list", "--json")
    assert listed.code == 0, listed.err
    assert [r["key"] for r in listed.json()["records"]] == ["made-by-the-app"]


def _business_table(db: str, name: str, items: int) -> None:
    """An application's table, keyed like the layer's, TTL off, its items carrying expires_at
    in the past: what a mistyped --table could point at."""
    with Engine(db) as engine:
        client = local_client(engine)
        client.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for i in range(items):
            item = {"pk": {"S": f"order-{i}"}, "expires_at": {"N": "1000"}}
            client.put_item(TableName=name, Item=item)


def _ttl(db: str, name: str) -> str:
    with Engine(db) as engine:
        described = local_client(engine).describe_time_to_live(TableName=name)
    return str(described["TimeToLiveDescription"]["TimeToLiveStatus"])


def test_create_on_an_existing_table_with_items_leaves_ttl_off_and_says_so(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    db = str(tmp_path / "app.db")
    _business_table(db, "orders", 3)
    result = cli("table", "create", "--db", db, "--table", "orders")
    assert result.code == 0, result.err
    assert "already exists" in result.out
    assert "not changed: TTL on expires_at (it is off) (the table is not empty;" in result.out
    assert "pass --enable-ttl" in result.out
    assert _ttl(db, "orders") == "DISABLED"
    as_json = cli("table", "create", "--db", db, "--table", "orders", "--json").json()
    [change] = as_json["changes"]
    assert change["change"] == "TTL on expires_at (it is off)" and change["applied"] is False
    assert _ttl(db, "orders") == "DISABLED"
    # Asked for: switched on, and said so.
    enabled = cli("table", "create", "--db", db, "--table", "orders", "--enable-ttl")
    assert "changed: TTL on expires_at (it is off) (--enable-ttl)" in enabled.out
    assert _ttl(db, "orders") == "ENABLED"
    again = cli("table", "create", "--db", db, "--table", "orders")
    assert "no change: the table is kept as it is" in again.out


def test_create_on_an_empty_table_of_the_layers_shape_enables_ttl(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    db = str(tmp_path / "app.db")
    _business_table(db, "idem", 0)
    result = cli("table", "create", "--db", db, "--table", "idem")
    assert result.code == 0, result.err
    assert "changed: TTL on expires_at (it is off) (the table is empty and has the layer's" in (
        result.out
    )
    assert _ttl(db, "idem") == "ENABLED"
    # An empty table keyed otherwise is not the layer's: left alone.
    _business_table(db, "other", 0)
    other = cli("table", "create", "--db", db, "--table", "other", "--partition-key", "id")
    assert "not changed" in other.out and "key schema is not the layer's" in other.out
    assert _ttl(db, "other") == "DISABLED"
