"""``firstwrite keys get|list|delete``: records written by the layer itself, in every state,
decoded by the command; deletion guarded by the owner it showed."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine import Engine, local_client
from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.idempotency import Claim, ClockSkewPolicy, Idempotency, IdempotencyConfig, Replay

DAY = 86400.0


def quiet_engine(path: str | Path) -> Engine:
    """The engine without its TTL sweeper, so the expired record stays until the test looks."""
    return Engine(path, ttl_config=TTLConfig(sweep_interval=None))


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def guard(engine: Engine, *, at: float | None = None, **config: Any) -> Idempotency:
    """The layer on ``engine``; ``at``: a clock frozen at that epoch time, whose records are
    backdated (the clock-skew estimate off: with it, the engine's dated answers would set the
    guard's leases on the engine's clock again)."""
    if at is None:
        return Idempotency(IdempotencyConfig(**config), client=local_client(engine))
    config["clock_skew"] = ClockSkewPolicy(enabled=False)
    return Idempotency(IdempotencyConfig(**config), client=local_client(engine), clock=lambda: at)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    """A database with records in every state, written through the layer."""
    path = tmp_path / "records.db"
    now = time.time()
    with quiet_engine(path) as engine:
        g = guard(engine)
        g.ensure_table()
        g.run("paid", lambda: {"charge": "ch_1", "amount": 1999}, payload={"n": 1})
        g.run("big", lambda: {"blob": "x" * 20000})
        g.run("raw", lambda: b"\x00\x01binary")
        g.claim("running", payload={"n": 2})
        guard(engine, at=now - 300).claim("stalled", payload={"n": 3})  # lease over
        for key, retryable in (("declined", False), ("flaky", True)):
            claim = g.claim(key)
            assert isinstance(claim, Claim)
            g.fail(claim, ValueError(f"{key} card"), retryable=retryable)
        guard(engine, at=now - 3 * DAY).run("old", lambda: 1)  # expired, not yet swept
        guard(engine, scope="tenant#a").run("order#1%", lambda: "scoped")
        client = local_client(engine)
        client.put_item(TableName="firstwrite-idempotency", Item={"pk": {"S": "someone-else"}})
        corrupt = client.get_item(
            TableName="firstwrite-idempotency", Key={"pk": {"S": "IDEMPOTENCY#paid"}}
        )["Item"]
        corrupt |= {"pk": {"S": "IDEMPOTENCY#corrupt"}, "result": {"B": b"\x09junk"}}
        client.put_item(TableName="firstwrite-idempotency", Item=corrupt)
    yield str(path)


def by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in records}


def test_list_decodes_every_state(cli: Callable[..., Any], db: str) -> None:
    result = cli("keys", "list", "--db", db, "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["scanned"] == 11 and data["more"] is False
    records = by_key(data["records"])
    assert set(records) == {
        "paid",
        "big",
        "raw",
        "running",
        "stalled",
        "declined",
        "flaky",
        "old",
        "order#1%",
        "someone-else",
        "corrupt",
    }
    assert records["corrupt"]["result"]["format"] == "unreadable"
    assert "unknown stored result format 9" in records["corrupt"]["result"]["summary"]
    assert records["paid"]["state"] == "COMPLETED"
    assert records["paid"]["result"]["summary"] == '{"charge": "ch_1", "amount": 1999}'
    assert records["big"]["result"]["format"] == "JSON, zlib-compressed"
    assert records["big"]["result"]["stored_bytes"] < 2000
    assert records["raw"]["result"]["summary"].startswith("8 bytes: 0001")
    assert records["running"]["state"] == "PENDING"
    # Written from the latest DynamoDB time the answers' whole-second Date allows: up to 1 s more.
    assert 0 < records["running"]["lease_remaining_s"] <= 61
    assert records["stalled"]["lease_remaining_s"] < -200
    assert records["declined"]["state"] == "FAILED" and records["declined"]["retryable"] is False
    assert records["declined"]["error"]["message"] == "declined card"
    assert records["declined"]["version"] == 2  # failing bumps the version
    assert records["flaky"]["retryable"] is True
    assert records["old"]["expired"] is True and records["old"]["expires_in_s"] < 0
    assert records["paid"]["expired"] is False and records["paid"]["expires_in_s"] > DAY - 60
    assert records["order#1%"]["scope"] == "tenant#a"
    assert records["someone-else"]["state"] is None
    # Newest claim first.
    ages = [r["claimed_ago_s"] for r in data["records"] if r["state"]]
    assert ages == sorted(ages)


def test_list_as_text(cli: Callable[..., Any], db: str) -> None:
    result = cli("keys", "list", "--db", db)
    assert result.code == 0
    lines = {line.split()[0]: line for line in result.out.splitlines()[1:-1]}
    assert "FAILED (final)" in lines["declined"]
    assert "FAILED (retryable)" in lines["flaky"]
    assert "COMPLETED, expired" in lines["old"] and "awaiting TTL" in lines["old"]
    assert "left" in lines["running"] and "over" in lines["stalled"]
    assert "not a firstwrite record" in lines["someone-else"]
    assert result.out.splitlines()[0].split()[:3] == ["KEY", "SCOPE", "STATE"]
    assert result.out.rstrip().endswith("11 items scanned")


def test_list_filters_and_limits(cli: Callable[..., Any], db: str) -> None:
    pending = by_key(
        cli("keys", "list", "--db", db, "--state", "pending", "--json").json()["records"]
    )
    assert set(pending) == {"running", "stalled"}
    done = cli("keys", "list", "--db", db, "--state", "completed", "--state", "expired", "--json")
    completed = {"paid", "big", "raw", "old", "order#1%", "corrupt"}
    assert set(by_key(done.json()["records"])) == completed
    limited = cli("keys", "list", "--db", db, "--limit", "2", "--json").json()
    assert len(limited["records"]) == 2 and limited["more"] is True
    assert "more not shown" in cli("keys", "list", "--db", db, "--limit", "2").out


def test_get_by_key_scope_and_id(cli: Callable[..., Any], db: str) -> None:
    paid = cli("keys", "get", "paid", "--db", db)
    assert paid.code == 0
    assert "state        COMPLETED" in paid.out
    assert 'result       {"charge": "ch_1", "amount": 1999} (stored as JSON, 31 B)' in paid.out

    scoped = cli("keys", "get", "order#1%", "--scope", "tenant#a", "--db", db, "--json").json()
    assert scoped["found"] is True and scoped["record_id"] == "IDEMPOTENCY#tenant%23a#order%231%25"
    by_id = cli("keys", "get", "--id", scoped["record_id"], "--db", db, "--json").json()
    assert by_id["owner"] == scoped["owner"]

    stalled = cli("keys", "get", "stalled", "--db", db).out
    assert "lease        over" in stalled


def test_get_absent_and_bad_addresses(
    cli: Callable[..., Any], db: str, one_line_error: Callable[..., str]
) -> None:
    absent = cli("keys", "get", "never-seen", "--db", db)
    assert absent.code == 4
    assert "no record for 'never-seen'" in one_line_error(absent)
    assert cli("keys", "get", "never-seen", "--db", db, "--json").json()["found"] is False
    assert cli("keys", "get", "paid", "--scope", "tenant#a", "--db", db).code == 4
    assert cli("keys", "get", "--db", db).code == 2  # neither KEY nor --id
    assert cli("keys", "get", "paid", "--id", "x", "--db", db).code == 2


def test_delete_then_the_request_runs_again(cli: Callable[..., Any], db: str) -> None:
    result = cli("keys", "delete", "declined", "--db", db, "--yes")
    assert result.code == 0, result.err
    assert "FAILED (final)" in result.out and "deleted IDEMPOTENCY#declined" in result.out
    assert cli("keys", "get", "declined", "--db", db).code == 4
    with quiet_engine(db) as engine:
        again = guard(engine).claim("declined")
        assert isinstance(again, Claim)  # not a replay of the final failure any more
    assert cli("keys", "delete", "declined-twice", "--db", db, "--yes").code == 4


def test_delete_needs_a_yes_off_a_terminal(
    cli: Callable[..., Any], db: str, one_line_error: Callable[..., str]
) -> None:
    result = cli("keys", "delete", "paid", "--db", db)
    assert result.code == 2
    assert "--yes" in one_line_error(result)
    assert cli("keys", "get", "paid", "--db", db).code == 0  # still there


@pytest.mark.parametrize(("answer", "code", "kept"), [("n\n", 1, True), ("yes\n", 0, False)])
def test_delete_asks_on_a_terminal(
    cli: Callable[..., Any],
    db: str,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    code: int,
    kept: bool,
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    result = cli("keys", "delete", "flaky", "--db", db)
    assert result.code == code
    assert "a retry of its request will run its side effect again" in result.out
    assert (cli("keys", "get", "flaky", "--db", db).code == 0) is kept


def test_delete_refuses_a_record_that_changed_after_it_was_shown(
    cli: Callable[..., Any], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator is shown a PENDING record; while they read the prompt, its worker
    completes it. Deleting now would throw a finished result away: refused."""
    with quiet_engine(db) as engine:
        claim = guard(engine).claim("in-flight")
    assert isinstance(claim, Claim)

    def the_worker_finishes_meanwhile(prompt: str) -> str:
        with quiet_engine(db) as engine:
            guard(engine).complete(claim, {"done": True})
        return "y"

    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("builtins.input", the_worker_finishes_meanwhile)
    result = cli("keys", "delete", "in-flight", "--db", db)
    assert result.code == 1
    assert "changed since it was read" in result.err
    with quiet_engine(db) as engine:
        replay = guard(engine).claim("in-flight")
    assert isinstance(replay, Replay) and replay.value() == {"done": True}


