"""The console's time words, its compact JSON, and the race's checklist. (Records are decoded
by the layer's record_view: tests/idempotency/test_record_view.py.)"""

from __future__ import annotations

import json

import pytest

from firstwrite.console import race
from firstwrite.console.records import pretty, relative, span, until, wire_json


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
