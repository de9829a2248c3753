"""Issue 11: the Idempotency-Key middleware's overhead per request on a trivial FastAPI handler,
against the same app with hand-written glue over Powertools' ``idempotent_function`` and against
idemkit's ASGI middleware, all on one local engine file through in-process clients.

Each request goes through the whole ASGI app in process (no sockets): the app is called with a
scope, a ``receive`` holding the JSON body and a ``send`` collecting the answer, on one event
loop per contender. The *bare* app (the same handler, no idempotency) is measured in the same
repetitions; a contender's overhead is its time per request minus the bare app's, pair by pair.
The apps and contenders are in :mod:`.middleware_apps`.
"""

from collections.abc import Callable

from ._common import (
    Check,
    Section,
    Series,
    Settings,
    Table,
    Target,
    package_version,
    profile_contender,
    run_interleaved,
    scratch_dir,
    try_import,
)
from .idempotency_libraries import Shared
from .middleware_apps import (
    BARE,
    IDEMKIT,
    IN_THREADS,
    ON_LOOP,
    OURS,
    OURS_ASYNC,
    POWERTOOLS,
    AppFactory,
    AppScenario,
    CallsAlone,
    CallsAloneOnLoop,
    bare_app,
    firstwrite_app,
    firstwrite_async_app,
    idemkit_app,
    powertools_app,
)

__all__ = [
    "BOUNDS",
    "IDEMKIT",
    "IN_THREADS",
    "ON_LOOP",
    "OURS",
    "OURS_ASYNC",
    "POWERTOOLS",
    "SCENARIOS",
    "run",
]

SCENARIOS = ("first call", "replay")
TIME_TARGET = 0.8  # firstwrite's overhead <= 0.8x the faster peer's
BOUNDS = {OURS_ASYNC: ON_LOOP, OURS: IN_THREADS}  # each of ours: what its calls alone cost


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="middleware",
        title="Idempotency-Key middleware vs Powertools glue vs idemkit (issue 11)",
        method=[
            "One FastAPI app, one trivial handler (`POST /orders`: a 4-field JSON order in, 201 "
            "with a 3-field JSON answer), five ways: bare; with firstwrite's "
            f"`IdempotencyMiddleware` twice: **{OURS_ASYNC}**, an `AsyncIdempotency` guard on "
            "an aiobotocore client bound in process to the engine (the setup docs/http.md "
            "gives for ASGI apps; the guard's calls are awaited on the event loop), and "
            f"**{OURS}**, a synchronous `Idempotency` guard on the shared boto3 client, each "
            "of its calls (claim; completion) run in a worker thread (`asyncio.to_thread`) so "
            "that the blocking client never blocks the loop; with hand-written glue around "
            f"Powertools {package_version('aws-lambda-powertools')} `idempotent_function` in "
            "a sync endpoint (FastAPI's worker thread: header, scope, 409/422 mapping, the "
            "replay marker through `response_hook`); with idemkit "
            f"{package_version('idemkit')}'s `IdempotencyMiddleware` (`DynamoBackend`; its "
            "aioboto3 table replaced by a thin adapter that calls boto3 inline on the loop, "
            "as in the idempotency benchmark).",
            "Where each one's DynamoDB calls run: the in-process engine answers "
            "without I/O waits (SQLite, `durability='normal'`), so a call is CPU work wherever "
            "it runs. idemkit's adapter and the async guard's aiobotocore client both do that "
            "work on the event loop, with no thread hop (the bound aiobotocore client answers "
            "inline at this durability, as the engine's HTTP server does; against DynamoDB "
            "both would await the network instead). The sync guard and the Powertools glue "
            "pay a worker-thread hop (the glue one per request, the sync guard one per call), "
            "which a blocking client must pay on an event loop: compare idemkit with "
            f"{OURS_ASYNC}, and {OURS} with its own bound.",
            "Every contender scopes the key by a client header, method and path, fingerprints "
            "the body, and sends `Idempotent-Replayed: true` on a replay (idemkit in its "
            "`stripe` compatibility mode for that header). The middlewares replay the stored "
            "bytes; the Powertools glue rebuilds the body from the stored dict (same JSON, keys "
            "re-sorted). One engine file (`durability='normal'`): first boto3 and aiobotocore "
            "clients bound in process, then the `DirectClient` (synchronous: no async guard; "
            "idemkit needs a boto3 resource, so it runs on the first only). DynamoDB calls "
            "counted during the timed slices.",
            "Requests are ASGI calls in process (scope, receive, send; no sockets), one event "
            "loop per contender. *first call*: a new key each request. *replay*: the key of a "
            "completed request.",
            "**Overhead** = a contender's time per request minus the bare app's in the same "
            "repetition (pairs measured seconds apart); the targets compare overheads: each "
            f"firstwrite setup <= {TIME_TARGET}x the faster peer. The bounds, the least any "
            "middleware making firstwrite's calls costs: the bare app plus the DynamoDB calls "
            "of one firstwrite request made again with no middleware code around them, "
            f"**{ON_LOOP}** awaited on the aiobotocore client, **{IN_THREADS}** each in a "
            "worker thread as the sync guard makes them. "
            f"{settings.reps} repetitions of {settings.duration:g} s, interleaved.",
        ],
    )
    for direct in (False, True):
        _run_on_client(section, settings, log, direct=direct)
    return section


