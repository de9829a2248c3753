"""``firstwrite console export-diagram``: the console's pictures as SVG files.

``export-diagram SCENARIO -o FILE`` runs that scenario as the console does (on a scratch engine
of its own, in memory) and writes its sequence diagram; ``export-diagram race -o FILE`` races
``--n`` claims (default 32) for one fresh key on an engine in memory and writes the timeline.
The file is a standalone SVG (its stylesheet inside: light and dark schemes, print; no script),
for docs and bug reports; ``-o -`` writes it to stdout. When the scenario's verdict or
first-writer-wins did not hold, the diagram is written all the same (it is the bug report) and
the exit status is 3. The console is imported only when the command runs, so the rest of the
CLI works without the ``[engine]`` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firstwrite.shared.command_line import CLIError, ExitCode, integer

if TYPE_CHECKING:
    from firstwrite.console.race import RaceResult

RACE = "race"
DEFAULT_N = 32


def add_commands(commands: Any) -> None:
    console = commands.add_parser(
        "console",
        help="the console's pictures, outside the console",
        description="The web console's pictures (a scenario's sequence diagram, the race's "
        "timeline) as standalone SVG files, for docs and bug reports.",
    )
    actions = console.add_subparsers(dest="action", metavar="ACTION", required=True)
    export = actions.add_parser(
        "export-diagram",
        help="run a scenario (or a race) and write its diagram as SVG",
        description="Run a scenario on a scratch engine in memory, or race N claims for one "
        "key, and write the picture the console draws of it as a standalone SVG file. "
        "Exit status 3 when the run did not hold (the diagram is written all the same).",
    )
    export.add_argument(
        "what",
        metavar="SCENARIO",
        help="a scenario's name as the console's URLs spell it (lease-takeover, ttl-race, "
        "throttling, transaction-cancelled, stale-replica, replay, hot-partition, "
        "redelivered-batch, worker-killed-after-charge, skewed-worker, regions-both-claimed), "
        "or 'race'",
    )
    export.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the SVG file to write ('-': stdout)"
    )
    export.add_argument(
        "--n",
        type=_claims,
        default=DEFAULT_N,
        help=f"race: the number of concurrent claims (2 to 128; default {DEFAULT_N})",
    )
    export.set_defaults(handler=export_diagram)


def _claims(text: str) -> int:
    from firstwrite.shared.first_writer_wins import MAX_CONTENDERS, MIN_CONTENDERS

    value = integer(text, "integer")
    if not MIN_CONTENDERS <= value <= MAX_CONTENDERS:
        raise argparse.ArgumentTypeError(
            f"must be between {MIN_CONTENDERS} and {MAX_CONTENDERS}, not {value}"
        )
    return value


def export_diagram(args: argparse.Namespace) -> int:
    from firstwrite.console import diagrams, scenarios

    if args.what == RACE:
        result = _race(args.n)
        text, held = diagrams.race_file(result), result.held
        failure = "first-writer-wins did not hold"
    else:
        scenario = scenarios.by_slug(args.what)
        if scenario is None:
            names = ", ".join([s.slug for s in scenarios.SCENARIOS] + [RACE])
            raise CLIError(f"there is no scenario {args.what!r}; there are {names}", ExitCode.USAGE)
        outcome = scenarios.run(scenario)
        text, held = diagrams.scenario_file(outcome, scenario.number), outcome.held
        failure = f"the scenario did not hold: {outcome.error or outcome.verdict}"
    _write(args.output, text)
    if not held:
        where = "stdout" if args.output == "-" else args.output
        raise CLIError(f"{failure} (the diagram is in {where})", ExitCode.VIOLATION)
    return ExitCode.OK


def _race(n: int) -> RaceResult:
    from firstwrite.console import race
    from firstwrite.engine import Engine, local_client

    with Engine(None) as engine:
        client = local_client(engine)
        _, key = race.validate(n, None)
        return race.race(client, n, key, hooks=engine.hooks)


def _write(output: str, text: str) -> None:
    if output == "-":
        sys.stdout.write(text)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"cannot write {output}: {exc.strerror or exc}") from None
