"""Issue 4: firstwrite's idempotency layer vs Powertools' ``idempotent_function`` vs idemkit.

All three run on one engine file, through boto3 clients bound to it in-process (the same
client for firstwrite and Powertools; idemkit's backend needs a boto3 *resource*, whose client
is bound to the same engine). DynamoDB calls are counted with a botocore ``before-call``
handler; time per request is wall time of the whole decorated call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._calls import allowance, calls_alone
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
)
from .idempotency_contenders import (
    CallsAlone,
    CallsTimed,
    LeastWork,
    OwnWorkAlone,
    Scenario,
    calls_timed,
    least_work,
    own_work_alone,
)
from .idempotency_instructions import tables as instruction_tables
from .idempotency_libraries import (
    IDEMKIT,
    OURS,
    POWERTOOLS,
    SCENARIOS,
    TIME_TARGET,
    FirstwriteLib,
    IdemkitLib,
    Library,
    PowertoolsLib,
    Shared,
    firstwrite_api,
    idemkit_available,
)


def _own_time_note(
    table: Table,
    alone: Series | None = None,
    split: tuple[float, float] | None = None,
) -> None:
    """What each library spends beside its DynamoDB calls, and what firstwrite's share would
    have to be for the target on these calls: the target needs ``ours + calls <= 0.8 x
    Powertools``, so a cheaper call helps only while firstwrite's own time is small enough.
    ``alone``: firstwrite's own work alone (:class:`OwnWorkAlone`); ``split``: its code between
    its calls and its calls, timed inside its run (:meth:`CallsTimed.split`); all measured in
    the same run."""
    share = allowance(table, OURS, POWERTOOLS, TIME_TARGET)
    if share is None:
        return
    own, their_own, allowed = share.own, share.their_own, share.allowed
    for target in table.targets:
        target.why = f"{OURS}'s own time beside its calls {own:.1f} µs; " + (
            f"the target allows {allowed:.1f} µs on them"
            if allowed > 0
            else "its calls alone miss it"
        )
    table.notes.append(
        f"Own time beside the DynamoDB calls (medians): {OURS} {own:.1f} µs, {POWERTOOLS} "
        f"{their_own:.1f} µs; on these calls the target allows {OURS} "
        + (f"{allowed:.1f} µs." if allowed > 0 else "none at all (its calls alone miss it).")
    )
    if alone is not None and alone.values:
        work = alone.median
        table.notes.append(
            f"{own_work_alone(OURS)} (each call answered at once by its recorded answer, no "
            f"client; median of {len(alone.values)}, {min(alone.values):.1f} - "
            f"{max(alone.values):.1f}): {work:.1f} µs, against {own:.1f} µs of own time beside "
            f"the client's calls; its calls alone plus that work are "
            f"{(work + share.calls) / share.theirs:.2f}x {POWERTOOLS}"
            + (
                f": the work itself is {work - allowed:.1f} µs over the allowance."
                if work > allowed
                else "."
            )
        )
    if split is not None and alone is not None and alone.values:
        between, inside = split
        table.notes.append(
            f"Where the own time beside the calls goes ({calls_timed(OURS)}: a clock around "
            f"each call, medians): its code between its calls {between:.1f} µs per request "
            f"({between / alone.median:.1f}x its own work alone), its calls inside it "
            f"{inside:.1f} µs ({inside - share.calls:+.1f} µs against its calls alone). "
            "The layer's code and the client's calls each run slower side by side than alone: "
            "each evicts the other's code and data from the CPU caches."
        )


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="idempotency",
        title="Idempotency layer vs Powertools vs idemkit (issue 4)",
        method=[
            "One engine file (`durability='normal'`); firstwrite and Powertools share one client "
            "on it: first a boto3 client bound in process (`bind`, its default quick path: answered at `before-call`), then the `DirectClient` "
            "(calls counted by a thin proxy); idemkit's `DynamoBackend` uses a boto3 resource whose "
            "client is bound to the same engine (its aioboto3 dependency is not installed: its "
            "`Table` is replaced by a thin async adapter over boto3's, idemkit's logic is "
            "unchanged).",
            "The same function `charge(order)` (4-field dict in, 3-field dict out); the key "
            "is `order_id`, the whole payload is validated: firstwrite "
            "`@idempotent(Idempotency(IdempotencyConfig(table_name=...), client=...), "
            "key='order.order_id')` (defaults otherwise); Powertools "
            f"{package_version('aws-lambda-powertools')} `idempotent_function` with "
            "`DynamoDBPersistenceLayer(boto3_client=...)`, `event_key_jmespath='order_id'`, "
            f"`payload_validation_jmespath='@'`; idemkit {package_version('idemkit')} "
            "`idempotent_sync` with `key_fields=['order.order_id']`, a payload "
            "`validation_fingerprint`, `wait_timeout_seconds=0` (the others do not wait "
            "either). Local caches off everywhere (the defaults). Every table has TTL enabled on its expiry attribute, as each library's docs require (firstwrite: `expires_at`, Powertools: `expiration`, idemkit: `ttl`).",
            "*first call*: a new key each request (claim, run, store the result). "
            "*duplicate*: the key of a completed request (replay). *in progress*: the key of a "
            "request whose body is still running in another thread (each library's "
            "'in progress' error).",
            f"**{calls_alone('X')}**: the DynamoDB calls library X made for one request of the "
            "scenario (recorded), replayed on the same client with none of X's code around them "
            "(a fresh key value per request for *first call*): what X would cost if all its "
            f"own work were free. **{least_work(OURS)}** bounds the target: firstwrite's calls "
            "plus the least Python any payload-validating layer adds to them (the payload's "
            "SHA-256 fingerprint; the function called and its result JSON-encoded, or the "
            "stored JSON decoded, or an 'in progress' error raised and caught), nothing else; "
            "if even it misses 0.8x, no layer making firstwrite's calls can meet it on that "
            "client. "
            f"**{own_work_alone(OURS)}**: the converse, firstwrite with each call answered at "
            "once by the answer it got in one real request (no client, engine or botocore): "
            f"its own Python per request. **{calls_timed(OURS)}**: firstwrite on the real "
            "client with a clock around each DynamoDB call, which splits its own time beside "
            "the calls into its code between them and its calls inside it (in the notes).",
            "**Instructions (callgrind)**, boto3 bound in process only: the two libraries, "
            "their calls alone and firstwrite's calls + least work again, in one child process "
            "under valgrind's callgrind, which counts only inside the measured pieces "
            "(`bench/_callgrind.py`): per contender, 2 pieces of 150 requests after 30 "
            "uncounted (set-up, imports and start-up never counted). Instruction counts do not "
            "move with the machine's load (the two pieces of a contender agree within 1%). They "
            "and time disagree where code runs at different speeds: the least work's few lines "
            "stay in the CPU caches between botocore's calls, a real layer's code runs slower "
            "there (its own time beside the calls is about twice its own work alone). The same "
            "target and bound are read on them.",
            "DynamoDB calls per request: a `before-call` handler on the clients, counted during "
            "the timed slices only. Time: wall time of one whole call (µs), "
            f"{settings.reps} repetitions of {settings.duration:g} s, interleaved.",
        ],
    )
    api = firstwrite_api()
    why_idemkit = idemkit_available()
    for direct in (False, True):
        _run_on_client(section, settings, log, api, why_idemkit, direct=direct)
        if section.error:
            break
        if not direct and not isinstance(api, str):
            _count_instructions(section, settings, log)
    return section


def _count_instructions(section: Section, settings: Settings, log: Callable[[str], None]) -> None:
    """The bound client's scenarios again, in instructions per request (callgrind): the same
    contenders, measured in the same run, with no noise from the machine's load."""
    counted, why = instruction_tables(settings, log)
    section.tables += counted
    if why is not None:
        section.method.append(f"Instructions per request (callgrind): not measured: {why}.")


