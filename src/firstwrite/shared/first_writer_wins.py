"""First-writer-wins, judged for one key: what a race of conditional writes must show.

Both races judge with :func:`judge`: ``firstwrite race`` (many keys, the layer's claim, counters
and exit status) and the console's race (one key, a checklist). Pure, no I/O. When every
contender sends a conditional write of the same key with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``, first-writer-wins holds for the key when:

* the first writer is unique: exactly one write succeeded, or none when an item was already
  stored before the race (that item is then the first writer);
* the winner replaced nothing (its ``ALL_OLD``, when it asked for one, is empty);
* every other write failed with ``ConditionalCheckFailedException`` carrying the first writer's
  item (not checked where the endpoint returns none: :func:`items_returned`);
* a strongly consistent read afterwards returns the first writer's item.

Items are compared with ``==`` only, so a race may identify them however it likes: the CLI by
the owner token written in each claim, the console by the whole item. An error (throttling, a
timeout: any answer other than success or a failed condition) is not a violation; but when no
write won and an error came back, the error may have hidden the winner, so the key is
unverified, as it is when a contender never answered.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

#: The contenders per key a race may have (``firstwrite race``: processes x threads; the
#: console's N): each is a thread, or a process, on this machine.
MIN_CONTENDERS = 2
MAX_CONTENDERS = 128

T = TypeVar("T")


class Violation(enum.Enum):
    MULTIPLE_WINNERS = "multiple winners"
    NO_WINNER = "no winner"
    TAKEN_KEY_WON = "a write won over the stored item"
    WINNER_REPLACED = "winner replaced an item"
    LOSER_WITHOUT_ITEM = "loser without the winner's item"
    LOSER_SAW_OTHER = "loser saw another item"
    STORED_NOT_FIRST = "stored item is not the winner's"


@dataclass
class Answers(Generic[T]):
    """What one key's race produced, as the answers come in."""

    winners: list[tuple[T, T | None]] = field(default_factory=list)  # (wrote, its ALL_OLD)
    losers: list[T | None] = field(default_factory=list)  # the item each failed condition returned
    errors: list[str] = field(default_factory=list)  # the error code of every other answer
    stored: T | None = None  # read back after the race
    before: T | None = None  # stored before the race: nobody may win, every loser must see it

    @property
    def answers(self) -> int:
        return len(self.winners) + len(self.losers) + len(self.errors)

    @property
    def raced(self) -> bool:
        """Any answer came back (an aborted race leaves later keys untouched)."""
        return self.answers > 0


@dataclass(frozen=True, slots=True)
class KeyVerdict(Generic[T]):
    """The judgment of one key. ``first`` is the first writer's item when the winner count is
    right and the key could be judged; else ``None``, and the losers were not judged."""

    first: T | None
    unverified: bool  # an answer is missing, or no write won and an error came back
    losers: int  # failed conditions
    losers_with_item: int
    losers_with_first: int  # losers handed the first writer's item (0 when not judged)
    stored_is_first: bool
    errors: tuple[str, ...]
    violations: tuple[tuple[Violation, str], ...]  # (kind, an example's detail)

    @property
    def held(self) -> bool:
        """First-writer-wins shown: judged, no violation, no error."""
        return not self.unverified and not self.violations and not self.errors

    @property
    def losers_saw_first(self) -> bool:
        """Every answer but the winner's was a failed condition carrying the first writer's
        item."""
        return self.first is not None and not self.errors and self.losers_with_first == self.losers


def items_returned(keys: Iterable[Answers[T]]) -> bool:
    """Whether the endpoint returns the stored item on a failed condition: ``False`` only
    when some write failed its condition and none of them, in any key, carried an item."""
    losers = [seen for answers in keys for seen in answers.losers]
    return not losers or any(seen is not None for seen in losers)


def judge(answers: Answers[T], contenders: int, *, items_returned: bool = True) -> KeyVerdict[T]:
    """The verdict on one key raced by ``contenders`` writers (its complete answer count).
    With ``items_returned=False`` (the endpoint returns no item on a failed condition), losers
    without an item are not a violation."""
    winners, losers = answers.winners, answers.losers
    violations: list[tuple[Violation, str]] = []
    first: T | None = None
    unverified = False
    if len(winners) > 1:  # a violation whatever else happened
        replacing = sum(old is not None for _, old in winners)
        detail = f"{len(winners)} claims succeeded"
        if replacing:
            detail += f", {replacing} replacing another's item"
        violations.append((Violation.MULTIPLE_WINNERS, detail))
    elif answers.before is not None and winners:
        violations.append((Violation.TAKEN_KEY_WON, f"{winners[0][0]} won"))
    elif answers.answers < contenders:  # a contender died mid-claim: no verdict
        unverified = True
    elif answers.before is not None:
        first = answers.before
    elif winners:
        first, replaced = winners[0]
        if replaced is not None:
            violations.append((Violation.WINNER_REPLACED, f"ALL_OLD owner {replaced}"))
    elif answers.errors:  # an error may have hidden the winner
        unverified = True
    else:
        violations.append((Violation.NO_WINNER, "every claim failed its condition"))
    with_item = sum(seen is not None for seen in losers)
    right = 0
    stored = False
    if first is not None:
        right = sum(seen == first for seen in losers)
        if (missing := len(losers) - with_item) and items_returned:
            violations.append((Violation.LOSER_WITHOUT_ITEM, f"{missing} losers"))
        if other := with_item - right:
            violations.append((Violation.LOSER_SAW_OTHER, f"{other} losers"))
        stored = answers.stored == first
        if not stored:
            violations.append((Violation.STORED_NOT_FIRST, f"stored {answers.stored}"))
    return KeyVerdict(
        first,
        unverified,
        len(losers),
        with_item,
        right,
        stored,
        tuple(answers.errors),
        tuple(violations),
    )
