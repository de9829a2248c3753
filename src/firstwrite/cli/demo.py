"""``firstwrite demo``: the payments demo service on the middleware (``make run``).

Parses its options and hands them to :func:`firstwrite.demo.serve`, imported only when the
command runs so the rest of the CLI works without the web stack installed. ``python -m
firstwrite.demo`` is this command too.
"""

from __future__ import annotations

import argparse
import importlib
import os
from typing import Any

from firstwrite.shared.command_line import CLIError, port

DEFAULT_DB = "firstwrite-local.db"


def add_commands(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="run the payments demo service (what `make run` starts)",
        description="Run the payments demo: POST /payments deduplicated by the Idempotency-Key "
        "header, on the local engine (one database file, no AWS account). The engine's "
        "DynamoDB endpoint stays reachable for the AWS CLI while it runs. Stops on Ctrl-C.",
    )
    demo.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    demo.add_argument(
        "--port", type=port, default=8080, help="the demo's HTTP port (default: %(default)s)"
    )
    demo.add_argument(
        "--engine-port",
        type=port,
        default=8000,
        help="port of the engine's DynamoDB endpoint, served beside the demo; "
        "0 picks a free one (default: %(default)s)",
    )
    demo.add_argument(
        "--db",
        metavar="PATH",
        default=DEFAULT_DB,
        help="the local engine database file (default: %(default)s)",
    )
    demo.add_argument(
        "--aws",
        action="store_true",
        help="run on DynamoDB with the standard AWS settings (AWS_REGION, credentials, "
        "AWS_ENDPOINT_URL) instead of the local engine; no engine is started",
    )
    demo.set_defaults(handler=demo_command)


def demo_command(args: argparse.Namespace) -> int:
    if not args.aws:
        parent = os.path.dirname(os.path.abspath(args.db))
        if not os.path.isdir(parent):
            raise CLIError(f"--db {args.db}: directory {parent} does not exist")
        if args.port != 0 and args.port == args.engine_port:
            raise CLIError(f"--port and --engine-port are both {args.port}")
    try:
        demo = importlib.import_module("firstwrite.demo")
    except ImportError as exc:
        raise CLIError(
            f"the demo service cannot start: {exc} "
            "(install firstwrite with the [engine] extra, or run `make run`)"
        ) from None
    if args.aws:
        demo.serve(args.host, args.port, args.engine_port, args.db, aws=True)
    else:
        demo.serve(args.host, args.port, args.engine_port, args.db)
    return 0