def _run_on_client(
    section: Section,
    settings: Settings,
    log: Callable[[str], None],
    api: Any,
    why_idemkit: str | None,
    *,
    direct: bool,
) -> None:
    client_name = "DirectClient" if direct else "boto3 bound in process"
    with scratch_dir("idempotency-") as directory:
        try:
            shared = Shared(directory, direct=direct)
        except Exception as exc:
            section.error = f"engine/binding unavailable: {type(exc).__name__}: {exc}"
            return
        try:
            factories: list[Callable[[Shared], Library]] = []
            skipped: dict[str, str] = {}
            if isinstance(api, str):
                skipped[OURS] = api
            else:
                factories.append(FirstwriteLib)
            factories.append(PowertoolsLib)
            if direct:
                skipped[IDEMKIT] = "uses a boto3 resource, which the DirectClient is not"
            elif why_idemkit is None:
                factories.append(IdemkitLib)
            else:
                skipped[IDEMKIT] = why_idemkit
            for scenario in SCENARIOS:
                log(f"  idempotency / {scenario}")
                contenders = [Scenario(shared, f, scenario) for f in factories]
                # Each library's calls with none of its code: the bound on any library making them.
                contenders += [
                    CallsAlone(shared, f, scenario)
                    for f in factories
                    if getattr(f, "name", "") in (OURS, POWERTOOLS)
                ]
                contenders += [
                    LeastWork(shared, f, scenario)
                    for f in factories
                    if getattr(f, "name", "") == OURS
                ]
                contenders += [
                    OwnWorkAlone(shared, f, scenario)
                    for f in factories
                    if getattr(f, "name", "") == OURS
                ]
                timed = [CallsTimed(shared, f, scenario) for f in factories if f is FirstwriteLib]
                contenders += timed
                series, more = run_interleaved(contenders, settings, log=log)
                for s in series:
                    s.values = [1e6 / v for v in s.values]
                    s.unit = "µs/request"
                # firstwrite's own work alone goes into the notes, not the table: it is no
                # library, and makes no DynamoDB call
                alone = next((x for x in series if x.name == own_work_alone(OURS)), None)
                timed_series = next((x for x in series if x.name == calls_timed(OURS)), None)
                split = timed[0].split(timed_series) if timed and timed_series else None
                series = [x for x in series if x is not alone and x is not timed_series]
                calls = {
                    c.name: c.calls_per_request
                    for c in contenders
                    if c.requests and not isinstance(c, (OwnWorkAlone, CallsTimed))
                }
                table = Table(
                    title=f"{scenario}, {client_name}",
                    series=series,
                    ours=[OURS],
                    targets=[Target(OURS, POWERTOOLS, maximum=TIME_TARGET, bound=least_work(OURS))],
                    skipped={**skipped, **more},
                    extra={"DynamoDB calls/request": {n: f"{v:.2f}" for n, v in calls.items()}},
                )
                ours, theirs = calls.get(OURS), calls.get(POWERTOOLS)
                table.checks.append(
                    Check(
                        f"{OURS} / {POWERTOOLS} DynamoDB calls per request",
                        "n/a" if ours is None or theirs is None else f"{ours:.2f} vs {theirs:.2f}",
                        "no more",
                        None if ours is None or theirs is None else ours <= theirs + 1e-9,
                    )
                )
                _own_time_note(table, alone, split)
                section.tables.append(table)
                if OURS in table.ours and table.get(OURS) is not None:
                    ratio = table.ratio(OURS, POWERTOOLS)
                    if not ratio <= TIME_TARGET:
                        log(f"  profiling firstwrite / {scenario} (target missed)")
                        section.profiles[f"firstwrite, {scenario}, {client_name}"] = (
                            profile_contender(
                                Scenario(shared, FirstwriteLib, scenario),
                                200 if settings.quick else 2000,
                            )
                        )
        finally:
            shared.close()
