"""The payments demo's command line.

Parsed alike by ``firstwrite demo`` and ``python -m firstwrite.demo``: its options, the checks made before anything starts, and the call to
:func:`firstwrite.demo.serve` they make.

It sits here, not in :mod:`firstwrite.demo`, because the CLI must build its parser without
importing the demo (the demo needs the web stack, the rest of the CLI does not), and the demo
must run without importing the CLI.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from .command_line import CLIError, port

DEFAULT_DB = "firstwrite-local.db"
HELP = "run the payments demo service (what `make run` starts)"
DESCRIPTION = (
    "Run the payments demo: POST /payments deduplicated by the Idempotency-Key "
    "header, on the local engine (one database file, no AWS account). The engine's "
    "DynamoDB endpoint stays reachable for the AWS CLI while it runs. Stops on Ctrl-C."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options, on ``parser``."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=port, default=8080, help="the demo's HTTP port (default: %(default)s)"
    )
    parser.add_argument(
        "--engine-port",
        type=port,
        default=8000,
        help="port of the engine's DynamoDB endpoint, served beside the demo; "
        "0 picks a free one (default: %(default)s)",
    )
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=DEFAULT_DB,
        help="the local engine database file (default: %(default)s)",
    )
    parser.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="a Host name to answer besides loopback ones (repeatable; '*': any): a server "
        "bound to a loopback address refuses other names, so that a page of another site "
        "re-pointed at this address (DNS rebinding) is refused",
    )
    parser.add_argument(
        "--aws",
        action="store_true",
        help="run on DynamoDB with the standard AWS settings (AWS_REGION, credentials, "
        "AWS_ENDPOINT_URL) instead of the local engine; no engine is started",
    )


def check(args: argparse.Namespace) -> None:
    """Refuse, as a :class:`CLIError`, options that cannot work (before anything starts)."""
    if not args.aws:
        parent = os.path.dirname(os.path.abspath(args.db))
        if not os.path.isdir(parent):
            raise CLIError(f"--db {args.db}: directory {parent} does not exist")
        if args.port != 0 and args.port == args.engine_port:
            raise CLIError(f"--port and --engine-port are both {args.port}")


def serve_with(serve: Callable[..., Any], args: argparse.Namespace) -> int:
    """Call ``serve`` (:func:`firstwrite.demo.serve`) with the options; the exit status."""
    hosts = {"allowed_hosts": args.allow_host} if args.allow_host else {}
    if args.aws:
        serve(args.host, args.port, args.engine_port, args.db, aws=True, **hosts)
    else:
        serve(args.host, args.port, args.engine_port, args.db, **hosts)
    return 0
