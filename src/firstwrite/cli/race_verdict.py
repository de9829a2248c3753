"""The verdict of ``firstwrite race`` and its report: pure, no I/O.

:class:`Verdict` counts the judgments of every key
(:func:`firstwrite.shared.first_writer_wins.judge` says what first-writer-wins requires);
:func:`report` and :func:`render` turn them into ``--json`` and text. An endpoint that returns no
item on any failed condition (``items_returned`` false) is reported apart from the violations:
losers are then not checked for the winner's item.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from firstwrite.shared.first_writer_wins import Answers, items_returned, judge

from ._common import number, table

MAX_EXAMPLES = 20
NO_ITEMS = (
    "this endpoint does not return the winner's item: no loser got it back although every "
    "claim asked for it (ReturnValuesOnConditionCheckFailure=ALL_OLD), so losers were not "
    "checked for it (the layer reads the item instead)"
)


@dataclass
class Window:
    """From the first claim sent to the last answer received."""

    first: float = float("inf")
    last: float = 0.0

    def add(self, sent: float, answered: float) -> None:
        self.first = min(self.first, sent)
        self.last = max(self.last, answered)

    @property
    def seconds(self) -> float:
        return max(self.last - self.first, 0.0)


@dataclass
class Verdict:
    """Judges the answers; ``contenders`` is how many answers a key gets in a complete race."""

    keys: dict[int, Answers[str]]  # by key index, items named by owner; unanswered: absent
    contenders: int
    fatal: list[str]
    violations: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    items_returned: bool = True  # set by judge(): some failed condition carried an item

    def judge(self) -> Verdict:
        self.items_returned = items_returned(self.keys.values())
        for index, answers in sorted(self.keys.items()):
            if not answers.raced:
                continue
            key = judge(answers, self.contenders, items_returned=self.items_returned)
            self.counts["keys_raced"] += 1
            self.errors.update(key.errors)
            self.counts["losers"] += key.losers
            self.counts["losers_with_item"] += key.losers_with_item
            self.counts["unverified_keys"] += key.unverified
            if key.first is not None:
                self.counts["keys_with_one_winner"] += 1
                self.counts["losers_with_winner_item"] += key.losers_with_first
                self.counts["stored_is_winner"] += key.stored_is_first
            for kind, detail in key.violations:
                self._violate(kind.value, index, detail)
        return self

    def _violate(self, kind: str, index: int, detail: str) -> None:
        self.counts[f"violation:{kind}"] += 1
        if len(self.violations) < MAX_EXAMPLES:
            self.violations.append({"kind": kind, "key": f"key-{index}", "detail": detail})

    @property
    def violated(self) -> bool:
        return any(name.startswith("violation:") for name in self.counts)

    def violation_counts(self) -> dict[str, int]:
        prefix = "violation:"
        return {k[len(prefix) :]: v for k, v in self.counts.items() if k.startswith(prefix)}


def report(
    verdict: Verdict,
    *,
    target: str,
    table_name: str,
    temporary: bool,
    kept: bool,
    keys: int,
    processes: int,
    threads: int,
    elapsed: float,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``--json`` report of a judged race."""
    claims = sum(len(k.winners) + len(k.losers) + len(k.errors) for k in verdict.keys.values())
    counts = verdict.counts
    return {
        "target": target,
        "table": table_name,
        "temporary_table": temporary,
        "kept": kept,
        "keys": keys,
        "keys_raced": counts["keys_raced"],
        "processes": processes,
        "threads": threads,
        "contenders": verdict.contenders,
        "claims": claims,
        "elapsed_s": round(elapsed, 3),
        "claims_per_s": round(claims / elapsed, 1) if elapsed > 0 else None,
        "winners": sum(len(k.winners) for k in verdict.keys.values()),
        "keys_with_one_winner": counts["keys_with_one_winner"],
        "losers": counts["losers"],
        "losers_with_item": counts["losers_with_item"],
        "losers_with_winner_item": counts["losers_with_winner_item"],
        "stored_is_winner": counts["stored_is_winner"],
        "items_returned": verdict.items_returned,
        "unverified_keys": counts["unverified_keys"],
        "errors": dict(verdict.errors),
        "fatal": verdict.fatal,
        "violations": verdict.violation_counts(),
        "violation_examples": verdict.violations,
        "first_writer_wins": not verdict.violated and not verdict.errors and not verdict.fatal,
        "warnings": list(warnings),
    }


def render(report: dict[str, Any]) -> str:
    """The text report."""
    keys, losers = report["keys_raced"], report["losers"]
    raced = f"{keys} keys" if keys == report["keys"] else f"{keys} of {report['keys']} keys"
    where = report["table"] + (" (temporary)" if report["temporary_table"] else "")
    lines = [
        f"race against {report['target']}, table {where}",
        f"{raced} x {report['contenders']} contenders ({_count(report['processes'], 'process')}"
        f" x {_count(report['threads'], 'thread')}): {number(report['claims'])} claims in "
        f"{report['elapsed_s']:.2f} s ({number(report['claims_per_s'] or 0)} claims/s)",
        "",
    ]
    rows = [
        ("exactly one winner", f"{report['keys_with_one_winner']}/{keys} keys"),
        ("losers: ConditionalCheckFailedException", number(losers)),
        ("  with an item (ALL_OLD)", f"{report['losers_with_item']}/{losers}"),
        ("  with the winner's item", f"{report['losers_with_winner_item']}/{losers}"),
        ("stored item is the winner's", f"{report['stored_is_winner']}/{keys} keys"),
        ("errors", sum(report["errors"].values())),
    ]
    lines.append(table(("check", "result"), rows, align="<>"))
    if report["errors"]:
        lines.append("")
        errors = sorted(report["errors"].items())
        lines.append(table(("error", "count"), errors, align="<>"))
    for message in report["fatal"]:
        lines.append(f"contender failed: {message}")
    lines.extend(f"warning: {w}" for w in report.get("warnings", ()))
    lines.append("")
    if not report.get("items_returned", True):
        lines.append(NO_ITEMS)
    if report["violations"]:
        examples = {v["kind"]: f"{v['key']}: {v['detail']}" for v in report["violation_examples"]}
        found = [(k, n, examples.get(k, "")) for k, n in sorted(report["violations"].items())]
        lines.append(table(("violation", "keys", "example"), found, align="<>"))
        lines.append("")
        lines.append("FIRST-WRITER-WINS VIOLATED")
    elif report["first_writer_wins"] and not report.get("items_returned", True):
        lines.append(
            "first-writer-wins held: one winner per key, every loser got "
            "ConditionalCheckFailedException, the stored item is the winner's"
        )
    elif report["first_writer_wins"]:
        lines.append(
            "first-writer-wins held: one winner per key, every loser got "
            "ConditionalCheckFailedException with the winner's item"
        )
    else:
        lines.append(
            f"no violation seen, but {report['unverified_keys']} keys are unverified (errors)"
        )
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es" if noun.endswith("s") else "s")
