"""``python -m firstwrite.demo``: serve the payments demo (see :func:`firstwrite.demo.serve`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, not {port}")
    return port


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m firstwrite.demo",
        description="A payments API on the Idempotency-Key middleware, over the local engine "
        "(or DynamoDB with --aws). Ctrl-C stops it.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: %(default)s)"
    )
    parser.add_argument("--port", type=_port, default=8080, help="API port (default: %(default)s)")
    parser.add_argument(
        "--engine-port",
        type=_port,
        default=8000,
        help="the engine's DynamoDB endpoint port (default: %(default)s)",
    )
    parser.add_argument(
        "--db", default="firstwrite-demo.db", help="engine database file (default: %(default)s)"
    )
    parser.add_argument(
        "--aws",
        action="store_true",
        help="use DynamoDB (AWS_REGION, credentials, AWS_ENDPOINT_URL) instead of the engine",
    )
    args = parser.parse_args(argv)
    from .server import serve

    try:
        serve(args.host, args.port, args.engine_port, args.db, aws=args.aws)
    except OSError as exc:  # a busy port, a database in a missing directory: one line
        print(f"firstwrite demo: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
