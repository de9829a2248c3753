"""The ``firstwrite`` command: one module per command group.

``demo`` (:mod:`.demo`), ``engine serve`` (:mod:`.engine`), ``table create|describe``
(:mod:`.table`), ``keys get|list|delete`` (:mod:`.keys`), ``results orphans`` (:mod:`.results`), ``race`` (:mod:`.race`), ``capacity``
(:mod:`.capacity`), ``console export-diagram`` (:mod:`.console`). Every failure the user can act on is one line on stderr,
``firstwrite: <why>``, never a traceback (``--debug`` shows it); exit statuses are listed by
``firstwrite --help``. Both come from :mod:`firstwrite.shared.command_line`, which
``python -m firstwrite.demo`` runs its command line with too.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import metadata

from firstwrite.shared.command_line import EXIT_CODES_HELP, ExitCode, run

from . import capacity, console, demo, engine, keys, race, results, table
from .engine import READY_PREFIX
from .target import target_of

__all__ = ["READY_PREFIX", "ExitCode", "build_parser", "main"]


def _version() -> str:
    try:
        return metadata.version("firstwrite")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="firstwrite",
        description="Exactly-once request deduplication on DynamoDB, and a local DynamoDB "
        "engine. Commands that talk to DynamoDB use the local engine database by default "
        "(--db PATH); --endpoint-url URL or --aws point them elsewhere.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"firstwrite {_version()}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an unexpected error"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in (demo, engine, table, keys, results, race, capacity, console):
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    target = target_of(args) if hasattr(args, "endpoint_url") else None  # the target options
    return run(
        lambda: args.handler(args),
        debug=args.debug,
        where=target.describe if target is not None else None,
    )
