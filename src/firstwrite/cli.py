"""The ``firstwrite`` command.

``firstwrite engine serve`` runs the local DynamoDB engine over HTTP and prints one ready line,
``firstwrite engine listening on http://HOST:PORT``, once it accepts requests (``--port 0`` picks
a free port). SIGINT or SIGTERM shut it down cleanly: in-flight requests finish, the database is
closed, exit status 0.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

READY_PREFIX = "firstwrite engine listening on "


def _credential(text: str) -> tuple[str, str]:
    key, sep, secret = text.partition(":")
    if not sep or not key or not secret:
        raise argparse.ArgumentTypeError(f"expected KEY:SECRET, got {text!r}")
    return key, secret


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, not {port}")
    return port


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="firstwrite",
        description="Exactly-once request deduplication on DynamoDB, and a local DynamoDB engine.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    engine = commands.add_parser("engine", help="the local DynamoDB engine")
    engine_commands = engine.add_subparsers(dest="engine_command", metavar="COMMAND", required=True)
    serve = engine_commands.add_parser(
        "serve",
        help="serve DynamoDB's JSON protocol over HTTP",
        description="Serve the engine over HTTP (DynamoDB JSON 1.0, any AWS SDK).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    serve.add_argument(
        "--port",
        type=_port,
        default=8000,
        help="port to bind; 0 picks a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--db", metavar="PATH", default=None, help="SQLite database file (default: in memory)"
    )
    serve.add_argument(
        "--durability",
        choices=("full", "normal"),
        default="normal",
        help="full: fsync every commit; normal: survive a process crash (default: %(default)s)",
    )
    serve.add_argument(
        "--require-auth",
        metavar="KEY:SECRET",
        type=_credential,
        action="append",
        default=[],
        help="verify SigV4 signatures against this access key pair (repeatable); "
        "without it any credentials are accepted",
    )
    serve.add_argument(
        "--ttl-sweep-interval",
        type=_seconds,
        default=1.0,
        metavar="SECONDS",
        help="time between TTL sweeps; 0 disables the background sweeper (default: %(default)s)",
    )
    serve.add_argument(
        "--ttl-lag",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="extra delay after expiry before TTL deletes an item, up to DynamoDB's "
        "'within a few days' (default: %(default)s)",
    )
    serve.add_argument(
        "--enforce-throughput",
        action="store_true",
        help="throttle PROVISIONED tables beyond their capacity, as DynamoDB does (default: off)",
    )
    serve.add_argument(
        "--threads",
        type=_positive,
        default=32,
        help="worker threads running engine calls with --durability full or while faults are "
        "on; otherwise calls run on the event loop, which is faster (default: %(default)s)",
    )
    serve.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="(default: %(default)s)",
    )
    serve.set_defaults(handler=_engine_serve)
    return parser


def _engine_serve(args: argparse.Namespace) -> int:
    from .engine.api import Engine
    from .engine.server import serve
    from .engine.ttl import TTLConfig

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    credentials = dict(args.require_auth) or None

    def ready(url: str) -> None:
        where = args.db or ":memory:"
        auth = "SigV4 verified" if credentials else "any credentials"
        print(
            f"{READY_PREFIX}{url} (db {where}, durability {args.durability}, {auth})",
            flush=True,
        )

    ttl = TTLConfig(sweep_interval=args.ttl_sweep_interval or None, lag=args.ttl_lag)
    with Engine(
        args.db,
        durability=args.durability,
        ttl_config=ttl,
        enforce_throughput=args.enforce_throughput,
    ) as engine:
        serve(
            engine,
            args.host,
            args.port,
            credentials=credentials,
            threads=args.threads,
            ready=ready,
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except OSError as exc:  # e.g. the port is taken: one line, not a traceback
        print(f"firstwrite: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
