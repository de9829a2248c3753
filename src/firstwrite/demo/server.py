"""Running the demo: the payments API on one port, the engine's DynamoDB endpoint on another.

Locally (the default) one engine on one database file serves both: the API reaches it in
process (a boto3 client bound to it, no sockets), and the engine's own HTTP server answers the
AWS CLI and any SDK on ``engine_port``. The endpoint gets a port of its own rather than a path
under the API because DynamoDB clients address the service at an endpoint's root (``POST /``
with ``X-Amz-Target``): on its own port the usual ``--endpoint-url http://127.0.0.1:8000``
works unchanged, the engine server keeps its own limits and optional SigV4 check, and no API
route can shadow it.

With ``aws=True`` the API runs on DynamoDB itself, configured the standard way (``AWS_REGION``
or ``AWS_DEFAULT_REGION``, credentials from the usual chain, ``AWS_ENDPOINT_URL`` for any
other endpoint); no engine is started.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import socket
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TextIO

from firstwrite.engine.server import connection, runner
from firstwrite.engine.server.origins import OriginPolicy, Protected

from .app import ANONYMOUS, create_app
from .bank import Bank

__all__ = ["serve"]


def serve(
    host: str = "127.0.0.1",
    port: int = 8080,
    engine_port: int = 8000,
    db: str = "firstwrite-demo.db",
    mounts: Mapping[str, Any] | None = None,
    *,
    aws: bool = False,
    allowed_hosts: Iterable[str] = (),
    out: TextIO | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the payments demo until SIGINT or SIGTERM, then shut down cleanly and return
    (on the main thread, a further SIGINT/SIGTERM is then ignored, as by
    :func:`firstwrite.engine.serve`).

    Prints where the API listens, a copy-paste ``curl`` that shows a replay, and the DynamoDB
    endpoint (to ``out``, default stdout). ``port=0``/``engine_port=0`` pick free ports.
    ``mounts`` adds ASGI apps under path prefixes (not guarded: e.g. ``{"/console": app}``).
    ``ready(url)`` is called once the API accepts requests. A port in use raises ``OSError``
    before anything starts. Bound to a loopback address, the demo, its console and its engine
    endpoint answer loopback ``Host`` names only, plus ``allowed_hosts`` (``["*"]``: any), and
    refuse a state change from a page of another origin (403): the engine's own policy
    (:class:`~firstwrite.engine.server.origins.OriginPolicy`), with its connection limits.
    """
    allowed_hosts = tuple(allowed_hosts)
    out = out or sys.stdout
    if not aws:
        folder = os.path.dirname(os.path.abspath(db))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"no directory {folder!r} for the database file {db!r}")
    # A busy port: OSError naming the address and whose it is (the demo binds two).
    api_socket = runner.bind(host, port, "for the demo (--port; make run PORT=...)")
    with contextlib.ExitStack() as stack:
        stack.callback(api_socket.close)
        if aws:
            client = _aws_client()
            endpoint = None
            where = f"DynamoDB ({client.meta.region_name}, {client.meta.endpoint_url})"
            guard = None
            console = False
        else:
            engine, client, endpoint = stack.enter_context(
                _local(db, host, engine_port, allowed_hosts)
            )
            where = f"the local engine, database {db}"
            # The console watches the demo's own engine, and its metrics page counts the
            # demo's claims too: one MemoryMetrics shared by the demo's guard and the console.
            from firstwrite.console import create_console
            from firstwrite.idempotency import Idempotency, MemoryMetrics

            metrics = MemoryMetrics()
            # The engine's clock is DynamoDB's (its answers are dated from it; the console
            # can move it): the demo's guard reads leases on it.
            guard = Idempotency(client=client, metrics=metrics, clock=engine.clock.now)
            guard.ensure_table()
            console_app = create_console(engine, metrics=metrics, allowed_hosts=allowed_hosts)
            mounts = {"/console": console_app, **(mounts or {})}
            console = True
        Bank(client).setup()
        app = Protected(
            create_app(client, guard=guard, mounts=mounts),
            OriginPolicy(host, allowed_hosts),
            what="the payments demo",
        )
        url = runner.url_of(api_socket)

        records = None if aws else _records_commands(db, guard)

        def announce() -> None:
            _print_banner(out, url, where, endpoint, console=console, records=records)
            if ready is not None:
                ready(url)

        _run(app, api_socket, announce)
        print("firstwrite demo stopped", file=out, flush=True)