def _run_on_client(
    section: Section, settings: Settings, log: Callable[[str], None], *, direct: bool
) -> None:
    client_name = "DirectClient" if direct else "boto3 bound in process"
    with scratch_dir("middleware-") as directory:
        shared = Shared(directory, direct=direct)
        try:
            factories: list[tuple[str, AppFactory]] = [(BARE, bare_app)]
            skipped: dict[str, str] = {}
            for name, module, factory in (
                (OURS_ASYNC, "aiobotocore", firstwrite_async_app),
                (OURS, "firstwrite.http", firstwrite_app),
                (POWERTOOLS, "aws_lambda_powertools.utilities.idempotency", powertools_app),
                (IDEMKIT, "idemkit.backends.dynamodb", idemkit_app),
            ):
                _, why = try_import(module)
                if name == IDEMKIT and direct:
                    why = "needs a boto3 resource, which the DirectClient is not"
                if name == OURS_ASYNC and direct:
                    why = "needs an async client; the DirectClient is synchronous"
                if why is None:
                    factories.append((name, factory))
                else:
                    skipped[name] = why
            made = dict(factories)
            for scenario in SCENARIOS:
                log(f"  middleware / {scenario}, {client_name}")
                contenders: list[AppScenario] = [
                    AppScenario(shared, n, f, scenario) for n, f in factories
                ]
                if OURS_ASYNC in made:
                    contenders.append(CallsAloneOnLoop(shared, scenario))
                if OURS in made:
                    contenders.append(CallsAlone(shared, scenario))
                series, more = run_interleaved(contenders, settings, log=log)
                table = _table(
                    f"{scenario}, {client_name}", series, contenders, {**skipped, **more}
                )
                section.tables.append(table)
                for target in table.targets:
                    if target.passed(table.ratio(target.ours, target.peer)):
                        continue
                    log(f"  profiling {target.ours} / {scenario} (target missed)")
                    section.profiles[f"{target.ours}, {scenario}, {client_name}"] = (
                        profile_contender(
                            AppScenario(shared, target.ours, made[target.ours], scenario),
                            200 if settings.quick else 2000,
                        )
                    )
        finally:
            shared.close()


def _table(
    scenario: str, series: list[Series], contenders: list[AppScenario], skipped: dict[str, str]
) -> Table:
    whole = {s.name: [1e6 / v for v in s.values] for s in series}
    bare = whole.get(BARE, [])
    overheads = [
        Series(name, [t - b for t, b in zip(times, bare, strict=False)], unit="µs/request")
        for name, times in whole.items()
        if name != BARE and bare
    ]
    calls = {c.name: c.calls_per_request for c in contenders if c.requests}
    cpu = {c.name: c.cpu / c.requests * 1e6 for c in contenders if c.requests}
    table = Table(
        title=f"{scenario}: overhead over the bare app",
        series=overheads,
        ours=[OURS_ASYNC, OURS],
        skipped=skipped,
        extra={
            "whole request µs (median)": {
                n: f"{sorted(v)[len(v) // 2]:,.1f}" for n, v in whole.items() if v
            },
            "CPU µs/request (all threads)": {n: f"{v:,.0f}" for n, v in cpu.items()},
            "DynamoDB calls/request": {n: f"{v:.2f}" for n, v in calls.items()},
        },
    )
    if bare:
        bare_cpu = cpu.get(BARE)
        table.notes.append(
            f"The bare app: {sorted(bare)[len(bare) // 2]:,.1f} µs per request (median)"
            + ("." if bare_cpu is None else f", {bare_cpu:,.0f} µs CPU.")
        )
    peers = [s for s in overheads if s.name in (POWERTOOLS, IDEMKIT) and s.values]
    if peers:
        faster = min(peers, key=lambda s: s.median)
        for ours, bound in BOUNDS.items():
            if table.get(ours) is not None:
                found = bound if table.get(bound) is not None else None
                table.targets.append(Target(ours, faster.name, maximum=TIME_TARGET, bound=found))
        table.notes.append(f"The faster peer here: {faster.name}.")
        table.notes.append(_cpu_note(cpu))
    for ours in BOUNDS:
        mine = calls.get(ours)
        if mine is None:
            continue
        for peer in (POWERTOOLS, IDEMKIT):
            theirs = calls.get(peer)
            table.checks.append(
                Check(
                    f"{ours} / {peer} DynamoDB calls per request",
                    "n/a" if theirs is None else f"{mine:.2f} vs {theirs:.2f}",
                    "no more",
                    None if theirs is None else mine <= theirs + 1e-9,
                )
            )
    return table


def _cpu_note(cpu: dict[str, float]) -> str:
    """The same comparison by CPU time over the bare app's, against the peer using less: steadier
    than wall time on a busy machine, where the scheduler decides much of a waiting thread's
    time."""
    bare = cpu.get(BARE)
    peers = {name: cpu[name] for name in (POWERTOOLS, IDEMKIT) if name in cpu}
    if bare is None or not peers:
        return "By CPU time: no peer measured."
    peer = min(peers, key=lambda name: peers[name])
    theirs = peers[peer] - bare
    ratios = [
        f"{name} {(cpu[name] - bare) / theirs:.2f}x"
        for name in (OURS_ASYNC, ON_LOOP, OURS, IN_THREADS)
        if name in cpu and theirs > 0
    ]
    return f"By CPU time over the bare app's (all threads), vs {peer}: " + ", ".join(ratios) + "."
