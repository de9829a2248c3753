"""The idempotency scenarios on the bound boto3 client, counted in instructions (callgrind).

Time per request is what the target is about, but on this shared machine a time ratio moves by
several per cent between runs, and a time bound (the least work) runs a few lines of Python
that stay in the CPU caches between botocore's calls, where a real layer's code does not. The
instructions each contender executes per request do not depend on the machine's load or on the
caches: they say how much work a layer adds to its calls, and whether the least work a layer
must add already costs more than the target allows.

Run as a program (``python -m bench.idempotency_instructions N REPS SCENARIO...``) under
callgrind by :func:`tables`: for each scenario and contender, set up, warm up (not counted),
then ``REPS`` counted pieces of ``N`` requests each.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import _callgrind
from ._calls import allowance
from ._common import Series, Settings, Table, Target
from .idempotency_contenders import CallsAlone, LeastWork, Scenario, least_work
from .idempotency_libraries import (
    OURS,
    POWERTOOLS,
    SCENARIOS,
    TIME_TARGET,
    FirstwriteLib,
    Library,
    PowertoolsLib,
    Shared,
)

UNIT = "k instructions/request"
WARMUP = 30
# (contender class, library): the libraries, their calls alone, and the least-work bound
_CONTENDERS: list[tuple[type[Scenario], Callable[[Shared], Library]]] = [
    (Scenario, FirstwriteLib),
    (Scenario, PowertoolsLib),
    (CallsAlone, FirstwriteLib),
    (CallsAlone, PowertoolsLib),
    (LeastWork, FirstwriteLib),
]


def _child(requests: int, reps: int, scenarios: list[str]) -> None:
    """Count every contender of ``scenarios``; prints which piece is whose, as JSON."""
    pieces: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="idem-instructions-") as directory:
        shared = Shared(Path(directory))
        try:
            for scenario in scenarios:
                for kind, factory in _CONTENDERS:
                    contender = kind(shared, factory, scenario)
                    contender.setup()
                    try:
                        _callgrind.count_pieces(contender.op, WARMUP, requests, reps)
                    finally:
                        contender.teardown()
                    pieces += [(scenario, contender.name)] * reps
        finally:
            shared.close()
    print(json.dumps(pieces))


def tables(settings: Settings, log: Callable[[str], None]) -> tuple[list[Table], str | None]:
    """One table per scenario (the bound client), or why there are none."""
    requests, reps = (5, 2) if settings.quick else (150, 2)
    log(f"  idempotency / instructions: {requests} requests x {reps} per contender (callgrind)")
    args = [str(requests), str(reps), *SCENARIOS]
    values, why = _callgrind.count_module("bench.idempotency_instructions", args, per=requests)
    if why is not None:
        return [], why
    result = []
    for scenario in SCENARIOS:
        by_name = values.get(scenario, {})
        table = Table(
            title=f"{scenario}, boto3 bound in process, instructions (callgrind)",
            series=[Series(n, v, unit=UNIT) for n, v in by_name.items()],
            ours=[OURS],
            targets=[Target(OURS, POWERTOOLS, maximum=TIME_TARGET, bound=least_work(OURS))],
        )
        _own_work_note(table)
        result.append(table)
    return result, None


def _own_work_note(table: Table) -> None:
    """What the layer adds to its calls, and what the target leaves it, in instructions."""
    share, least = allowance(table, OURS, POWERTOOLS, TIME_TARGET), table.get(least_work(OURS))
    if share is None or least is None or not least.values:
        return
    own, allowed = share.own, share.allowed
    minimum = least.median - share.calls
    for target in table.targets:
        target.why = (
            f"{OURS}'s own work {own:,.0f}k instructions; the target allows {allowed:,.0f}k "
            f"on its calls, the least work is {minimum:,.0f}k"
            if allowed > 0
            else f"{OURS}'s calls alone miss it: {share.calls / share.theirs:.3f}x"
        )
    table.notes.append(
        f"Own work beside the calls: {OURS} {own:,.0f}k instructions per request, "
        f"{POWERTOOLS} {share.their_own:,.0f}k; the least work any "
        f"payload-validating layer adds to {OURS}'s calls: {minimum:,.0f}k; on these calls "
        f"the target allows {OURS} "
        + (
            f"{allowed:,.0f}k ({allowed - minimum:,.0f}k beyond the least work)."
            if allowed > 0
            else "nothing at all (its calls alone miss it)."
        )
    )


if __name__ == "__main__":
    _child(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