@contextlib.contextmanager
def _local(
    db: str, host: str, engine_port: int, allowed_hosts: tuple[str, ...]
) -> Iterator[tuple[Any, Any, str]]:
    """The engine on ``db``, a client bound to it, and its HTTP endpoint on ``engine_port``."""
    from firstwrite.engine import Engine, ServerThread, local_client
    from firstwrite.idempotency import IdempotencyConfig
    from firstwrite.idempotency.clients import configured

    with Engine(db) as engine:
        server = ServerThread(engine, host, engine_port, allowed_hosts=allowed_hosts)
        try:
            endpoint = server.start()
        except OSError as exc:
            if not str(exc.strerror).startswith(runner.LISTEN_ERROR):
                raise
            what = "for the demo's DynamoDB endpoint (--engine-port; make run ENGINE_PORT=...)"
            raise runner.listen_error(host, engine_port, exc.errno, what) from None
        try:
            # Built as the layer builds its own clients (idempotency/clients.py): one attempt a
            # call, timeouts within the guard's budget, so no call needs the budget's pool.
            client = configured(lambda **kw: local_client(engine, **kw), IdempotencyConfig().budget)
            yield engine, client, endpoint
        finally:
            server.stop()


def _aws_client() -> Any:
    from firstwrite.idempotency import dynamodb_client

    return dynamodb_client()


def _run(app: Any, sock: socket.socket, on_ready: Callable[[], None]) -> None:
    """uvicorn on ``sock`` until SIGINT/SIGTERM (a second one stops waiting for requests), run
    the way the engine's own server runs it (:mod:`firstwrite.engine.server.runner`): its
    HTTP/1.1 protocol and limits, no lifespan, no proxy headers."""
    server = runner.server_class()(runner.config(app, connection.Limits(), threads=40))
    server.ready_callback = on_ready
    runner.serve_until_signalled(server, sock)


def _records_commands(db: str, guard: Any) -> Callable[[str], list[str]]:
    """The ``firstwrite keys`` commands that read the demo's records from where it was started:
    the ``firstwrite`` beside this interpreter (``.venv-run/bin/firstwrite`` after ``make run``),
    the demo's database and table, and the scope of an anonymous ``POST /payments``."""
    program = os.path.join(os.path.dirname(sys.executable), "firstwrite")
    if not os.path.exists(program):
        program = "firstwrite"
    elif not os.path.relpath(program).startswith(".."):
        program = os.path.relpath(program)
    base = f"--db {shlex.quote(db)} --table {shlex.quote(guard.config.table_name)}"
    scope = shlex.quote(f"{ANONYMOUS} POST /payments")

    def commands(key: str) -> list[str]:
        return [
            f"  {program} keys list {base}",
            f"  {program} keys get {shlex.quote(key)} --scope {scope} {base}",
        ]

    return commands


def _print_banner(
    out: TextIO,
    url: str,
    where: str,
    endpoint: str | None,
    *,
    console: bool = False,
    records: Callable[[str], list[str]] | None = None,
) -> None:
    key = f"demo-{secrets.token_hex(4)}"
    body = '{"account": "acct_alice", "amount": 1250, "currency": "EUR"}'
    lines = [
        f"firstwrite demo listening on {url} (payments API on {where})",
        "",
        "Pay twice with the same Idempotency-Key: the second answer is the stored first one",
        "(Idempotent-Replayed: true), and Alice is charged once:",
        "",
        f"  for i in 1 2; do curl -si {url}/payments -H 'Idempotency-Key: {key}' "
        f"-H 'Content-Type: application/json' -d '{body}'; echo; done",
        f"  curl -s {url}/accounts/acct_alice",
        "",
    ]
    if records is not None:
        lines += [
            "Its idempotency records, decoded (run from this directory):",
            *records(key),
            "",
        ]
    if console:
        from firstwrite.console.scenarios import count_in_words

        lines += [
            f"Console (tables, decoded records, a claim race, {count_in_words()} failure "
            f"scenarios): {url}/console/",
            "  The race, drawn as a timeline: one lane per thread, who sent first, the one that won,",
            f"  every loser pointing at the winner's item: {url}/console/race",
            "  The scenarios, each run drawn as a sequence diagram: every DynamoDB call and its",
            f"  answer, the clock jumps, the record's state after each step: {url}/console/scenarios",
            "",
        ]
    if endpoint is not None:
        lines += [
            f"DynamoDB endpoint (the engine, for the AWS CLI and any SDK): {endpoint}",
            f"  aws dynamodb scan --table-name demo-payments --endpoint-url {endpoint} "
            "--region us-east-1 --no-sign-request",
            "",
        ]
    lines.append("Ctrl-C stops it.")
    print("\n".join(lines), file=out, flush=True)
