"""Decoding records for display, the time words, the compact JSON, and the race's verdict."""

from __future__ import annotations

import json

import pytest

from firstwrite.console import race
from firstwrite.console.records import decode, pretty, relative, span, until, wire_json
from firstwrite.engine import Engine, local_client
from firstwrite.idempotency import Claim, Idempotency, IdempotencyConfig, Status


@pytest.fixture
def guard() -> Idempotency:
    engine = Engine()
    engine.clock.freeze(1_800_000_000)
    guard = Idempotency(
        IdempotencyConfig(table_name="records", lease=30),
        client=local_client(engine),
        clock=engine.clock.now,
    )
    guard.ensure_table()
    return guard


def stored(guard: Idempotency, claim: Claim) -> dict[str, object]:
    item = guard.client.get_item(TableName="records", Key=claim.key, ConsistentRead=True)["Item"]
    assert isinstance(item, dict)
    return item


def test_every_state_decodes(guard: Idempotency) -> None:
    now = 1_800_000_000
    pending = guard.claim("a", {"x": 1})
    done = guard.claim("b")
    failed = guard.claim("c")
    final = guard.claim("d")
    assert isinstance(pending, Claim) and isinstance(done, Claim)
    assert isinstance(failed, Claim) and isinstance(final, Claim)
    guard.complete(done, {"ok": True})
    guard.fail(failed, ValueError("try again"), retryable=True)
    guard.fail(final, KeyError("gone"), retryable=False)

    views = {c.record_id: decode(stored(guard, c), ["pk"]) for c in (pending, done, failed, final)}
    a, b, c, d = (
        views[k] for k in (pending.record_id, done.record_id, failed.record_id, final.record_id)
    )
    assert a is not None and a.state == "PENDING" and a.version == 1
    assert a.lease_expires_at == now + 30 and a.fingerprint is not None
    assert a.condition(now) == "in progress: a duplicate is told to retry later"
    assert a.condition(now + 31) == "lease over: the same request may take it over"
    assert b is not None and b.status is Status.COMPLETED and b.result == '{"ok":true}'
    assert b.lease_expires_at is None
    assert c is not None and c.state == "FAILED (retryable)" and c.lease_expires_ms == 0
    assert c.result == "ValueError: try again" and c.version == 2
    assert d is not None and d.state == "FAILED (final)" and d.result.startswith("KeyError")
    assert d.condition(now) == "a duplicate gets the stored failure"
    assert b.condition(b.expires_at + 1).startswith("past retention")
    assert a.owner_short == "…" + a.owner[-8:]
    assert a.key == pending.key["pk"]["S"]


def test_a_large_result_is_decoded_from_its_compressed_form(guard: Idempotency) -> None:
    claim = guard.claim("big")
    assert isinstance(claim, Claim)
    guard.complete(claim, {"rows": ["same text"] * 2000})
    item = stored(guard, claim)
    assert "B" in item["result"]  # type: ignore[operator]
    view = decode(item, ["pk"])
    assert view is not None and view.result.startswith('{"rows":["same text"')
    assert "compressed" in view.result


@pytest.mark.parametrize(
    "item",
    [
        {"pk": {"S": "plain"}},
        {"pk": {"S": "x"}, "owner": {"S": "no-version"}, "expires_at": {"N": "1"}},
        {"pk": {"S": "x"}, "owner": {"N": "5"}, "expires_at": {"N": "1"}},
        {"pk": {"S": "x"}, "owner": {"S": "t:1"}},
    ],
)
def test_other_items_are_not_records(item: dict[str, object]) -> None:
    assert decode(item, ["pk"]) is None


def test_a_damaged_result_is_reported_not_raised() -> None:
    item = {
        "pk": {"S": "x"},
        "owner": {"S": "0190aaaaaaaa0123456789abcdef0123:1"},
        "expires_at": {"N": "1900000000"},
        "result": {"B": b"\x01not zlib"},
    }
    view = decode(item, ["pk"])
    assert view is not None and view.result.startswith("(cannot decode")


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "0 s"),
        (42, "42 s"),
        (60, "1 min"),
        (185, "3 min 5 s"),
        (3600, "1 h"),
        (86399, "23 h 59 min"),
        (90000, "1 d 1 h"),
        (-42, "42 s"),
    ],
)
def test_span(seconds: float, words: str) -> None:
    assert span(seconds) == words


def test_until_and_relative() -> None:
    assert until(130, 100) == "in 30 s"
    assert until(70, 100) == "30 s ago"
    assert until(100.4, 100) == "now"
    assert relative(131, 100) == "t0 + 31 s"
    assert relative(95, 100) == "t0 - 5 s"
    assert relative(100, 100) == "t0"


def test_pretty_keeps_short_values_on_one_line() -> None:
    value = {
        "TableName": "t",
        "Item": {"pk": {"S": "a" * 80}, "b": {"B": b"\x00\x01"}},
    }
    text = pretty(value, width=40)
    assert json.loads(text) == json.loads(wire_json(value))
    long = "a" * 80
    assert text == (
        '{\n  "TableName": "t",\n  "Item": {\n    "pk": {\n      "S": "' + long + '"\n    },\n'
        '    "b": {"B": "AAE="}\n  }\n}'
    )


def test_the_race_verdict_fails_on_two_winners() -> None:
    winner = {"pk": {"S": "k"}, "writer": {"S": "thread-01"}}
    attempts = [race.Attempt(1, "thread-01"), race.Attempt(2, "thread-02")]
    result = race.RaceResult("k", 2, None, attempts, winner, 0.0)
    checks = dict(result.checks)
    assert checks["exactly one winner (2)"] is False and not result.held
    attempts[1].code = "ConditionalCheckFailedException"
    attempts[1].item = {"pk": {"S": "k"}, "writer": {"S": "thread-02"}}  # not the winner's
    checks = dict(result.checks)
    assert checks["exactly one winner (1)"] is True
    assert checks["every loser got the winner's item (ALL_OLD)"] is False and not result.held
    attempts[1].item = winner
    assert all(dict(result.checks).values()) and result.held
    assert result.summary()["losers_with_winners_item"] == 1


def test_a_tombstone_is_shown_as_one() -> None:
    from firstwrite.idempotency import record as r

    item = {
        "pk": {"S": "IDEMPOTENCY##gone"},
        r.A_OWNER: {"S": "0190aaaaaaaa0123456789abcdef0123:1"},
        r.A_EXPIRES: {"N": "1900000000"},
        r.A_FINGERPRINT: {"S": "abc"},
        r.A_REMOVED_STATUS: {"S": "COMPLETED"},
        r.A_REMOVED_AT: {"N": "1800000000"},
    }
    view = decode(item, ["pk"])
    assert view is not None and view.state == "COMPLETED (tombstone)"
    assert view.state_class == "tombstone" and view.removed_at == 1_800_000_000
    assert view.result.startswith("(removed by TTL")
    assert view.condition(1_800_000_001).startswith("TTL removed this record")
