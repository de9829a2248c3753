"""``python -m firstwrite.demo``: the payments demo without the CLI.

The same options, one-line errors and exit statuses as ``firstwrite demo``
(:mod:`firstwrite.shared.demo_command` and :mod:`firstwrite.shared.command_line`, which the CLI
uses too)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from firstwrite.shared import demo_command
from firstwrite.shared.command_line import run

from .server import serve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="firstwrite demo", description=demo_command.DESCRIPTION)
    demo_command.add_arguments(parser)
    args = parser.parse_args(argv)

    def command() -> int:
        demo_command.check(args)
        return demo_command.serve_with(serve, args)

    return run(command)


if __name__ == "__main__":
    sys.exit(main())
