"""The ``firstwrite`` command: one module per command group.

``demo`` (:mod:`.demo`), ``engine serve`` (:mod:`.engine`), ``table create|describe``
(:mod:`.table`), ``keys get|list|delete`` (:mod:`.keys`), ``race`` (:mod:`.race`), ``capacity``
(:mod:`.capacity`). Every failure the user can act on is one line on stderr,
``firstwrite: <why>``, never a traceback (``--debug`` shows it); exit statuses are listed by
``firstwrite --help`` (:data:`._common.EXIT_CODES_HELP`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from . import capacity, demo, engine, keys, race, table
from ._common import EXIT_CODES_HELP, CLIError, ExitCode
from .engine import READY_PREFIX
from .target import explain, target_of

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
    for group in (demo, engine, table, keys, race, capacity):
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    target = target_of(args) if hasattr(args, "endpoint_url") else None  # the target options
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except CLIError as exc:
        return _fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return _fail("interrupted", ExitCode.INTERRUPTED)
    except BrokenPipeError:  # stdout closed early (`| head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    except Exception as exc:
        if args.debug:
            raise
        known = explain(exc, target)
        if known is not None:
            return _fail(str(known), known.code)
        if isinstance(exc, OSError):  # e.g. the port is taken
            return _fail(str(exc), ExitCode.ERROR)
        return _fail(
            f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            ExitCode.ERROR,
        )


def _fail(message: str, code: int) -> int:
    print(f"firstwrite: {message}", file=sys.stderr)
    return code
