"""Records decoded for display (:mod:`firstwrite.idempotency.record_view`), the one decoder of
``firstwrite keys`` and the console: records written by the layer itself, in every state."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from firstwrite.engine import Engine, local_client
from firstwrite.idempotency import (
    Claim,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    Replay,
    Status,
    serialization,
)
from firstwrite.idempotency import record as r
from firstwrite.idempotency.record_view import RecordView, decode, record_of, stored_result

NOW = 1_800_000_000
TOKEN = "0190aaaaaaaa0123456789abcdef0123"


@pytest.fixture
def engine() -> Engine:
    engine = Engine()
    engine.clock.freeze(NOW)
    return engine


@pytest.fixture
def guard(engine: Engine) -> Idempotency:
    guard = Idempotency(
        IdempotencyConfig(table_name="records", lease=30),
        client=local_client(engine),
        clock=engine.clock.now,
    )
    guard.ensure_table()
    return guard


def shown(guard: Idempotency, key: str) -> RecordView:
    item = guard.client.get_item(
        TableName="records", Key=guard.dynamodb_key(key), ConsistentRead=True
    )["Item"]
    view = decode(item)
    assert view is not None
    return view


def claimed(guard: Idempotency, key: str, payload: Any = None) -> Claim:
    claim = guard.claim(key, payload)
    assert isinstance(claim, Claim)
    return claim


def test_every_state(guard: Idempotency) -> None:
    claimed(guard, "pending", {"x": 1})
    guard.complete(claimed(guard, "done"), {"ok": True, "n": [1, 2]})
    guard.fail(claimed(guard, "flaky"), ValueError("try again"), retryable=True)
    guard.fail(claimed(guard, "final"), KeyError("gone"), retryable=False)
    a, b, c, d = (shown(guard, k) for k in ("pending", "done", "flaky", "final"))

    assert (a.state, a.kind, a.version, a.outcome) == ("PENDING", "pending", 1, "")
    # The engine dates its answers in whole seconds, as DynamoDB does: the guard, on the clock
    # frozen at NOW, writes from the latest DynamoDB time that Date allows (NOW + 1).
    assert a.lease_expires_at == NOW + 1 + 30 and a.fingerprint is not None
    assert a.claimed_at == NOW + 1 and a.owner_short == "…" + a.owner[-8:]
    assert a.condition(NOW) == "in progress: a duplicate is told to retry later"
    assert a.condition(NOW + 32) == "lease over: the same request may take it over"

    assert (b.state, b.kind, b.status) == ("COMPLETED", "completed", Status.COMPLETED)
    assert b.lease_expires_at is None and b.error is None
    assert b.result is not None and b.result.format == "JSON" and not b.result.compressed
    assert b.outcome == '{"ok": true, "n": [1, 2]}' == b.result.summary
    assert b.condition(NOW) == "a duplicate gets the stored result"
    assert b.condition(b.expires_at + 1).startswith("past retention")

    assert (c.state, c.kind, c.version) == ("FAILED (retryable)", "failed-retryable", 2)
    assert c.lease_expires_ms == 0 and c.retryable
    assert c.error is not None and (c.error.type, c.error.message) == ("ValueError", "try again")
    assert c.outcome == "ValueError: try again"
    assert c.condition(NOW) == "the same request may claim it again at once"

    assert (d.state, d.kind) == ("FAILED (final)", "failed-final")
    assert d.outcome == "KeyError: 'gone'" and not d.retryable
    assert d.condition(NOW) == "a duplicate gets the stored failure"


@pytest.mark.parametrize(
    ("value", "form", "summary"),
    [
        ({"rows": ["same text"] * 2000}, "JSON, zlib-compressed", '{"rows": ["same text", '),
        (b"\x00\x01binary", "bytes", "8 bytes: 000162696e617279"),
        (bytes(range(40)), "bytes", "40 bytes: 000102030405060708090a0b0c0d0e0f…"),
        (b"z" * 10_000, "bytes, zlib-compressed", "10000 bytes: 7a7a"),
        (
            {"amount": decimal.Decimal("19.99"), "at": dt.date(2026, 1, 2)},
            "typed JSON",
            '{"amount": "19.99", "at": "2026-01-02"}',
        ),
        (
            [{"amount": decimal.Decimal("1.5")}] * 1000,
            "typed JSON, zlib-compressed",
            '[{"amount": "1.5"}, ',
        ),
    ],
)
def test_every_stored_form(guard: Idempotency, value: Any, form: str, summary: str) -> None:
    guard.complete(claimed(guard, "k"), value)
    view = shown(guard, "k")
    assert view.result is not None and view.result.format == form
    assert view.result.compressed == form.endswith("compressed")
    assert view.outcome.startswith(summary) and len(view.outcome) <= 120
    raw = guard.get("k").result  # type: ignore[union-attr]
    assert raw is not None and view.result.stored_bytes == len(
        raw.encode() if isinstance(raw, str) else raw
    )


def test_summaries_are_cut_to_the_asked_width(guard: Idempotency) -> None:
    guard.complete(claimed(guard, "k"), {"text": "x" * 500})
    item = guard.client.get_item(TableName="records", Key=guard.dynamodb_key("k"))["Item"]
    narrow = decode(item, limit=60)
    assert narrow is not None and len(narrow.outcome) == 60 and narrow.outcome.endswith("…")


@pytest.mark.parametrize(
    "item",
    [
        {"pk": {"S": "plain"}},
        {"pk": {"S": "x"}, "owner": {"S": "no-version"}, "expires_at": {"N": "1"}},
        {"pk": {"S": "x"}, "owner": {"N": "5"}, "expires_at": {"N": "1"}},
        {"pk": {"S": "x"}, "owner": {"S": "t:1"}},
        {"pk": {"S": "x"}, "owner": {"S": "t:1"}, "expires_at": {"S": "soon"}},
    ],
)
def test_other_items_are_not_records(item: dict[str, Any]) -> None:
    assert record_of(item) is None and decode(item) is None


def test_a_damaged_result_is_reported_not_raised() -> None:
    item = {
        "pk": {"S": "x"},
        r.A_OWNER: {"S": f"{TOKEN}:1"},
        r.A_EXPIRES: {"N": "1900000000"},
        r.A_RESULT: {"B": b"\x09junk"},
    }
    view = decode(item)
    assert view is not None and view.result is not None
    assert view.result.format == "unreadable" and view.result.stored_bytes == 5
    assert "unknown stored result format 9" in view.result.summary
    assert view.outcome.startswith("(cannot decode: ")
    assert stored_result(b"\x01not zlib").format == "unreadable"


def test_a_tombstone_is_shown_as_one() -> None:
    item = {
        "pk": {"S": "IDEMPOTENCY#gone"},
        r.A_OWNER: {"S": f"{TOKEN}:1"},
        r.A_EXPIRES: {"N": "1900000000"},
        r.A_FINGERPRINT: {"S": "abc"},
        r.A_REMOVED_STATUS: {"S": "COMPLETED"},
        r.A_REMOVED_AT: {"N": "1800000000"},
    }
    view = decode(item)
    assert view is not None and view.state == "COMPLETED (tombstone)"
    assert view.kind == "tombstone" and view.removed_at == 1_800_000_000
    assert view.outcome.startswith("(removed by TTL")
    assert view.condition(1_800_000_001).startswith("TTL removed this record; the audit's")
    assert "window is over" in view.condition(1_900_000_001)


def test_stored_format_names_every_tag() -> None:
    forms = {
        serialization.stored_format(serialization.encode(v, threshold=10)["B"])
        for v in (b"ab", b"a" * 100, [decimal.Decimal(1)], [decimal.Decimal(1)] * 50, "x" * 100)
    }
    assert forms == {
        "bytes",
        "bytes, zlib-compressed",
        "typed JSON",
        "typed JSON, zlib-compressed",
        "JSON, zlib-compressed",
    }
    assert serialization.stored_format("{}") == "JSON"
    assert serialization.stored_format(b"\x09") == serialization.stored_format(b"") == "unknown"


# -- what a duplicate would get, as the layer itself answers it ----------------------------------


def _duplicate(guard: Idempotency, key: str, payload: Any) -> str:
    """What a duplicate of the same request gets now, from the layer."""
    try:
        outcome = guard.claim(key, payload, wait=0)
    except InProgressError:
        return "in progress"
    if isinstance(outcome, Replay):
        return "result" if outcome.completed else "failure"
    return "takeover" if outcome.taken_over else "claim"


@pytest.mark.parametrize(
    ("setup", "later", "expected"),
    [
        ("pending", 0, "in progress"),
        ("pending", 32, "takeover"),  # the lease: 30 s from NOW + 1 (the Date's second)
        ("completed", 0, "result"),
        ("completed", 2 * 86400, "claim"),
        ("retryable", 0, "claim"),
        ("final", 0, "failure"),
    ],
)
def test_the_condition_says_what_the_layer_does(
    guard: Idempotency, engine: Engine, setup: str, later: float, expected: str
) -> None:
    claim = claimed(guard, "k", {"n": 1})
    if setup == "completed":
        guard.complete(claim, "done")
    elif setup != "pending":
        guard.fail(claim, ValueError("no"), retryable=setup == "retryable")
    engine.clock.advance(later)
    words = shown(guard, "k").condition(engine.clock.now())
    said = {
        "in progress": "in progress",
        "lease over": "takeover",
        "the same request may claim": "claim",
        "a duplicate gets the stored result": "result",
        "a duplicate gets the stored failure": "failure",
        "past retention": "claim",
    }
    assert [v for k, v in said.items() if words.startswith(k)] == [expected], words
    assert _duplicate(guard, "k", {"n": 1}) == expected
