"""``firstwrite race``: concurrent claims of the same keys, checking first-writer-wins.

Every contender (``--processes`` x ``--threads``) sends the layer's own claim request (the
conditional ``PutItem`` with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``) for every key;
all contenders wait at a barrier before each key, so the claims of one key arrive together.
First-writer-wins holds when, for every key:

* exactly one claim succeeded, and it replaced nothing (its ``ALL_OLD`` is empty);
* every other claim failed with ``ConditionalCheckFailedException`` carrying the winner's item;
* a strongly consistent read afterwards returns the winner's item.

Anything else is a violation (exit status 3), except that an endpoint returning no item to any
loser is reported apart (``items_returned``), its losers unchecked for the item. Errors (throttling, timeouts) are counted apart:
they leave a key unverified, not violated (exit status 1). botocore's retries are off, so what
is seen is what the endpoint answered. Processes are started with ``spawn``; each opens its own
client (with ``--db``, its own engine on the same database file).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from firstwrite.shared.command_line import CLIError, ExitCode, error_code
from firstwrite.shared.first_writer_wins import MAX_CONTENDERS, MIN_CONTENDERS, Answers

from ._common import add_json_flag, positive_int, print_json
from .progress import Progress
from .race_verdict import Verdict, Window, render, report
from .table import ensure_table
from .target import Target, add_target_args, connect, describe_table, key_schema, target_of

if TYPE_CHECKING:
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

LEASE = 60.0
FINGERPRINT = "firstwrite-race"  # one request, sent by every contender
BARRIER_TIMEOUT = 120.0
DONE = "done"
FATAL = "fatal"

# One contender's answer for one key: (key index, contender, owner it wrote, kind, detail,
# sent, answered). kind "won": detail is the owner its ALL_OLD returned (None: it replaced
# nothing); "lost": the owner in the exception's Item (None: no Item); "error": the error code.
# sent/answered are epoch seconds (comparable across processes).
Outcome = tuple[int, str, str, str, str | None, float, float]


@dataclass(frozen=True)
class Spec:
    """What every contender needs; plain data, so it crosses into spawned processes."""

    target: Target
    table: str
    partition_key: str
    sort_key: str | None
    scope: str
    keys: int
    contenders: int

    def guard(self, client: Any) -> Idempotency:
        """The layer's guard for the raced table on ``client``: its keys and claims are the
        ones an application with this configuration makes."""
        from firstwrite.idempotency import Idempotency

        return Idempotency(self.config(), client=client)

    def config(self) -> IdempotencyConfig:
        from firstwrite.idempotency import IdempotencyConfig

        return IdempotencyConfig(
            table_name=self.table,
            scope=self.scope,
            partition_key=self.partition_key,
            sort_key=self.sort_key,
        )


def add_commands(commands: Any) -> None:
    race = commands.add_parser(
        "race",
        help="race concurrent claims of the same keys and check first-writer-wins",
        description="Send N concurrent claims (the layer's conditional PutItem) of the same "
        "keys from threads and processes against any endpoint, real DynamoDB included, and "
        "check first-writer-wins: one winner per key, every loser a "
        "ConditionalCheckFailedException carrying the winner's item (ALL_OLD), the winner's "
        "item stored. Exit status 3 on any violation. An endpoint that returns no item to any "
        "loser is reported apart, not as a violation.",
    )
    add_target_args(race, table=False)
    race.add_argument(
        "--table",
        default=None,
        help="an existing table to race in (string partition key); its race records are "
        "deleted afterwards. Default: a new on-demand table, deleted afterwards",
    )
    race.add_argument(
        "--keys", type=positive_int, default=16, help="keys to race for (default: %(default)s)"
    )
    race.add_argument(
        "--threads",
        type=positive_int,
        default=8,
        help="contending threads per process; processes x threads is at most "
        f"{MAX_CONTENDERS} (default: %(default)s)",
    )
    race.add_argument(
        "--processes",
        type=positive_int,
        default=1,
        help="contending processes; contenders per key = processes x threads "
        "(default: %(default)s)",
    )
    race.add_argument(
        "--keep-table",
        action="store_true",
        help="keep the table and the race records (to inspect them with `firstwrite keys`)",
    )
    add_json_flag(race)
    race.set_defaults(handler=race_command)


# -- contenders -----------------------------------------------------------------------------------


def _contend(spec: Spec, client: Any, contender: str, barrier: Any, out: Any) -> None:
    from firstwrite.idempotency.record import A_OWNER
    from firstwrite.idempotency.requests import Requests, fence, new_token

    guard = spec.guard(client)
    requests = Requests(guard.config)  # the layer's own claim request, as a first call sends it
    try:
        for index in range(spec.keys):
            key = guard.dynamodb_key(f"key-{index}")
            now = time.time()
            token = new_token(now)
            owner = fence(token, 1)
            item = requests.claim_item(key, token, FINGERPRINT, now, LEASE)
            request = requests.put_claim(item, FINGERPRINT, now).params
            try:
                barrier.wait(BARRIER_TIMEOUT)
            except threading.BrokenBarrierError:
                now = time.time()
                out.put((index, contender, owner, "error", "aborted: a contender failed", now, now))
                return
            sent = time.time()
            kind, detail = _claim(client, request, A_OWNER)
            out.put((index, contender, owner, kind, detail, sent, time.time()))
    finally:
        out.put((DONE, contender))


def _claim(client: Any, request: dict[str, Any], owner_attribute: str) -> tuple[str, str | None]:
    try:
        response = client.put_item(**request)
    except ClientError as exc:
        code = error_code(exc) or "ClientError"
        if code != "ConditionalCheckFailedException":
            return "error", code
        return "lost", exc.response.get("Item", {}).get(owner_attribute, {}).get("S")
    except Exception as exc:  # connection errors and the like: counted, not fatal
        return "error", type(exc).__name__
    return "won", response.get("Attributes", {}).get(owner_attribute, {}).get("S")


def _run_threads(
    spec: Spec, client: Any, contenders: list[str], barrier: Any, out: Any
) -> list[threading.Thread]:
    threads = [
        threading.Thread(
            target=_contend, args=(spec, client, name, barrier, out), name=name, daemon=True
        )
        for name in contenders
    ]
    for thread in threads:
        thread.start()
    return threads


def process_main(spec: Spec, contenders: list[str], barrier: Any, out: Any) -> None:
    """A spawned contending process: its own client, one thread per contender. Ctrl-C is for
    the coordinator, which stops the contending processes itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()
    try:
        with connect(spec.target, pool=len(contenders), attempts=1) as client:
            for thread in _run_threads(spec, client, contenders, barrier, out):
                thread.join()
    except BaseException as exc:
        barrier.abort()  # the others stop waiting for contenders that will never come
        out.put((FATAL, f"{type(exc).__name__}: {exc}"))
        for name in contenders:
            out.put((DONE, name))


