"""``firstwrite demo``: the payments demo service on the middleware (``make run``).

Its options and checks are :mod:`firstwrite.shared.demo_command`, which ``python -m
firstwrite.demo`` parses too; it hands them to :func:`firstwrite.demo.serve`, imported only when
the command runs so the rest of the CLI works without the web stack installed.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from firstwrite.shared import demo_command
from firstwrite.shared.command_line import INSTALL_ENGINE, CLIError, missing_extra


def add_commands(commands: Any) -> None:
    demo = commands.add_parser("demo", help=demo_command.HELP, description=demo_command.DESCRIPTION)
    demo_command.add_arguments(demo)
    demo.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    demo_command.check(args)
    try:
        demo = importlib.import_module("firstwrite.demo")
    except ImportError as exc:
        raise missing_extra(exc) or CLIError(
            f"the demo service cannot start: {exc} ({INSTALL_ENGINE}, or run `make run`)"
        ) from None
    return demo_command.serve_with(demo.serve, args)
