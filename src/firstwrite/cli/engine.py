"""``firstwrite engine serve``: the local DynamoDB engine over HTTP.

It prints one ready line, ``firstwrite engine listening on http://HOST:PORT (...)``, once it
accepts requests (``--port 0`` picks a free port). SIGINT or SIGTERM shut it down cleanly:
in-flight requests finish, the database is closed, ``firstwrite engine stopped`` is printed,
exit status 0. Without ``--db`` it serves the database every other command opens by default
(``$FIRSTWRITE_LOCAL_DB`` or ``~/.firstwrite/local.db``); ``--db :memory:`` keeps nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from firstwrite.shared.command_line import CLIError, port

from ._common import positive_int

if TYPE_CHECKING:
    from firstwrite.engine.api import Engine

READY_PREFIX = "firstwrite engine listening on "
STOPPED = "firstwrite engine stopped"
MEMORY = ":memory:"


def _credential(text: str) -> tuple[str, str]:
    key, sep, secret = text.partition(":")
    if not sep or not key or not secret:
        raise argparse.ArgumentTypeError(f"expected KEY:SECRET, got {text!r}")
    return key, secret


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def add_commands(commands: Any) -> None:
    engine = commands.add_parser(
        "engine",
        help="the local DynamoDB engine",
        description="The local DynamoDB engine (DynamoDB's API on SQLite).",
    )
    engine_commands = engine.add_subparsers(dest="engine_command", metavar="COMMAND", required=True)
    serve = engine_commands.add_parser(
        "serve",
        help="serve DynamoDB's JSON protocol over HTTP",
        description="Serve the engine over HTTP (DynamoDB JSON 1.0, any AWS SDK or the AWS CLI). "
        "Prints one ready line once it accepts requests; SIGINT/SIGTERM stop it cleanly.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    serve.add_argument(
        "--port",
        type=port,
        default=8000,
        help="port to bind; 0 picks a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--db",
        metavar="PATH",
        default=None,
        help="SQLite database file (default: $FIRSTWRITE_LOCAL_DB or ~/.firstwrite/local.db, "
        f"the database the other commands open by default; {MEMORY}: in memory, kept nowhere)",
    )
    serve.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="a Host name to answer besides loopback ones (repeatable; '*': any): a server "
        "bound to a loopback address refuses other names, so that a page of another site "
        "re-pointed at this address (DNS rebinding) is refused",
    )
    serve.add_argument(
        "--allow-origin",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="a web page origin (scheme://host[:port]) whose browser apps may call the "
        "DynamoDB endpoint, answered with DynamoDB's CORS headers (repeatable; '*': every "
        "origin, as DynamoDB does: use it with --require-auth); other origins are refused "
        "(default: none). The admin API and the console stay same-origin",
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
        help="verify SigV4 on every route (data plane, admin API, console; browsers sign in "
        "at /_firstwrite/session) against this access key pair (repeatable); without it any "
        "credentials are accepted",
    )
    serve.add_argument(
        "--no-console",
        action="store_true",
        help="do not serve the web console at /console/",
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
        help="throttle PROVISIONED tables beyond their capacity, and any partition key beyond "
        "DynamoDB's per-partition ceiling (1,000 WCU, 3,000 RCU a second), as DynamoDB does "
        "(default: off)",
    )
    serve.add_argument(
        "--threads",
        type=positive_int,
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
    serve.set_defaults(handler=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    from firstwrite.engine.api import Engine
    from firstwrite.engine.features.ttl import TTLConfig
    from firstwrite.idempotency.local import default_path

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    credentials = dict(args.require_auth) or None
    if args.db is None:  # the layer's own default, as every other command: made if missing
        args.db = default_path()
        os.makedirs(os.path.dirname(os.path.abspath(args.db)), exist_ok=True)
    elif args.db != MEMORY:
        parent = os.path.dirname(os.path.abspath(args.db))
        if not os.path.isdir(parent):
            raise CLIError(f"--db {args.db}: directory {parent} does not exist")

    def ready(url: str) -> None:
        where = args.db
        auth = "SigV4 verified" if credentials else "any credentials"
        print(
            f"{READY_PREFIX}{url} (db {where}, durability {args.durability}, {auth})",
            flush=True,
        )
        if not args.no_console:
            print(f"firstwrite console on {url}/console/", flush=True)

    ttl = TTLConfig(sweep_interval=args.ttl_sweep_interval or None, lag=args.ttl_lag)
    with Engine(
        None if args.db == MEMORY else args.db,
        durability=args.durability,
        ttl_config=ttl,
        enforce_throughput=args.enforce_throughput,
    ) as engine:
        try:
            run_server(engine, args, credentials, ready)
        except OSError as exc:  # the port: say which option moves it
            from firstwrite.engine.server.runner import LISTEN_ERROR, listen_error

            if not str(exc.strerror).startswith(LISTEN_ERROR):
                raise
            raise listen_error(args.host, args.port, exc.errno, "(--port)") from None
    print(STOPPED, flush=True)
    return 0


def run_server(
    engine: Engine,
    args: argparse.Namespace,
    credentials: dict[str, str] | None,
    ready: Callable[[str], None],
) -> None:
    """Build and run the HTTP server until a signal; the one place routes are mounted."""
    from firstwrite.engine.server.app import Mounted, serve

    mounts: dict[str, Mounted] = {}
    if not args.no_console:
        # The console lives outside the engine (it decodes the layer's records); the server
        # mounts it behind the same auth and same-origin rules as the admin API. No seeding:
        # an emulator that test suites point at must not grow a table nobody created (the
        # overview page's "Seed" button writes the examples when asked).
        from firstwrite.console import PUBLIC_PATHS, create_console

        console = create_console(engine, seed=False, allowed_hosts=args.allow_host)
        mounts["/console"] = Mounted(console, public=PUBLIC_PATHS)
    serve(
        engine,
        args.host,
        args.port,
        credentials=credentials,
        mounts=mounts,
        threads=args.threads,
        ready=ready,
        allowed_hosts=args.allow_host,
        allowed_origins=args.allow_origin,
    )