def _exit_with(parent: int) -> None:
    """Exit when the coordinating process is gone (killed: it cannot stop us itself)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


# -- the command ----------------------------------------------------------------------------------


def race_command(args: argparse.Namespace) -> int:
    contenders = args.processes * args.threads
    if contenders < MIN_CONTENDERS:
        raise CLIError(
            "a race needs at least two contenders (--threads/--processes)", ExitCode.USAGE
        )
    if contenders > MAX_CONTENDERS:
        raise CLIError(
            f"--processes x --threads is {contenders:,} contenders per key; at most "
            f"{MAX_CONTENDERS} are allowed (each is a thread or a process on this machine; "
            "the console's race has the same cap)",
            ExitCode.USAGE,
        )
    target = target_of(args)
    run = secrets.token_hex(4)
    temporary = args.table is None
    name = args.table or f"firstwrite-race-{run}"
    schema = {"HASH": "pk"}
    results: dict[int, Answers[str]] = {}  # by key index, as answers come
    with connect(target, create=True, pool=args.threads) as client, _terminate_as_interrupt():
        if not temporary:
            schema = _schema(client, name, target)
        spec = Spec(
            target, name, schema["HASH"], schema.get("RANGE"), f"race-{run}", args.keys, contenders
        )
        warnings: list[str] = []
        try:
            if temporary:
                _created, no_ttl = ensure_table(spec.guard(client), client, target)
                warnings += [] if no_ttl is None else [no_ttl]
            fatal, window = _race(spec, client, args.processes, args.threads, results)
            _read_back(spec, client, results)
        except BaseException:
            if not args.keep_table:
                with contextlib.suppress(Exception):  # the first error is the one to report
                    _clean_up(spec, client, temporary, results)
            raise
        if not args.keep_table:
            _clean_up(spec, client, temporary, results)
    verdict = Verdict(results, spec.contenders, fatal).judge()
    summary = report(
        verdict,
        target=target.describe(),
        table_name=name,
        temporary=temporary,
        kept=args.keep_table,
        keys=spec.keys,
        processes=args.processes,
        threads=args.threads,
        elapsed=window.seconds,
        warnings=warnings,
    )
    if args.json:
        print_json(summary)
    else:
        print(render(summary))
    if verdict.violated:
        return ExitCode.VIOLATION
    return ExitCode.ERROR if verdict.errors or fatal else ExitCode.OK


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout, `kill`) cleans up as Ctrl-C does: the temporary table goes."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _schema(client: Any, name: str, target: Target) -> dict[str, str]:
    described = describe_table(client, name, target)
    types = {a["AttributeName"]: a["AttributeType"] for a in described["AttributeDefinitions"]}
    schema = key_schema(described)
    if any(types.get(attr) != "S" for attr in schema.values()):
        raise CLIError(f"table {name!r}: its key attributes must be strings (S)")
    return schema


def _race(
    spec: Spec, client: Any, processes: int, threads: int, results: dict[int, Answers[str]]
) -> tuple[list[str], Window]:
    """Run the contenders, recording their answers into ``results`` as they come."""
    window = Window()
    fatal: list[str] = []
    names = [[f"p{p}t{t}" for t in range(threads)] for p in range(processes)]
    barrier: Any
    workers: list[Any]
    if processes == 1:
        out: Any = queue.Queue()
        barrier = threading.Barrier(threads)
        workers = _run_threads(spec, client, names[0], barrier, out)
    else:
        context = multiprocessing.get_context("spawn")
        out = context.Queue()
        barrier = context.Barrier(spec.contenders)
        workers = [
            context.Process(target=process_main, args=(spec, group, barrier, out), daemon=True)
            for group in names
        ]
        for worker in workers:
            worker.start()
    finished: set[str] = set()
    try:
        with Progress("racing", spec.keys * spec.contenders) as bar:
            while len(finished) < spec.contenders:
                try:
                    message = out.get(timeout=0.5)
                except queue.Empty:
                    _reap(workers, names, finished, fatal)
                    continue
                if message[0] == DONE:
                    finished.add(message[1])
                elif message[0] == FATAL:
                    fatal.append(message[1])
                else:
                    _record(results, window, message)
                    bar.advance()
    except BaseException:  # Ctrl-C: stop the contenders before the table goes
        barrier.abort()
        for worker in workers:
            if isinstance(worker, multiprocessing.process.BaseProcess) and worker.is_alive():
                worker.terminate()
        raise
    finally:
        for worker in workers:
            worker.join(10)
    return fatal, window


def _reap(workers: list[Any], names: list[list[str]], finished: set[str], fatal: list[str]) -> None:
    """A contending process that died (killed, out of memory) reports nothing more, and may
    have died holding the shared barrier's lock: stop the others and end the race."""
    died = [w for w in workers if getattr(w, "exitcode", None) not in (None, 0)]
    for worker in died:
        fatal.append(f"contending process {worker.pid} died (exit code {worker.exitcode})")
    if died:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
    everyone = {name for group in names for name in group}
    if died or not any(worker.is_alive() for worker in workers):
        missing = everyone - finished
        if missing and not died:
            fatal.append(f"{len(missing)} contenders exited without reporting")
        finished.update(missing)


