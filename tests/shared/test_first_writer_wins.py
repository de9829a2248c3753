"""The one judgment of a key's race (:mod:`firstwrite.shared.first_writer_wins`), and the
console's checklist built on it: all its lines pass exactly when the judgment holds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firstwrite.console import race
from firstwrite.shared.first_writer_wins import Answers, Violation, items_returned, judge

CCF = "ConditionalCheckFailedException"


def kinds(answers: Answers[str], contenders: int = 3) -> dict[Violation, str]:
    return dict(judge(answers, contenders).violations)


def test_one_winner_every_loser_with_its_item_and_stored_holds() -> None:
    verdict = judge(Answers(winners=[("a", None)], losers=["a", "a"], stored="a"), 3)
    assert verdict.held and verdict.first == "a" and verdict.losers_saw_first
    assert (verdict.losers, verdict.losers_with_item, verdict.losers_with_first) == (2, 2, 2)
    assert verdict.stored_is_first and not verdict.unverified


@pytest.mark.parametrize(
    ("answers", "kind", "detail"),
    [
        (Answers(winners=[("a", None), ("b", "a")]), Violation.MULTIPLE_WINNERS, "2 claims"),
        (Answers(losers=["x", "x", "x"]), Violation.NO_WINNER, "every claim failed"),
        (
            Answers(winners=[("a", "z")], losers=["a", "a"], stored="a"),
            Violation.WINNER_REPLACED,
            "ALL_OLD owner z",
        ),
        (
            Answers(winners=[("a", None)], losers=[None, "a"], stored="a"),
            Violation.LOSER_WITHOUT_ITEM,
            "1 losers",
        ),
        (
            Answers(winners=[("a", None)], losers=["b", "a"], stored="a"),
            Violation.LOSER_SAW_OTHER,
            "1 losers",
        ),
        (
            Answers(winners=[("a", None)], losers=["a", "a"], stored="b"),
            Violation.STORED_NOT_FIRST,
            "stored b",
        ),
        (
            Answers(winners=[("a", None)], losers=["t", "t"], stored="a", before="t"),
            Violation.TAKEN_KEY_WON,
            "a won",
        ),
    ],
)
def test_each_violation(answers: Answers[str], kind: Violation, detail: str) -> None:
    verdict = judge(answers, 3)
    found = dict(verdict.violations)
    assert set(found) == {kind}, found
    assert found[kind].startswith(detail)
    assert not verdict.held and not verdict.unverified


def test_two_winners_are_a_violation_even_with_an_answer_missing() -> None:
    assert Violation.MULTIPLE_WINNERS in kinds(Answers(winners=[("a", None), ("b", None)]), 5)


@pytest.mark.parametrize(
    "answers",
    [
        Answers(winners=[("a", None)], losers=["a"], stored="a"),  # a contender never answered
        Answers(losers=["x", "x"], errors=["ThrottlingException"]),  # the error may have won
    ],
)
def test_unverified_keys_are_neither_held_nor_violated(answers: Answers[str]) -> None:
    verdict = judge(answers, 3)
    assert verdict.unverified and verdict.violations == () and not verdict.held
    assert verdict.first is None and verdict.losers_with_first == 0


def test_an_error_beside_a_winner_leaves_the_losers_judged_but_the_key_not_held() -> None:
    verdict = judge(Answers(winners=[("a", None)], losers=["a"], errors=["Timeout"], stored="a"), 3)
    assert verdict.violations == () and verdict.first == "a" and verdict.losers_with_first == 1
    assert verdict.errors == ("Timeout",) and not verdict.held and not verdict.losers_saw_first


def test_a_key_taken_before_the_race_is_its_first_writer() -> None:
    held = judge(Answers(losers=["t", "t"], stored="t", before="t"), 2)
    assert held.held and held.first == "t" and held.losers_with_first == 2
    # Nobody may win over it, and an error cannot hide a winner: the losers are still judged.
    erred = judge(Answers(losers=["t"], errors=["Timeout"], stored="t", before="t"), 2)
    assert not erred.unverified and erred.violations == () and not erred.held
    overwritten = judge(Answers(losers=["t", "t"], stored="u", before="t"), 2)
    assert dict(overwritten.violations) == {Violation.STORED_NOT_FIRST: "stored u"}


def test_items_are_compared_whole() -> None:
    item = {"pk": {"S": "k"}, "writer": {"S": "w1"}}
    other = {"pk": {"S": "other"}, "writer": {"S": "w1"}}  # same writer, another key
    answers = Answers[dict[str, Any]](winners=[(dict(item), None)], losers=[other], stored=item)
    assert dict(judge(answers, 2).violations) == {Violation.LOSER_SAW_OTHER: "1 losers"}


# -- an endpoint that returns no item on a failed condition (dynalite) ----------------------


def test_items_returned_is_off_only_when_no_loser_anywhere_got_an_item() -> None:
    none = Answers(winners=[("a", None)], losers=[None, None], stored="a")
    assert not items_returned([none, Answers(winners=[("b", None)], losers=[None], stored="b")])
    some = Answers(winners=[("b", None)], losers=["b"], stored="b")
    assert items_returned([none, some])  # one endpoint, items sometimes: they were dropped
    assert items_returned([Answers(winners=[("a", None)], stored="a")])  # no loser: no evidence
    assert items_returned([])


def test_without_items_a_loser_without_one_is_not_a_violation() -> None:
    answers = Answers(winners=[("a", None)], losers=[None, None], stored="a")
    assert kinds(answers) == {Violation.LOSER_WITHOUT_ITEM: "2 losers"}
    verdict = judge(answers, 3, items_returned=False)
    assert verdict.violations == () and verdict.held and verdict.first == "a"
    assert (verdict.losers, verdict.losers_with_item, verdict.losers_with_first) == (2, 0, 0)
    assert not verdict.losers_saw_first  # not shown: there was nothing to see


@pytest.mark.parametrize(
    ("answers", "kind"),
    [
        (Answers(winners=[("a", None), ("b", None)], losers=[None]), Violation.MULTIPLE_WINNERS),
        (
            Answers(winners=[("a", None)], losers=[None, None], stored="b"),
            Violation.STORED_NOT_FIRST,
        ),
        (Answers(winners=[("a", None)], losers=[None, None]), Violation.STORED_NOT_FIRST),  # lost
        (Answers(winners=[("a", "z")], losers=[None, None], stored="a"), Violation.WINNER_REPLACED),
        (Answers(losers=[None, None, None]), Violation.NO_WINNER),
    ],
)
def test_without_items_a_real_violation_is_still_one(
    answers: Answers[str], kind: Violation
) -> None:
    verdict = judge(answers, 3, items_returned=False)
    assert set(dict(verdict.violations)) == {kind}
    assert not verdict.held


# -- the console's checklist says what the judgment says -------------------------------------

ANSWER = st.sampled_from(["won", "lost-winner", "lost-other", "lost-empty", "error"])


def _item(writer: str) -> dict[str, Any]:
    return {"pk": {"S": "k"}, "writer": {"S": writer}}


@given(
    st.lists(ANSWER, min_size=2, max_size=5),
    st.sampled_from(["winner", "other", "none"]),
    st.booleans(),
)
def test_the_console_checklist_passes_exactly_when_the_judgment_holds(
    answers: list[str], stored: str, taken: bool
) -> None:
    attempts = [race.Attempt(i + 1, f"thread-{i + 1:02d}") for i in range(len(answers))]
    won = [a for a, kind in zip(attempts, answers, strict=True) if kind == "won"]
    first = _item("before") if taken else _item(won[0].writer) if won else _item("nobody")
    for attempt, kind in zip(attempts, answers, strict=True):
        if kind.startswith("lost"):
            attempt.code = CCF
            attempt.item = {"lost-winner": first, "lost-other": _item("x"), "lost-empty": None}[
                kind
            ]
        elif kind == "error":
            attempt.code, attempt.message = "ThrottlingException", "slow down"
    stored_item = {"winner": first, "other": _item("x"), "none": None}[stored]
    result = race.RaceResult("k", len(attempts), first if taken else None, attempts, stored_item, 0)
    verdict = result.verdict
    passed = [ok for _, ok in result.checks]
    assert len(passed) == 4
    assert all(passed) == verdict.held == result.held == result.summary()["held"]
    assert passed[0] == (len(won) == (0 if taken else 1))
    assert passed[1] == ("error" not in answers)
