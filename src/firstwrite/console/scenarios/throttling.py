"""Scenario 3: throttling under burst. A provisioned table too small for a burst of requests:
throttles are retried with jittered exponential backoff, failed conditions never are."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from firstwrite.idempotency import (
    IdempotencyConfig,
    InProgressError,
    Metrics,
    RetryPolicy,
)

from .stage import Exchange, Note, Stage

TABLE = "orders-idempotency"
WCU = 10
BURST_SECONDS = 1.0
KEYS = 12
DUPLICATES = 4
POLICY = RetryPolicy(max_attempts=10, base=0.05, cap=1.0)
THROTTLES = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException"})


def make_stage(slug: str, shared: Metrics | None) -> Stage:
    # The clock runs: token buckets refill with engine time and the backoff really sleeps.
    return Stage(slug, shared, frozen=False)


def bound(attempt: int) -> float:
    """The most the layer may sleep before retry ``attempt`` (full jitter: 0 .. this)."""
    return min(POLICY.cap, POLICY.base * 2.0 ** (attempt - 1))


@dataclass
class Tally:
    """What one request's calls and sleeps show about the retry policy. A call's attempt number
    counts the same request sent again in a row after a throttle. The layer's retry loop gives up on every
    ``max_attempts``-th attempt; a completion is then tried again by the layer's completion
    loop after a sleep of its own, which is not a throttle retry (nor counted as one in
    ``firstwrite_dynamodb_throttles_total``)."""

    throttled: int = 0
    retried: int = 0
    within: int = 0
    given_up: int = 0
    resent_failed: int = 0
    first_delays: list[float] = field(default_factory=list)

    def add(self, events: list[Exchange | Note]) -> None:
        attempt = 0
        previous: Any = None
        for index, event in enumerate(events):
            if not isinstance(event, Exchange):
                continue
            # A resend of a throttled request is its next attempt; the same request sent again
            # after an answer (a duplicate's in-progress polls) starts a new count.
            attempt = attempt + 1 if event.request == previous else 1
            previous = event.request if event.code in THROTTLES else None
            if event.code in THROTTLES:
                self.throttled += 1
                nxt = events[index + 1] if index + 1 < len(events) else None
                if attempt % POLICY.max_attempts == 0:
                    self.given_up += 1
                elif isinstance(nxt, Note) and nxt.kind == "sleep":
                    self.retried += 1
                    round_attempt = attempt % POLICY.max_attempts
                    self.within += 0 <= nxt.seconds <= bound(round_attempt)
                    if attempt == 1:
                        self.first_delays.append(nxt.seconds)
            elif event.code == "ConditionalCheckFailedException":
                later = (e for e in events[index + 1 :] if isinstance(e, Exchange))
                self.resent_failed += any(e.request == event.request for e in later)


def run(stage: Stage) -> str:
    config = IdempotencyConfig(table_name=TABLE, retry=POLICY)
    client = stage.client()
    guard = stage.guard(config, client=client)
    with stage.step(
        "Setting the stage",
        f"A PROVISIONED table with {WCU} write units. Throughput enforcement is switched on "
        f"with {BURST_SECONDS:g} s of burst capacity, so the table holds {WCU * BURST_SECONDS:g} "
        f"write units at most and refills {WCU} per second.",
    ):
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            ProvisionedThroughput={"ReadCapacityUnits": WCU, "WriteCapacityUnits": WCU},
        )
        stage.engine.faults.enforce_throughput(True, burst_seconds=BURST_SECONDS)
        stage.note(
            "provisioned throughput enforced",
            kind="stage",
            code=f"engine.faults.enforce_throughput(True, burst_seconds={BURST_SECONDS:g})  ·  "
            f'POST /_firstwrite/faults/throughput {{"enforced": true, "burst_seconds": {BURST_SECONDS:g}}}',
        )

    ran: collections.Counter[str] = collections.Counter()
    answers: dict[str, str] = {}
    lock = threading.Lock()
    requests = [f"order-{i:02d}" for i in range(KEYS)] + [
        f"order-{i:02d}" for i in range(DUPLICATES)
    ]
    gate = threading.Barrier(len(requests))

    def request(index: int, key: str) -> None:
        actor = f"request {index + 1:02d} ({key})"
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
                if mine.ran:
                    answer += (
                        " (after the side effect: the record stays PENDING until its lease ends)"
                    )
        with lock:
            answers[actor] = answer

    with stage.step(
        f"A burst of {len(requests)} requests",
        f"{KEYS} orders, {DUPLICATES} of them sent twice, all at once from {len(requests)} "
        "threads. Each claim and each completion is a write. The layer retries a throttled "
        f"call after a random sleep between 0 and min({POLICY.cap:g} s, {POLICY.base:g} s * 2^n) "
        "(full jitter), up to "
        f"{POLICY.max_attempts} attempts. A ConditionalCheckFailedException is an answer, never "
        "retried.",
    ) as step:
        threads = [
            threading.Thread(target=request, args=(i, key), name=f"burst-{i}")
            for i, key in enumerate(requests)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    by_actor: dict[str, list[Exchange | Note]] = collections.defaultdict(list)
    for event in step.events:  # the calls and the sleeps between them (not the log lines)
        if isinstance(event, Exchange) or event.kind == "sleep":
            by_actor[event.actor].append(event)
    tally = Tally()
    with stage.step(
        "What the layer did with each answer",
        "Each request's calls in order: throttles followed by a jittered sleep and the same "
        "request again; failed conditions answered once.",
    ):
        for actor in sorted(by_actor):
            events = by_actor[actor]
            tally.add(events)
            calls = [e for e in events if isinstance(e, Exchange)]
            sleeps = [e.seconds for e in events if isinstance(e, Note) and e.kind == "sleep"]
            delays = ", ".join(f"{s * 1000:.0f} ms" for s in sleeps) or "none"
            stage.note(
                f"{actor}: {len(calls)} call(s), "
                f"{sum(c.code in THROTTLES for c in calls)} throttled, backoff {delays}; "
                f"{answers.get(actor, '?')}"
            )
    throttled, retried, given_up = tally.throttled, tally.retried, tally.given_up

    stage.check(
        f"the table was too small for the burst: {throttled} calls throttled",
        throttled > 0,
        shown_by=step,
    )
    stage.check(
        "every throttle was followed by a backoff sleep and the same request, or by giving up "
        f"after {POLICY.max_attempts} attempts",
        retried + given_up == throttled,
        shown_by=step,
    )
    stage.check(
        "every backoff stayed within its full-jitter bound min(cap, base * 2^(n-1))",
        tally.within == retried,
        shown_by=step,
    )
    stage.check(
        "the backoff was jittered (first retries slept different times)",
        len(tally.first_delays) < 2 or len(set(tally.first_delays)) > 1,
        shown_by=step,
    )
    stage.check(
        "no request answered ConditionalCheckFailedException was sent again",
        tally.resent_failed == 0,
        shown_by=step,
    )
    stage.check("no order's side effect ran twice", all(n <= 1 for n in ran.values()))
    stage.check(
        "firstwrite_dynamodb_throttles_total counted every retried throttle",
        stage.metrics.total("firstwrite_dynamodb_throttles_total") == retried,
    )
    return (
        f"Backoff held: {throttled} throttled calls were retried after jittered sleeps (or given "
        "up on with the error), no failed condition was ever retried, and no order ran twice."
    )


STORY = (
    "A provisioned table far too small for a burst of requests, some of them duplicates. "
    "DynamoDB throttles; the layer backs off with full jitter and tries the same request again, "
    "but a failed condition is an answer and is never retried."
)
STAGE = (
    "a scratch engine whose clock runs in real time",
    f"a PROVISIONED table with {WCU} WCU, throughput enforced with {BURST_SECONDS:g} s of burst",
    f"RetryPolicy(max_attempts={POLICY.max_attempts}, base={POLICY.base:g}, cap={POLICY.cap:g}); "
    "botocore's own retries off",
    f"{KEYS + DUPLICATES} threads released together by a barrier",
)