def _record(results: dict[int, Answers[str]], window: Window, outcome: Outcome) -> None:
    index, _contender, owner, kind, detail, sent, answered = outcome
    window.add(sent, answered)
    key = results.setdefault(index, Answers[str]())
    if kind == "won":
        key.winners.append((owner, detail))
    elif kind == "lost":
        key.losers.append(detail)
    else:
        key.errors.append(detail or "error")


def _key_of(spec: Spec, client: Any) -> Callable[[int], dict[str, Any]]:
    """The DynamoDB ``Key`` of key number ``i``, built as the contenders built it."""
    guard = spec.guard(client)
    return lambda index: guard.dynamodb_key(f"key-{index}")


def _read_back(spec: Spec, client: Any, results: dict[int, Answers[str]]) -> None:
    from firstwrite.idempotency.record import A_OWNER

    key_of = _key_of(spec, client)
    for index, result in results.items():
        request = {"TableName": spec.table, "Key": key_of(index), "ConsistentRead": True}
        item = client.get_item(**request).get("Item")
        result.stored = None if item is None else item.get(A_OWNER, {}).get("S")


def _clean_up(spec: Spec, client: Any, temporary: bool, results: dict[int, Answers[str]]) -> None:
    if temporary:
        client.delete_table(TableName=spec.table)
        return
    # Contenders go through the keys in order: nothing was written past the key after the
    # last one answered (a claim may be in flight, unanswered, when a race is aborted).
    key_of = _key_of(spec, client)
    for index in range(min(max(results, default=-1) + 2, spec.keys)):
        client.delete_item(TableName=spec.table, Key=key_of(index))