def test_keys_over_http(cli: Callable[..., Any], cli_server: Callable[..., Any]) -> None:
    import boto3

    server = cli_server()
    client = boto3.client(
        "dynamodb",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="k",
        aws_secret_access_key="s",
    )
    g = Idempotency(client=client)
    g.ensure_table()
    g.run("over-http", lambda: [1, 2, 3])
    result = cli("keys", "get", "over-http", "--endpoint-url", server.url, "--json")
    assert result.code == 0, result.err
    assert result.json()["result"]["summary"] == "[1, 2, 3]"
    listed = cli("keys", "list", "--endpoint-url", server.url, "--json").json()
    assert [r["key"] for r in listed["records"]] == ["over-http"]


def test_a_typed_result_and_a_tombstone(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A result holding a Decimal (stored as typed JSON) is summarised, not a crash; a tombstone
    of the TTL audit is shown as one, not as the live record it stands for."""
    import decimal

    from firstwrite.idempotency import record as r

    path = tmp_path / "typed.db"
    with quiet_engine(path) as engine:
        g = guard(engine)
        g.ensure_table()
        g.run("typed", lambda: {"amount": decimal.Decimal("19.99")})
        local_client(engine).put_item(
            TableName="firstwrite-idempotency",
            Item={
                "pk": {"S": "IDEMPOTENCY#gone"},
                r.A_OWNER: {"S": "0190aaaaaaaa0123456789abcdef0123:1"},
                r.A_EXPIRES: {"N": str(int(time.time() + DAY))},
                r.A_REMOVED_STATUS: {"S": "COMPLETED"},
                r.A_REMOVED_AT: {"N": str(int(time.time()))},
            },
        )
    records = by_key(cli("keys", "list", "--db", str(path), "--json").json()["records"])
    assert records["typed"]["result"] == {
        "format": "typed JSON",
        "stored_bytes": records["typed"]["result"]["stored_bytes"],
        "summary": '{"amount": "19.99"}',
        "detail": ["{", '  "amount": "19.99"', "}"],
    }
    assert records["typed"]["duplicate_gets"] == "a duplicate gets the stored result"
    gone = records["gone"]
    assert gone["label"] == "COMPLETED (tombstone)" and gone["removed_at"] is not None
    assert gone["outcome"].startswith("(removed by TTL")
    text = cli("keys", "get", "gone", "--db", str(path)).out
    assert "COMPLETED (tombstone)" in text and "by TTL" in text


def test_a_stored_http_reply_is_decoded_in_get_and_list(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """What the HTTP middleware stores (its own stored_form) shows as a reply, not as hex: the
    status line, the stored headers and the JSON body, pretty-printed and cut with its size."""
    from firstwrite.http import HttpConfig
    from firstwrite.http.core import Core

    body = b'{"charge": "ch_9", "amount": 1999, "note": "' + b"n" * 3000 + b'"}'
    stored = Core(HttpConfig()).stored_form(
        201, [(b"content-type", b"application/json"), (b"location", b"/charges/ch_9")], body
    )
    path = tmp_path / "replies.db"
    with quiet_engine(path) as engine:
        g = guard(engine, scope="POST /charges")
        g.ensure_table()
        g.run("k-reply", lambda: stored)
    got = cli("keys", "get", "k-reply", "--scope", "POST /charges", "--db", str(path))
    assert got.code == 0, got.err
    (line,) = [ln for ln in got.out.splitlines() if ln.startswith("result ")]
    assert line.startswith('result       HTTP 201 Created, application/json, 3,046 B body: {"ch')
    assert line.endswith("(stored as bytes, 3134 B)") and "bytes:" not in line
    assert "  location: /charges/ch_9" in got.out and "  body: 3,046 B" in got.out
    assert '    "amount": 1999,' in got.out  # pretty-printed
    assert "… (cut; 3,046 B in all)" in got.out and len(got.out) < 3000
    listed = cli("keys", "list", "--db", str(path))
    assert "HTTP 201 Created, application/json, 3,046 B body: {" in listed.out
    assert "7b22" not in listed.out


def test_get_without_its_scope_names_the_scopes_that_hold_the_key(
    cli: Callable[..., Any], db: str
) -> None:
    missed = cli("keys", "get", "order#1%", "--db", db)
    assert missed.code == 4 and missed.out == ""
    assert missed.err.strip() == (
        "firstwrite: no record for 'order#1%' in scope '' in table firstwrite-idempotency; "
        "the key is held in scope 'tenant#a': add --scope 'tenant#a'"
    )
    as_json = cli("keys", "get", "order#1%", "--db", db, "--json").json()
    assert as_json["found"] is False and as_json["scopes"] == ["tenant#a"]
    assert as_json["searched_all"] is True
    # The hint is right: with it, the record is found.
    assert cli("keys", "get", "order#1%", "--scope", "tenant#a", "--db", db).code == 0
    nowhere = cli("keys", "get", "never-used", "--db", db)
    assert nowhere.code == 4 and "held in scope" not in nowhere.err
