"""Scenario 7: a hot partition.

One tenant's records share a partition key and are throttled at the partition's ceiling,
while records keyed by the idempotency key spread and pass.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from firstwrite.idempotency import IdempotencyConfig, InProgressError, Metrics

from .stage import Exchange, Note, Stage, Step
from .throttling import POLICY, THROTTLES, Tally

TENANT = "tenant-acme"
BY_TENANT = "orders-by-tenant"
BY_KEY = "orders-by-key"
# Each partition's write units per second here (DynamoDB's: 1,000). A call is admitted while its
# bucket holds capacity and charged when it finishes, so calls in flight overdraw it, and slow
# commits (a loaded machine) let the whole burst in before it is charged. With the clock frozen
# the burst's 2 * ORDERS + DUPLICATES writes from ORDERS + DUPLICATES threads throttle however
# they are scheduled only if UNITS <= ORDERS (at most UNITS - 1 charged plus one in flight per
# thread get in); at 5, at least 4 calls are throttled on any machine.
UNITS = 5
ORDERS = 8
DUPLICATES = 3
KEY_RANGE = "TableWriteKeyRangeThroughputExceeded"
ADVICE = (
    "Keep the idempotency key in the partition key (the layer's default: pk = "
    "IDEMPOTENCY#<scope>#<key>): records spread over partitions however few tenants there are.",
    "A low-cardinality partition key is hot whatever the table's capacity: one tenant id, a "
    "fixed queue name, a date bucket. DynamoDB serves one partition key 1,000 write units and "
    "3,000 read units a second at most, on-demand tables too.",
    "If a tenant's records must be queried together (a sort key), shard a busy tenant over "
    "several scopes (tenant#0 .. tenant#N-1, chosen from the key) and query each.",
    "Throttles are retried with full-jitter backoff, never a failed condition; alert on "
    "firstwrite_dynamodb_throttles_total and look for KeyRangeThroughputExceeded in the "
    "throttling reasons (docs/operating-on-aws.md).",
)


def make_stage(slug: str, shared: Metrics | None) -> Stage:
    # The engine clock stands still but for the backoff: each sleep (really slept) moves it by
    # as much, so partition buckets refill with the layer's backoff and never with how slowly
    # the machine runs the burst. The same burst throttles the same way on any machine.
    return Stage(slug, shared, frozen=True)


@dataclass
class Layout:
    """One table layout under the same burst: what its calls showed."""

    table: str
    partition_keys: set[str]
    throttled: list[Exchange]
    reasons: set[str]
    ran_twice: int
    tally: Tally
    lines: list[str]  # what each request's calls and sleeps were, one line each
    step: Step  # the burst's step


def _backoff(stage: Stage) -> Callable[[float], None]:
    def sleep(seconds: float) -> None:
        stage.sleep(seconds)
        stage.engine.clock.advance(seconds)

    return sleep


def _burst(stage: Stage, title: str, narrative: str, config: IdempotencyConfig) -> Layout:
    guard = stage.guard(config, sleep=_backoff(stage))
    ran: collections.Counter[str] = collections.Counter()
    answers: dict[str, str] = {}
    lock = threading.Lock()
    requests = [f"order-{i:02d}" for i in range(ORDERS)]
    requests += requests[:DUPLICATES]
    gate = threading.Barrier(len(requests))

    def request(index: int, key: str) -> None:
        actor = f"{config.table_name} {index + 1:02d} ({key})"
        mine = threading.local()
        mine.ran = False

        def ship() -> dict[str, Any]:
            mine.ran = True
            with lock:
                ran[key] += 1
            return {"shipped": key}

        with stage.actor(actor):
            gate.wait()
            try:
                guard.run(key, ship, payload={"order": key})
                answer = "completed" if mine.ran else "replayed the stored result"
            except InProgressError:
                answer = "in progress (a duplicate of a live request)"
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                answer = f"gave up after {POLICY.max_attempts} attempts: {code}"
        with lock:
            answers[actor] = answer

    with stage.step(title, narrative) as step:
        threads = [
            threading.Thread(target=request, args=(i, key), name=f"hot-{i}")
            for i, key in enumerate(requests)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    calls = [e for e in step.events if isinstance(e, Exchange)]
    throttled = [e for e in calls if e.code in THROTTLES]
    reasons = {
        str(reason.get("reason"))
        for e in throttled
        for reason in (
            e.response.get("throttlingReasons") or e.response.get("ThrottlingReasons") or []
        )
    }
    keys = {
        str(e.request["Item" if "Item" in e.request else "Key"][config.partition_key]["S"])
        for e in calls
        if isinstance(e.request, dict) and ("Item" in e.request or "Key" in e.request)
    }
    by_actor: dict[str, list[Exchange | Note]] = collections.defaultdict(list)
    for event in step.events:  # the calls and the sleeps between them
        if isinstance(event, Exchange) or event.kind == "sleep":
            by_actor[event.actor].append(event)
    tally = Tally()
    lines = []
    for actor in sorted(by_actor):
        events = by_actor[actor]
        tally.add(events)
        mine = [e for e in events if isinstance(e, Exchange)]
        sleeps = [e.seconds for e in events if isinstance(e, Note) and e.kind == "sleep"]
        lines.append(
            f"{actor}: {len(mine)} call(s), {sum(c.code in THROTTLES for c in mine)} "
            f"throttled, backoff {', '.join(f'{s * 1000:.0f} ms' for s in sleeps) or 'none'}"
            f"; {answers.get(actor, '?')}"
        )
    twice = sum(n > 1 for n in ran.values())
    return Layout(config.table_name, keys, throttled, reasons, twice, tally, lines, step)


def run(stage: Stage) -> str:
    client = stage.client()
    # A duplicate of a live request answers at once (no in-progress polling), as on the page.
    tenant = IdempotencyConfig(
        table_name=BY_TENANT, scope=TENANT, sort_key="sk", retry=POLICY, in_progress_wait=0
    )
    spread = IdempotencyConfig(table_name=BY_KEY, scope=TENANT, retry=POLICY, in_progress_wait=0)
    with stage.step(
        "Setting the stage",
        "Two on-demand tables for the same tenant's orders. In the first the partition key is "
        "the tenant (pk = IDEMPOTENCY#tenant-acme) and the idempotency key the sort key; in the "
        "second the partition key holds the idempotency key too. Throughput enforcement keeps "
        "DynamoDB's per-partition ceilings, and a hot_key fault scales the write ceiling down "
        f"to {UNITS} units a second for every partition, so a burst a page can run reaches it.",
    ):
        for config in (tenant, spread):
            keys = [config.partition_key] + ([config.sort_key] if config.sort_key else [])
            client.create_table(
                TableName=config.table_name,
                KeySchema=[
                    {"AttributeName": k, "KeyType": t}
                    for k, t in zip(keys, ("HASH", "RANGE"), strict=False)
                ],
                AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
                BillingMode="PAY_PER_REQUEST",
            )
        stage.engine.faults.enforce_throughput(True)
        stage.note(
            "partition ceilings enforced",
            kind="stage",
            code="engine.faults.enforce_throughput(True)  ·  POST /_firstwrite/faults/throughput "
            '{"enforced": true}',
        )
        stage.engine.faults.hot_key(units=UNITS)
        stage.note(
            f"every partition serves {UNITS} units a second",
            kind="stage",
            code=f"engine.faults.hot_key(units={UNITS})  ·  POST /_firstwrite/faults "
            f'{{"kind": "hot_key", "units": {UNITS}}}',
        )

    total = ORDERS + DUPLICATES
    narrative = (
        f"{ORDERS} orders, {DUPLICATES} of them sent twice, all at once from {total} threads. "
        "Each claim and each completion is a write. A throttled call is retried after a random "
        f"sleep between 0 and min({POLICY.cap:g} s, {POLICY.base:g} s * 2^n) (full jitter)."
    )
    hot = _burst(stage, "The burst, keyed by tenant", narrative, tenant)
    cool = _burst(stage, "The same burst, keyed by idempotency key", narrative, spread)

    with stage.step(
        "What the layer did with each request",
        "Each request's calls in order, by layout: throttles followed by a jittered sleep and "
        "the same request again; failed conditions answered once.",
    ):
        for line in hot.lines + cool.lines:
            stage.note(line)
    if hot.throttled:
        with stage.step(
            "One throttled call, as DynamoDB answered it",
            "On an on-demand table a partition over its ceiling answers ThrottlingException, "
            "and its throttlingReasons name the key range (the partition), not the table's "
            "capacity.",
        ) as shown:
            shown.events.append(hot.throttled[0])
    with stage.step(
        "What to do about a hot partition",
        "The layout decides how far one tenant's traffic can go, whatever the table's capacity.",
    ):
        for line in ADVICE:
            stage.note(line)

    stage.check(
        f"keyed by tenant, every write went to one partition key ({', '.join(sorted(hot.partition_keys))})",
        len(hot.partition_keys) == 1,
        shown_by=hot.step,
    )
    stage.check(
        f"that partition was throttled: {len(hot.throttled)} calls, each with the reason "
        f"{KEY_RANGE}",
        bool(hot.throttled) and hot.reasons == {KEY_RANGE},
        shown_by=hot.step,
    )
    stage.check(
        f"keyed by idempotency key, the writes spread over {len(cool.partition_keys)} partition "
        "keys and none was throttled",
        len(cool.partition_keys) == ORDERS and not cool.throttled,
        shown_by=cool.step,
    )
    stage.check(
        "every throttle was followed by a backoff sleep within its full-jitter bound and the same "
        f"request, or by giving up after {POLICY.max_attempts} attempts",
        hot.tally.retried + hot.tally.given_up == hot.tally.throttled
        and hot.tally.within == hot.tally.retried,
        shown_by=hot.step,
    )
    stage.check(
        "the backoff was jittered (first retries slept different times)",
        len(hot.tally.first_delays) < 2 or len(set(hot.tally.first_delays)) > 1,
        shown_by=hot.step,
    )
    stage.check(
        "no request answered ConditionalCheckFailedException was sent again",
        hot.tally.resent_failed == 0 and cool.tally.resent_failed == 0,
    )
    stage.check("no order's side effect ran twice", hot.ran_twice == 0 and cool.ran_twice == 0)
    return (
        f"One tenant's partition key took every write and was throttled ({len(hot.throttled)} "
        f"calls, {KEY_RANGE}); the layer backed off with jitter and ran no order twice, while "
        f"the same burst keyed by idempotency key spread over {len(cool.partition_keys)} "
        "partitions unthrottled."
    )


STORY = (
    "A low-cardinality partition key (one tenant id, a fixed queue name, a date bucket) puts "
    "every write in one partition, and DynamoDB throttles a partition past its ceiling however "
    "large the table. The same burst is sent keyed by tenant and keyed by idempotency key: the "
    "first is throttled and backs off with jitter, the second spreads; neither runs an order "
    "twice."
)
STAGE = (
    "a scratch engine whose clock moves only with the layer's backoff sleeps",
    "two on-demand tables: pk = tenant with the key as sort key, and pk = the key",
    f"throughput enforced; hot_key fault: every partition {UNITS} WCU a second (DynamoDB: 1,000)",
    f"RetryPolicy(max_attempts={POLICY.max_attempts}, base={POLICY.base:g}, cap={POLICY.cap:g}); "
    "botocore's own retries off",
    f"{ORDERS + DUPLICATES} threads per burst, released together by a barrier",
)
