"""``firstwrite race``: concurrent claims of the same keys, checking first-writer-wins.

Every contender (``--processes`` x ``--threads``) sends the layer's own claim request (the
conditional ``PutItem`` with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``) for every key;
all contenders wait at a barrier before each key, so the claims of one key arrive together.
First-writer-wins holds when, for every key:

* exactly one claim succeeded, and it replaced nothing (its ``ALL_OLD`` is empty);
* every other claim failed with ``ConditionalCheckFailedException`` carrying the winner's item;
* a strongly consistent read afterwards returns the winner's item.

Anything else is a violation (exit status 3). Errors (throttling, timeouts) are counted apart:
they leave a key unverified, not violated (exit status 1). botocore's retries are off, so what
is seen is what the endpoint answered. Processes are started with ``spawn``; each opens its own
client (with ``--db``, its own engine on the same database file).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ._common import CLIError, ExitCode, add_json_flag, number, positive_int, print_json, table
from .progress import Progress
from .target import (
    Target,
    add_target_args,
    connect,
    error_code,
    missing_table,
    target_of,
)

LEASE = 60.0
FINGERPRINT = "firstwrite-race"  # one request, sent by every contender
BARRIER_TIMEOUT = 120.0
MAX_EXAMPLES = 20
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


def add_commands(commands: Any) -> None:
    race = commands.add_parser(
        "race",
        help="race concurrent claims of the same keys and check first-writer-wins",
        description="Send N concurrent claims (the layer's conditional PutItem) of the same "
        "keys from threads and processes against any endpoint, real DynamoDB included, and "
        "check first-writer-wins: one winner per key, every loser a "
        "ConditionalCheckFailedException carrying the winner's item (ALL_OLD), the winner's "
        "item stored. Exit status 3 on any violation.",
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
        help="contending threads per process (default: %(default)s)",
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
    from firstwrite.idempotency import Idempotency, IdempotencyConfig
    from firstwrite.idempotency.guard import new_token
    from firstwrite.idempotency.record import A_OWNER, fence

    config = IdempotencyConfig(
        table_name=spec.table,
        scope=spec.scope,
        partition_key=spec.partition_key,
        sort_key=spec.sort_key,
    )
    guard = Idempotency(config, client=client)
    try:
        for index in range(spec.keys):
            key, _ = guard.keys.key(f"key-{index}")
            now = time.time()
            token = new_token(now)
            owner = fence(token, 1)
            item = guard.requests.claim_item(key, token, FINGERPRINT, now, LEASE)
            request = guard.requests.put_claim(item, FINGERPRINT, now)
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
    """A spawned contending process: its own client, one thread per contender."""
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


# -- the verdict ----------------------------------------------------------------------------------


@dataclass
class Window:
    """From the first claim sent to the last answer received."""

    first: float = float("inf")
    last: float = 0.0

    def add(self, sent: float, answered: float) -> None:
        self.first = min(self.first, sent)
        self.last = max(self.last, answered)

    @property
    def seconds(self) -> float:
        return max(self.last - self.first, 0.0)


@dataclass
class KeyResult:
    winners: list[tuple[str, str | None]] = field(default_factory=list)  # (owner, replaced)
    losers: list[str | None] = field(default_factory=list)  # owner seen in ALL_OLD
    errors: list[str] = field(default_factory=list)
    stored: str | None = None

    @property
    def answers(self) -> int:
        return len(self.winners) + len(self.losers) + len(self.errors)

    @property
    def raced(self) -> bool:
        """Any answer came back (an aborted race leaves later keys untouched)."""
        return bool(self.winners or self.losers or self.errors)


@dataclass
class Verdict:
    """Judges the answers; ``contenders`` is how many answers a key gets in a complete race."""

    keys: list[KeyResult]
    contenders: int
    fatal: list[str]
    violations: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    def judge(self) -> Verdict:
        for index, key in enumerate(self.keys):
            if not key.raced:
                continue
            self.counts["keys_raced"] += 1
            self.errors.update(key.errors)
            self.counts["losers"] += len(key.losers)
            self.counts["losers_with_item"] += sum(seen is not None for seen in key.losers)
            if len(key.winners) > 1:
                replacing = sum(old is not None for _, old in key.winners)
                detail = f"{len(key.winners)} claims succeeded"
                if replacing:
                    detail += f", {replacing} replacing another's item"
                self._violate("multiple winners", index, detail)
                continue
            if key.answers < self.contenders:  # a contender died mid-claim: no verdict
                self.counts["unverified_keys"] += 1
                continue
            if not key.winners:
                if key.errors:
                    self.counts["unverified_keys"] += 1
                else:
                    self._violate("no winner", index, "every claim failed its condition")
                continue
            winner, replaced = key.winners[0]
            self.counts["keys_with_one_winner"] += 1
            if replaced is not None:
                self._violate("winner replaced an item", index, f"ALL_OLD owner {replaced}")
            right = sum(seen == winner for seen in key.losers)
            self.counts["losers_with_winner_item"] += right
            missing = sum(seen is None for seen in key.losers)
            if missing:
                self._violate("loser without the winner's item", index, f"{missing} losers")
            if len(key.losers) - right - missing:
                self._violate(
                    "loser saw another item", index, f"{len(key.losers) - right - missing} losers"
                )
            if key.stored == winner:
                self.counts["stored_is_winner"] += 1
            else:
                self._violate("stored item is not the winner's", index, f"stored {key.stored}")
        return self

    def _violate(self, kind: str, index: int, detail: str) -> None:
        self.counts[f"violation:{kind}"] += 1
        if len(self.violations) < MAX_EXAMPLES:
            self.violations.append({"kind": kind, "key": f"key-{index}", "detail": detail})

    @property
    def violated(self) -> bool:
        return any(name.startswith("violation:") for name in self.counts)

    def violation_counts(self) -> dict[str, int]:
        prefix = "violation:"
        return {k[len(prefix) :]: v for k, v in self.counts.items() if k.startswith(prefix)}


# -- the command ----------------------------------------------------------------------------------


def race_command(args: argparse.Namespace) -> int:
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    contenders = args.processes * args.threads
    if contenders < 2:
        raise CLIError(
            "a race needs at least two contenders (--threads/--processes)", ExitCode.USAGE
        )
    target = target_of(args)
    run = secrets.token_hex(4)
    temporary = args.table is None
    name = args.table or f"firstwrite-race-{run}"
    with connect(target, create=True, pool=args.threads) as client:
        if temporary:
            Idempotency(IdempotencyConfig(table_name=name), client=client).ensure_table()
            schema = {"HASH": "pk"}
        else:
            schema = _schema(client, name, target)
        spec = Spec(
            target, name, schema["HASH"], schema.get("RANGE"), f"race-{run}", args.keys, contenders
        )
        results = [KeyResult() for _ in range(spec.keys)]
        try:
            fatal, window = _race(spec, client, args.processes, args.threads, results)
            _read_back(spec, client, results)
        finally:
            if not args.keep_table:
                _clean_up(spec, client, temporary, results)
    verdict = Verdict(results, spec.contenders, fatal).judge()
    report = _report(spec, args, verdict, window.seconds, temporary)
    if args.json:
        print_json(report)
    else:
        print(_render(report))
    if verdict.violated:
        return ExitCode.VIOLATION
    return ExitCode.ERROR if verdict.errors or fatal else ExitCode.OK


def _schema(client: Any, name: str, target: Target) -> dict[str, str]:
    try:
        described = client.describe_table(TableName=name)["Table"]
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            raise missing_table(name, target) from None
        raise
    types = {a["AttributeName"]: a["AttributeType"] for a in described["AttributeDefinitions"]}
    schema = {k["KeyType"]: k["AttributeName"] for k in described["KeySchema"]}
    if any(types.get(attr) != "S" for attr in schema.values()):
        raise CLIError(f"table {name!r}: its key attributes must be strings (S)")
    return schema


def _race(
    spec: Spec, client: Any, processes: int, threads: int, results: list[KeyResult]
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


def _record(results: list[KeyResult], window: Window, outcome: Outcome) -> None:
    index, _contender, owner, kind, detail, sent, answered = outcome
    window.add(sent, answered)
    key = results[index]
    if kind == "won":
        key.winners.append((owner, detail))
    elif kind == "lost":
        key.losers.append(detail)
    else:
        key.errors.append(detail or "error")


def _keys(spec: Spec, client: Any) -> list[dict[str, Any]]:
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    config = IdempotencyConfig(
        table_name=spec.table,
        scope=spec.scope,
        partition_key=spec.partition_key,
        sort_key=spec.sort_key,
    )
    guard = Idempotency(config, client=client)
    return [guard.keys.key(f"key-{index}")[0] for index in range(spec.keys)]


def _read_back(spec: Spec, client: Any, results: list[KeyResult]) -> None:
    from firstwrite.idempotency.record import A_OWNER

    for key, result in zip(_keys(spec, client), results, strict=True):
        if not result.raced:
            continue
        item = client.get_item(TableName=spec.table, Key=key, ConsistentRead=True).get("Item")
        result.stored = None if item is None else item.get(A_OWNER, {}).get("S")


def _clean_up(spec: Spec, client: Any, temporary: bool, results: list[KeyResult]) -> None:
    if temporary:
        client.delete_table(TableName=spec.table)
        return
    # Contenders go through the keys in order: nothing was written past the key after the
    # last one answered (a claim may be in flight, unanswered, when a race is aborted).
    last = max((i for i, result in enumerate(results) if result.raced), default=-1)
    for key in _keys(spec, client)[: last + 2]:
        client.delete_item(TableName=spec.table, Key=key)


def _report(
    spec: Spec, args: argparse.Namespace, verdict: Verdict, elapsed: float, temporary: bool
) -> dict[str, Any]:
    claims = sum(len(k.winners) + len(k.losers) + len(k.errors) for k in verdict.keys)
    counts = verdict.counts
    return {
        "target": spec.target.describe(),
        "table": spec.table,
        "temporary_table": temporary,
        "kept": bool(args.keep_table),
        "keys": spec.keys,
        "keys_raced": counts["keys_raced"],
        "processes": args.processes,
        "threads": args.threads,
        "contenders": spec.contenders,
        "claims": claims,
        "elapsed_s": round(elapsed, 3),
        "claims_per_s": round(claims / elapsed, 1) if elapsed > 0 else None,
        "winners": sum(len(k.winners) for k in verdict.keys),
        "keys_with_one_winner": counts["keys_with_one_winner"],
        "losers": counts["losers"],
        "losers_with_item": counts["losers_with_item"],
        "losers_with_winner_item": counts["losers_with_winner_item"],
        "stored_is_winner": counts["stored_is_winner"],
        "unverified_keys": counts["unverified_keys"],
        "errors": dict(verdict.errors),
        "fatal": verdict.fatal,
        "violations": verdict.violation_counts(),
        "violation_examples": verdict.violations,
        "first_writer_wins": not verdict.violated and not verdict.errors and not verdict.fatal,
    }


def _render(report: dict[str, Any]) -> str:
    keys, losers = report["keys_raced"], report["losers"]
    raced = f"{keys} keys" if keys == report["keys"] else f"{keys} of {report['keys']} keys"
    where = report["table"] + (" (temporary)" if report["temporary_table"] else "")
    lines = [
        f"race against {report['target']}, table {where}",
        f"{raced} x {report['contenders']} contenders ({_count(report['processes'], 'process')}"
        f" x {_count(report['threads'], 'thread')}): {number(report['claims'])} claims in "
        f"{report['elapsed_s']:.2f} s ({number(report['claims_per_s'] or 0)} claims/s)",
        "",
    ]
    rows = [
        ("exactly one winner", f"{report['keys_with_one_winner']}/{keys} keys"),
        ("losers: ConditionalCheckFailedException", number(losers)),
        ("  with an item (ALL_OLD)", f"{report['losers_with_item']}/{losers}"),
        ("  with the winner's item", f"{report['losers_with_winner_item']}/{losers}"),
        ("stored item is the winner's", f"{report['stored_is_winner']}/{keys} keys"),
        ("errors", sum(report["errors"].values())),
    ]
    lines.append(table(("check", "result"), rows, align="<>"))
    if report["errors"]:
        lines.append("")
        errors = sorted(report["errors"].items())
        lines.append(table(("error", "count"), errors, align="<>"))
    for message in report["fatal"]:
        lines.append(f"contender failed: {message}")
    lines.append("")
    if report["violations"]:
        examples = {v["kind"]: f"{v['key']}: {v['detail']}" for v in report["violation_examples"]}
        found = [(k, n, examples.get(k, "")) for k, n in sorted(report["violations"].items())]
        lines.append(table(("violation", "keys", "example"), found, align="<>"))
        lines.append("")
        lines.append("FIRST-WRITER-WINS VIOLATED")
    elif report["first_writer_wins"]:
        lines.append(
            "first-writer-wins held: one winner per key, every loser got "
            "ConditionalCheckFailedException with the winner's item"
        )
    else:
        lines.append(
            f"no violation seen, but {report['unverified_keys']} keys are unverified (errors)"
        )
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es" if noun.endswith("s") else "s")
