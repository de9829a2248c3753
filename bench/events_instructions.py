"""The SQS batch scenarios counted in instructions (callgrind), with each library's calls alone.

Time per record is what the target is about, but on a shared machine a time ratio moves by
several per cent between runs; the instructions each contender executes per record do not.
Beside the three contenders of :mod:`.events`, each library's DynamoDB calls for a batch are
recorded once and replayed on the same client with none of its code around them ("calls
alone", fresh key values per batch on a first delivery): what it would cost if its own work
were free. So the report can say what a gap to the target is made of: the calls a library
makes, or the Python it runs beside them.

Run as a program (``python -m bench.events_instructions BATCHES REPS SCENARIO...``) under
callgrind by :func:`tables`: per scenario and contender, set up, warm up (not counted), then
``REPS`` counted pieces of ``BATCHES`` batches each.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import _callgrind
from ._calls import Replayed, allowance, calls_alone, record_calls, replay, replayable
from ._common import Series, Settings, Table, Target
from .events_contenders import (
    BATCH,
    BOUND,
    OURS,
    POWERTOOLS,
    SCENARIOS,
    TIME_TARGET,
    Bare,
    BatchContender,
    Ours,
    Powertools,
    Shared,
)

UNIT = "k instructions/record"
WARMUP = 3


class CallsAlone(BatchContender):
    """``inner``'s DynamoDB calls for one batch, replayed with nothing around them; each must
    end as the recorded one did (written, or its condition failed)."""

    def __init__(self, inner: BatchContender) -> None:
        super().__init__(inner.shared, inner.scenario)
        self.inner = inner
        self.name = calls_alone(inner.name)
        self._calls: list[Replayed] = []
        self._ccf: type[BaseException] = Exception

    def setup(self) -> None:
        self.inner.setup()
        client = self.shared.client
        self._ccf = client.exceptions.ConditionalCheckFailedException
        recorded = record_calls(client, lambda: self.inner.op(-1))
        self._calls = replayable(client, recorded, fresh=self.scenario == SCENARIOS[0])

    def op(self, i: int) -> None:
        replay(self._calls, i, self._ccf, self.name)


def _contenders(shared: Shared, scenario: str) -> list[BatchContender]:
    return [
        Ours(shared, scenario),
        Powertools(shared, scenario),
        Bare(shared, scenario),
        CallsAlone(Ours(shared, scenario)),
        CallsAlone(Powertools(shared, scenario)),
    ]


def _child(batches: int, reps: int, scenarios: list[str]) -> None:
    """Count every contender of ``scenarios``; prints which piece is whose, as JSON."""
    pieces: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="events-instructions-") as directory:
        shared = Shared(Path(directory))
        try:
            for scenario in scenarios:
                for contender in _contenders(shared, scenario):
                    contender.setup()
                    _callgrind.count_pieces(contender.op, WARMUP, batches, reps)
                    pieces += [(scenario, contender.name)] * reps
        finally:
            shared.engine.close()
    print(json.dumps(pieces))


def tables(settings: Settings, log: Callable[[str], None]) -> tuple[list[Table], str | None]:
    """One table per scenario, or why there are none."""
    batches, reps = (1, 2) if settings.quick else (20, 2)
    log(f"  events / instructions: {batches} batches x {reps} per contender (callgrind)")
    args = [str(batches), str(reps), *SCENARIOS]
    values, why = _callgrind.count_module("bench.events_instructions", args, per=batches * BATCH)
    if why is not None:
        return [], why
    result = []
    for scenario in SCENARIOS:
        table = Table(
            title=f"SQS batch of {BATCH}, {scenario}: instructions per record (callgrind)",
            series=[Series(n, v, unit=UNIT) for n, v in values.get(scenario, {}).items()],
            ours=[OURS],
            targets=[Target(OURS, POWERTOOLS, maximum=TIME_TARGET, bound=calls_alone(OURS))],
        )
        _split_note(table)
        result.append(table)
    return result, None


def _split_note(table: Table) -> None:
    """What each library spends per record on its calls and beside them, and what the target
    leaves firstwrite's own work on its calls."""
    share, bare = allowance(table, OURS, POWERTOOLS, TIME_TARGET), table.get(BOUND)
    if share is None or bare is None:
        return
    calls, own, their_own, allowed = share.calls, share.own, share.their_own, share.allowed
    table.notes.append(
        f"Per record: {OURS} {calls:,.0f}k instructions in its calls and {own:,.0f}k "
        f"beside them; {POWERTOOLS} {share.theirs - their_own:,.0f}k and {their_own:,.0f}k. "
        f"The {BOUND} take {bare.median:,.0f}k: {OURS}'s calls cost "
        + (
            f"{calls - bare.median:,.0f}k more (what its conditions check and its items carry). "
            if calls >= bare.median
            else f"{bare.median - calls:,.0f}k less (a batch read instead of a claim each). "
        )
        + f"On its calls the target leaves {OURS}'s own work "
        + (f"{allowed:,.0f}k." if allowed > 0 else "nothing at all (its calls alone miss it).")
    )
    for target in table.targets:
        target.why = (
            f"its own work {own:,.0f}k instructions per record; the target allows "
            f"{allowed:,.0f}k on its calls"
            if allowed > 0
            else f"{OURS}'s calls alone miss it: {calls / share.theirs:.3f}x"
        )


if __name__ == "__main__":
    _child(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
