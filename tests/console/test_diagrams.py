"""The diagrams' SVG, without a browser: well-formed whatever the records hold, one arrow per
recorded call in order, one lane per racing thread with one winner, the winning write seen
under the engine's write lock; the exported files stand alone."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from firstwrite.console import diagrams, scenarios
from firstwrite.console.diagrams import svg
from firstwrite.console.race import RACE_TABLE, race
from firstwrite.console.scenarios.stage import Check, Exchange, Note, Outcome, Snapshot, Step
from firstwrite.engine import Engine, local_client

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = '</text><script>alert("x")</script>&amp; \x00\x1b[31m \ud800 \u202eevil ]]> <!--'


def parse(markup: str) -> ET.Element:
    """The markup as XML (raises on anything not well-formed)."""
    return ET.fromstring(markup)


def groups(root: ET.Element, kind: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{NS}g") if kind in (g.get("class") or "").split()]


def text_of(element: ET.Element) -> str:
    """What a reader (or a screen reader) gets: every text node but the tooltips."""
    return " ".join(
        t.strip() for node in element.iter() if node.tag != f"{NS}title" for t in [node.text or ""]
    ).strip()


def all_text(root: ET.Element) -> str:
    return " ".join((node.text or "") for node in root.iter())


# -- escaping -------------------------------------------------------------------------------


def test_clean_replaces_what_xml_cannot_hold_and_bidi_overrides() -> None:
    cleaned = svg.clean(HOSTILE)
    assert "\x00" not in cleaned and "\x1b" not in cleaned and "\ud800" not in cleaned
    assert "\u202e" not in cleaned
    assert cleaned.count("\ufffd") == 4
    assert "<script>" in cleaned  # kept as text: xml.etree escapes it where it is written
    assert svg.clean("x" * 100, 10) == "x" * 9 + "…"
    cleaned.encode("utf-8")  # no lone surrogate left


def _hostile_outcome() -> Outcome:
    record_item = {
        "pk": {"S": HOSTILE},
        "status": {"S": HOSTILE},
        "owner": {"S": HOSTILE},
    }
    steps = [
        Step(
            HOSTILE,
            HOSTILE,
            events=[
                Note("stage", HOSTILE, "", f"engine.clock.advance(5) {HOSTILE}", 0.0),
                Exchange(
                    HOSTILE,
                    "PutItem",
                    0.0,
                    {"TableName": HOSTILE, "ConditionExpression": HOSTILE, "Item": record_item},
                    200,
                    {},
                ),
                Exchange(
                    "worker B",
                    "PutItem",
                    0.0,
                    {"TableName": HOSTILE, "ConditionExpression": "attribute_not_exists(pk)"},
                    400,
                    {
                        "__type": f"com.amazonaws.dynamodb.v20120810#{HOSTILE}",
                        "message": HOSTILE,
                        "Item": record_item,
                    },
                ),
                Note("sleep", HOSTILE, HOSTILE, "", 0.0, 0.01),
                Note("outcome", HOSTILE, "worker B", "", 0.0),
                Note("log", HOSTILE, "worker B", HOSTILE, 0.0),
            ],
            snapshots=[Snapshot(HOSTILE, HOSTILE, "us-east-1", None, record_item, HOSTILE)],
        ),
        Step("Second", "", events=[Exchange("worker B", "GetItem", 1.0, [HOSTILE], 200, HOSTILE)]),
    ]
    checks = [Check(HOSTILE, True, 0), Check(HOSTILE, False)]
    return Outcome("hostile", HOSTILE, 0.0, steps, checks, HOSTILE, [], 0.1, HOSTILE)


def test_a_hostile_run_draws_as_well_formed_escaped_svg() -> None:
    outcome = _hostile_outcome()
    for markup in (diagrams.scenario_markup(outcome), diagrams.scenario_file(outcome)):
        root = parse(markup.removeprefix('<?xml version="1.0" encoding="UTF-8"?>\n'))
        assert root.tag == f"{NS}svg"
        tags = {node.tag.removeprefix(NS) for node in root.iter()}
        assert not tags & {"script", "foreignObject", "iframe", "a", "image", "use"}, tags
        assert not any(
            name.lower().startswith("on") for node in root.iter() for name in node.attrib
        )
        # The hostile text is there, as text: shortened maybe, never markup.
        assert '</text><script>alert("x")</script>' in all_text(root)
        assert "<script>" not in markup.replace("&lt;script&gt;", "")
        markup.encode("utf-8")
    calls = groups(parse(diagrams.scenario_markup(outcome)), "call")
    assert len(calls) == 3


# -- the sequence diagram -------------------------------------------------------------------


def _calls(outcome: Outcome) -> list[Exchange]:
    return [e for step in outcome.steps for e in step.events if isinstance(e, Exchange)]


@pytest.mark.parametrize("slug", ["lease-takeover", "transaction-cancelled", "replay"])
def test_one_arrow_per_recorded_call_in_order(slug: str) -> None:
    scenario = scenarios.by_slug(slug)
    assert scenario is not None
    outcome = scenarios.run(scenario)
    assert outcome.held, outcome.error
    root = parse(diagrams.scenario_markup(outcome, scenario.number))
    calls = _calls(outcome)
    drawn = groups(root, "call")
    assert len(drawn) == len(calls) == outcome.summary()["calls"] > 0
    for n, (arrow, call) in enumerate(zip(drawn, calls, strict=True), start=1):
        assert arrow.get("data-seq") == str(n)
        words = text_of(arrow)
        assert words.startswith(call.operation), words
        assert f"← {call.status} " in words, words
        if call.code is not None:
            assert call.code in words, words
        assert (
            "refused" in (arrow.get("class") or "")
            if call.code
            else "ok" in (arrow.get("class") or "")
        )
    steps = groups(root, "seq-step")
    assert [s.get("data-step") for s in steps] == [str(i) for i in range(1, len(outcome.steps) + 1)]
    title = root.find(f"{NS}title")
    assert title is not None and title.text == f"Scenario {scenario.number}. {scenario.title}"
    desc = root.find(f"{NS}desc")
    assert desc is not None and f"{len(calls)} DynamoDB calls" in (desc.text or "")


def test_the_skewed_worker_scenario_draws_every_actor_and_the_refusal() -> None:
    scenario = scenarios.by_slug("skewed-worker")
    assert scenario is not None and scenario.number == 10
    outcome = scenarios.run(scenario)
    assert outcome.held
    root = parse(diagrams.scenario_markup(outcome, scenario.number))
    drawn = " ".join(text_of(g) for g in groups(root, "call"))
    assert "PutItem" in drawn and "ConditionalCheckFailed" in drawn
    markup = diagrams.scenario_markup(outcome, scenario.number)
    for actor in ("worker A", "worker B", "worker B, estimate off", "worker C"):
        assert actor in markup
    # The stage's notes: each skewed clock, then A working 20 s and stalling past its lease.
    assert [text_of(g) for g in groups(root, "clock-jump")] == [
        "» worker B: its clock runs 12 s ahead of DynamoDB's (the engine's)",
        "» worker B, estimate off: its clock runs 12 s ahead of DynamoDB's (the engine's)",
        "» worker C: its clock runs 40 s ahead of DynamoDB's (the engine's)",
        "» A works: the engine clock moves +20 s, to t0 + 20 s",
        "» A stalls: the engine clock moves +12 s, to t0 + 32 s",
    ]
    assert sum("✓" in text_of(g) for g in groups(root, "check")) == len(outcome.checks)


def test_the_lease_scenario_marks_the_clock_jump_and_the_records_states() -> None:
    scenario = scenarios.by_slug("lease-takeover")
    assert scenario is not None
    outcome = scenarios.run(scenario)
    root = parse(diagrams.scenario_markup(outcome, scenario.number))
    jumps = groups(root, "clock-jump")
    assert len(jumps) == 1 and "+32 s" in text_of(jumps[0])
    states = [text_of(g) for g in groups(root, "record")]
    # One watched record, after every step that watched it.
    assert len(states) == sum(len(step.snapshots) for step in outcome.steps) == 5
    assert "PENDING" in states[0] and "COMPLETED" in states[-1]
    assert any("lease over" in s for s in states)
    # The stale worker's refused completion is an arrow from worker A that failed its condition.
    refused = [g for g in groups(root, "call") if "ConditionalCheckFailed" in text_of(g)]
    assert refused, "the fence's refusal must be drawn"
    verdict = groups(root, "seq-verdict")[0]
    assert "Verdict: held." in text_of(verdict)
    assert sum("✓" in text_of(g) for g in groups(root, "check")) == len(outcome.checks)
    # Each check sits under the step that proves it: the fence's under A's late completion.
    (late,) = [g for g in groups(root, "seq-step") if "Worker A wakes up" in text_of(g)]
    assert "✓ A's stale completion was refused with LostClaimError" in [
        text_of(g) for g in groups(late, "check")
    ]
    assert groups(verdict, "check") == []  # every check of this scenario is pinned


def test_pinned_checks_sit_under_their_step() -> None:
    outcome = _hostile_outcome()
    root = parse(diagrams.scenario_markup(outcome))
    first_step = groups(root, "seq-step")[0]
    assert len(groups(first_step, "check")) == 1  # Check(..., 0)
    assert len(groups(groups(root, "seq-verdict")[0], "check")) == 1  # the unpinned one


def test_the_exported_file_carries_its_style_and_no_script() -> None:
    scenario = scenarios.by_slug("replay")
    assert scenario is not None
    text = diagrams.scenario_file(scenarios.run(scenario), scenario.number)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg')
    root = parse(text.split("\n", 1)[1])
    style = root.find(f"{NS}style")
    assert style is not None and "prefers-color-scheme: dark" in (style.text or "")
    assert "@media print" in (style.text or "")
    assert root.find(f".//{NS}script") is None
    assert root.get("role") == "img" and root.get("aria-labelledby")
    # The inline markup (for the pages, under their Content-Security-Policy) has no style.
    assert "<style" not in diagrams.scenario_markup(scenarios.run(scenario))


# -- the race timeline ----------------------------------------------------------------------


@pytest.fixture
def engine() -> Any:
    with Engine(None) as engine:
        yield engine


@pytest.mark.parametrize("n", [2, 9])
def test_the_race_timeline_has_a_lane_per_thread_and_one_winner(engine: Engine, n: int) -> None:
    result = race(local_client(engine), n, f"key-{n}", hooks=engine.hooks)
    assert result.held
    root = parse(diagrams.race_markup(result))
    lanes = [g for g in groups(root, "lane")]
    assert len(lanes) == n
    assert {g.get("data-writer") for g in lanes} == {a.writer for a in result.attempts}
    marks = [p for p in root.iter(f"{NS}path") if p.get("class") == "winner-mark"]
    assert len(marks) == 1
    winner = result.winner
    assert winner is not None
    (won,) = [g for g in lanes if g.get("data-result") == "won"]
    assert won.get("data-writer") == winner.writer and marks[0] in list(won)
    pointers = [p for p in root.iter(f"{NS}path") if p.get("class") == "points-to"]
    assert len(pointers) == n - 1
    for lane in lanes:
        if lane.get("data-result") == "lost":
            assert f"handed {winner.writer}'s item" in text_of(lane)
    # The winning write, seen inside the engine's write transaction: once, the winner's.
    assert [w.writer for w in result.writes] == [winner.writer]
    lock = groups(root, "lock")
    assert len(lock) == 1 and f"{winner.writer}'s item written" in text_of(lock[0])
    # Lanes go in the order the threads sent.
    sent = {a.writer: a.sent for a in result.attempts}
    assert [sent[g.get("data-writer") or ""] for g in lanes] == sorted(sent.values())


def test_the_write_hook_is_gone_after_the_race(engine: Engine) -> None:
    before = list(engine.hooks.change_hooks)
    race(local_client(engine), 3, "gone", hooks=engine.hooks)
    assert engine.hooks.change_hooks == before


def test_a_hostile_stored_item_draws_escaped(engine: Engine) -> None:
    client = local_client(engine)
    race(client, 2, "warm-up")  # creates the table
    key = HOSTILE.replace("\ud800", "")  # boto3 cannot send a lone surrogate
    writer = HOSTILE.replace("\ud800", "")
    engine.execute(
        "PutItem", {"TableName": RACE_TABLE, "Item": {"pk": {"S": key}, "writer": {"S": writer}}}
    )
    result = race(client, 3, key, hooks=engine.hooks)
    assert result.held and result.winner is None and result.writes == ()
    markup = diagrams.race_markup(result)
    root = parse(markup)
    assert not [p for p in root.iter(f"{NS}path") if p.get("class") == "winner-mark"]
    assert len(groups(root, "lane")) == 3 and len(groups(root, "stored-before")) == 1
    assert root.find(f".//{NS}script") is None
    assert re.search("<script", markup) is None
    assert '</text><script>alert("x")</script>' in all_text(root)
