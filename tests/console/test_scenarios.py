"""The scenarios: each holds on the real layer, says so from what it observed, and says it
did not hold when the layer is broken. None of them touches the served engine."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from firstwrite.console import scenarios
from firstwrite.console.scenarios.stage import Exchange, Note, Stage
from firstwrite.console.seed import EXAMPLES_TABLE
from firstwrite.idempotency import Idempotency, MemoryMetrics

from .conftest import Server, post_json

SLUGS = [s.slug for s in scenarios.SCENARIOS]


@pytest.mark.parametrize("slug", SLUGS)
def test_each_scenario_holds(slug: str) -> None:
    scenario = scenarios.by_slug(slug)
    assert scenario is not None
    shared = MemoryMetrics()
    outcome = scenarios.run(scenario, shared)
    assert outcome.error is None
    assert outcome.checks, "a verdict needs checks"
    failed = [c.text for c in outcome.checks if not c.passed]
    assert failed == [] and outcome.held
    calls = [e for s in outcome.steps for e in s.events if isinstance(e, Exchange)]
    assert calls, "the scenario made real DynamoDB calls"
    assert all(c.status in (200, 400) and c.request is not None for c in calls)
    # Its metrics went to the shared sink too.
    assert sum(shared.counts.values()) == sum(m.value for m in outcome.metrics)


def run(slug: str) -> Any:
    scenario = scenarios.by_slug(slug)
    assert scenario is not None
    return scenarios.run(scenario)


def events(outcome: Any, title: str) -> list[Exchange | Note]:
    (step,) = [s for s in outcome.steps if s.title == title]
    return list(step.events)


def test_lease_takeover_shows_the_fence_refusing_the_stale_worker() -> None:
    outcome = run("lease-takeover")
    stale = events(outcome, "Worker A wakes up and tries to complete")
    update = [e for e in stale if isinstance(e, Exchange)]
    assert [(e.actor, e.operation, e.code) for e in update] == [
        ("worker A", "UpdateItem", "ConditionalCheckFailedException")
    ]
    # The record that came back with the refusal is B's completed one.
    assert "result" in update[0].response["Item"]
    last = outcome.steps[-1].snapshots[0].record
    assert last is not None and last.state == "COMPLETED" and "ch_B" in last.outcome


def test_ttl_race_shows_expired_records_then_tombstones() -> None:
    outcome = run("ttl-race")
    by_title = {s.title: s for s in outcome.steps}
    lagging = by_title["Retention ends, the sweeper lags"]
    assert all(s.record is not None and s.record.expired(lagging.at) for s in lagging.snapshots)
    swept = by_title["The sweeper catches up"].snapshots
    assert [s.record for s in swept] == [None, None]
    audited = by_title["The TTL audit reads the stream"]
    states = [s.record.state if s.record else None for s in audited.snapshots]
    assert states == ["COMPLETED (tombstone)", "COMPLETED (tombstone)"]
    calls = [(e.operation, e.code) for e in audited.events if isinstance(e, Exchange)]
    assert ("GetRecords", None) in calls
    assert calls.count(("PutItem", None)) == 2  # the tombstones
    refused = [
        e.text
        for e in by_title["A late duplicate after the sweep"].events
        if isinstance(e, Note) and e.text.startswith("LateRetryError")
    ]
    assert refused and "removed by TTL" in refused[0]


def test_throttling_retries_throttles_with_jitter_and_never_a_failed_condition() -> None:
    outcome = run("throttling")
    burst = [e for e in outcome.steps[1].events]
    throttled = [
        e
        for e in burst
        if isinstance(e, Exchange) and e.code == "ProvisionedThroughputExceededException"
    ]
    sleeps = [e for e in burst if isinstance(e, Note) and e.kind == "sleep"]
    assert throttled and sleeps
    assert len({round(s.seconds, 6) for s in sleeps}) > 1


def test_transaction_shows_each_cancellation_reason() -> None:
    outcome = run("transaction-cancelled")
    notes = [
        e.text for e in events(outcome, "A payment larger than the balance") if isinstance(e, Note)
    ]
    assert any(n.startswith("reason [0]") and ": None:" in n for n in notes)
    assert any(n.startswith("reason [1]") and "ConditionalCheckFailed" in n for n in notes)


def test_stale_replica_compares_unpinned_and_pinned() -> None:
    outcome = run("stale-replica")
    texts = [e.text for s in outcome.steps for e in s.events if isinstance(e, Note)]
    assert sum("order-7 charged" in t for t in texts) == 2
    assert sum("order-8 charged" in t for t in texts) == 1


def test_hot_partition_throttles_the_tenants_partition_alone() -> None:
    outcome = run("hot-partition")
    hot = [e for e in events(outcome, "The burst, keyed by tenant") if isinstance(e, Exchange)]
    throttled = [e for e in hot if e.code == "ThrottlingException"]  # on-demand tables
    assert throttled
    for call in throttled:
        assert call.response["throttlingReasons"] == [
            {
                "reason": "TableWriteKeyRangeThroughputExceeded",
                "resource": "arn:aws:dynamodb:us-east-1:000000000000:table/orders-by-tenant",
            }
        ]
        assert call.summary.endswith(": TableWriteKeyRangeThroughputExceeded")
    assert {e.request["Key" if "Key" in e.request else "Item"]["pk"]["S"] for e in hot} == {
        "IDEMPOTENCY#tenant-acme"
    }
    spread = [
        e
        for e in events(outcome, "The same burst, keyed by idempotency key")
        if isinstance(e, Exchange)
    ]
    assert spread and all(e.code != "ThrottlingException" for e in spread)
    advice = [e.text for e in events(outcome, "What to do about a hot partition")]
    assert any("one tenant id, a fixed queue name, a date bucket" in a for a in advice)


def test_hot_partition_throttles_when_commits_are_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    # A loaded machine: each group commit waits, so the burst's writers queue up and are all
    # admitted before any is charged. The burst must still throttle (at 10 units it drew none).
    from firstwrite.engine.storage import database

    run_batch = database.Storage._run_batch

    def slow(self: Any, batch: Any) -> None:
        time.sleep(0.02)
        run_batch(self, batch)

    monkeypatch.setattr(database.Storage, "_run_batch", slow)
    outcome = run("hot-partition")
    hot = [e for e in events(outcome, "The burst, keyed by tenant") if isinstance(e, Exchange)]
    assert sum(e.code == "ThrottlingException" for e in hot) >= 4
    assert [c.text for c in outcome.checks if not c.passed] == [] and outcome.held


def test_an_error_becomes_the_outcome_not_an_exception() -> None:
    def broken(stage: Stage) -> str:
        stage.check("got this far", True)
        raise RuntimeError("boom")

    scenario = scenarios.Scenario(99, "broken", "Broken", "", (), broken, lambda s, m: Stage(s, m))
    outcome = scenarios.run(scenario)
    assert outcome.error == "RuntimeError: boom"
    assert not outcome.held


# -- the verdict is computed, so a broken layer fails it -------------------------------------


def test_replay_does_not_hold_without_deduplication(monkeypatch: pytest.MonkeyPatch) -> None:
    def naive_run(
        self: Idempotency, key: str, fn: Callable[[], Any], payload: Any = None, **_: Any
    ) -> Any:
        return fn()  # what a service without the layer does

    monkeypatch.setattr(Idempotency, "run", naive_run)
    outcome = run("replay")
    assert not outcome.held
    failed = [c.text for c in outcome.checks if not c.passed]
    assert "the card was charged exactly once" in failed


def test_hot_partition_does_not_hold_without_deduplication(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def naive_run(
        self: Idempotency, key: str, fn: Callable[[], Any], payload: Any = None, **_: Any
    ) -> Any:
        return fn()

    monkeypatch.setattr(Idempotency, "run", naive_run)
    outcome = run("hot-partition")
    assert not outcome.held
    failed = [c.text for c in outcome.checks if not c.passed]
    assert "no order's side effect ran twice" in failed


def test_lease_takeover_does_not_hold_without_the_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    def unfenced_complete(self: Idempotency, claim: Any, result: Any = None) -> None:
        self.client.update_item(  # the completion without its owner/version condition
            TableName=self.config.table_name,
            Key=claim.key,
            UpdateExpression="SET #r = :r REMOVE lease_expires_at",
            ExpressionAttributeNames={"#r": "result"},
            ExpressionAttributeValues={":r": {"S": str(result)}},
        )

    monkeypatch.setattr(Idempotency, "complete", unfenced_complete)
    outcome = run("lease-takeover")
    assert not outcome.held
    failed = [c.text for c in outcome.checks if not c.passed]
    assert "A's stale completion was refused with LostClaimError" in failed


def test_skewed_worker_is_kept_off_the_live_claim_by_dynamodbs_clock() -> None:
    outcome = run("skewed-worker")
    assert outcome.held, [c.text for c in outcome.checks if not c.passed]
    # Without the estimate, B's one PutItem took A's live claim over.
    hazard = events(outcome, "Without the estimate: B's clock says the lease is over")
    assert [(e.actor, e.operation, e.code) for e in hazard if isinstance(e, Exchange)] == [
        ("worker B, estimate off", "PutItem", None)
    ]
    # With it, B's claim took nothing live over and was told "in progress" from its answer.
    corrected = events(outcome, "With the estimate (the default): B reads DynamoDB's clock")
    assert [(e.actor, e.operation, e.code) for e in corrected if isinstance(e, Exchange)] == [
        ("worker B", "PutItem", "ConditionalCheckFailedException")
    ]
    refused = events(outcome, "A worker whose clock is too far off is refused")
    assert any(isinstance(e, Note) and e.text.startswith("ClockSkewError") for e in refused)
    twin = outcome.steps[-1].snapshots[1].record
    assert twin is not None and twin.state == "PENDING"  # B (estimate off) holds A's live claim
    last = outcome.steps[-1].snapshots[0].record
    assert last is not None and last.state == "COMPLETED" and "ch_B" in last.outcome


def test_skewed_worker_does_not_hold_without_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    from firstwrite.console.scenarios import skewed_worker
    from firstwrite.idempotency import ClockSkewPolicy

    real = skewed_worker.IdempotencyConfig

    def estimate_off(**kwargs: Any) -> Any:
        return real(**{**kwargs, "clock_skew": ClockSkewPolicy(enabled=False)})

    monkeypatch.setattr(skewed_worker, "IdempotencyConfig", estimate_off)
    outcome = run("skewed-worker")
    assert not outcome.held and outcome.error is None
    failed = [c.text for c in outcome.checks if not c.passed]
    assert "with the estimate, B (+12 s) was told 'in progress' while A's lease was alive" in failed
    assert "C (+40 s, past max_offset) was refused with a retryable ClockSkewError" in failed


# -- through the console, which must leave the served engine alone ----------------------------


def test_scenarios_run_on_scratch_engines(http: httpx.Client, console_server: Server) -> None:
    engine = console_server.engine
    before = engine.execute("ListTables", {})["TableNames"]
    for slug in ("lease-takeover", "ttl-race", "stale-replica"):
        response = post_json(http, f"/api/scenarios/{slug}", {})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["held"] is True and body["error"] is None
        assert 'data-held="true"' in body["html"]
        # The page shows the last run without JavaScript.
        assert 'data-held="true"' in http.get(f"/scenarios/{slug}").text
    assert engine.execute("ListTables", {})["TableNames"] == before == [EXAMPLES_TABLE]
    state = engine.clock.state()
    assert state["frozen"] is False and state["offset"] == 0.0
    assert engine.faults.describe()["faults"] == []
    assert engine.replication.backlog() == []
    assert engine.execute("ListTables", {}, region="eu-west-1")["TableNames"] == []


def test_the_layers_log_lines_go_to_the_page(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="firstwrite.idempotency")
    outcome = run("lease-takeover")
    logged = [
        e.text for s in outcome.steps for e in s.events if isinstance(e, Note) and e.kind == "log"
    ]
    assert any("WARNING: took over the abandoned claim" in t for t in logged)
    assert any("ERROR: lost the claim" in t for t in logged)
    assert [r for r in caplog.records if r.name.startswith("firstwrite.idempotency")] == []
    # Outside a scenario the layer logs as it always does.
    logging.getLogger("firstwrite.idempotency").warning("outside")
    assert [r.getMessage() for r in caplog.records] == ["outside"]


def test_the_throttling_tally_tells_a_completion_retry_from_a_throttle_retry() -> None:
    """The layer's retry loop gives up on its 10th throttled attempt; a completion is then sent
    again by the completion loop after a sleep of its own. That sleep is not a throttle retry
    (the metric does not count it), so the verdict must not count it either."""
    from firstwrite.console.scenarios.throttling import POLICY, Tally

    throttle = {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}
    request = {"TableName": "t", "Key": {"pk": {"S": "order-01"}}}
    events: list[Exchange | Note] = []
    for _ in range(POLICY.max_attempts):
        events.append(Exchange("a", "UpdateItem", 0.0, request, 400, throttle))
        events.append(Note("sleep", "backoff", "a", seconds=0.01))
    events.pop()  # the 10th throttle: the retry loop gives up, the completion loop sleeps...
    events.append(Note("sleep", "completion retry", "a", seconds=0.03))
    events.append(Exchange("a", "UpdateItem", 0.0, request, 200, {}))  # ...and sends it again
    tally = Tally()
    tally.add(events)
    assert tally.throttled == POLICY.max_attempts
    assert (tally.retried, tally.given_up) == (POLICY.max_attempts - 1, 1)
    assert tally.within == tally.retried


def test_redelivered_batch_shows_each_records_outcome_per_delivery() -> None:
    outcome = run("redelivered-batch")
    said = {
        s.title: [e.text for e in s.events if isinstance(e, Note) and e.text.startswith("record ")]
        for s in outcome.steps
    }
    assert said["The first delivery"] == [
        "record m-1 (order o-1): ran",
        "record m-2 (order o-2): ran",
        "record m-3 (order o-2): replayed (ran before: not run again)",
        "record m-4 (order o-3): reported for redelivery",
        "record m-5 (order o-4): reported for redelivery",
    ]
    second = said["The reported records, redelivered"]
    assert second[0] == "record m-4 (order o-3): ran"
    assert second[1].startswith("record m-5 (order o-4): FAILED final after 2 attempts")
    assert all("replayed" in line for line in said["The whole batch, once more"])
    assert outcome.held and "exactly once" in outcome.verdict
    # the give-up is logged at ERROR on the page
    logs = [e.text for s in outcome.steps for e in s.events if isinstance(e, Note)]
    assert any(t.startswith("the layer logged ERROR: sqs record m-5: failed_final") for t in logs)


def test_redelivered_batch_does_not_hold_without_the_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each record run as delivered, as a handler without the layer would: the verdict fails."""
    from firstwrite.events import BatchResult, RecordOutcome, RecordResult, SQSBatch

    def unguarded(self: SQSBatch, records: Any, context: Any, handler: Any) -> BatchResult:
        results = []
        for record in records:
            try:
                handler(record)
                results.append(RecordResult(record["messageId"], None, RecordOutcome.PROCESSED))
            except Exception:
                results.append(RecordResult(record["messageId"], None, RecordOutcome.FAILED))
        return BatchResult(results)

    monkeypatch.setattr(SQSBatch, "process", unguarded)
    outcome = run("redelivered-batch")
    assert not outcome.held
    failed = {c.text for c in outcome.checks if not c.passed}
    assert any(text.startswith("each record's side effect ran exactly once") for text in failed)


def test_the_throttling_tally_counts_a_duplicates_polls_apart_from_throttle_retries() -> None:
    """A duplicate polls with the same GetItem after each answer (the default in-progress
    wait); those resends are not retries. Counted as one run of attempts, the tenth poll's
    throttle read as the layer giving up and the backoff after it as overlong (seen in a
    full-suite run: the scenario's backoff and metric checks failed)."""
    from firstwrite.console.scenarios.throttling import POLICY, Tally, bound

    throttle = {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException"}
    get = {"TableName": "t", "Key": {"pk": {"S": "IDEMPOTENCY#k"}}, "ConsistentRead": True}
    put = {"TableName": "t", "Item": {"pk": {"S": "IDEMPOTENCY#k"}}}

    def call(request: Any, status: int = 200, response: Any = None) -> Exchange:
        return Exchange("dup", "GetItem", 0.0, request, status, response or {})

    def sleep(seconds: float) -> Note:
        return Note("sleep", f"{seconds} s", "dup", seconds=seconds)

    conflict = {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}
    events: list[Exchange | Note] = [call(put, 400, conflict)]
    for _ in range(POLICY.max_attempts - 1):  # polls answered "still in progress"
        events += [sleep(0.5), call(get)]
    second = bound(2) * 0.9
    assert second > bound(1)  # a retry's second backoff, longer than a first one may be
    events += [sleep(0.5), call(get, 400, throttle), sleep(bound(1) / 2)]
    events += [call(get, 400, throttle), sleep(second), call(get)]
    tally = Tally()
    tally.add(events)
    assert (tally.throttled, tally.retried, tally.given_up) == (2, 2, 0)
    assert tally.within == 2


# -- scenario 9: a worker killed after the charge ---------------------------------------------


def _states(outcome: Any) -> dict[str, tuple[str | None, str | None]]:
    """Each step's title: the watched record's state and owner after it."""
    shots = {s.title: s.snapshots[0].record for s in outcome.steps if s.snapshots}
    return {t: (r.state, r.owner) if r else (None, None) for t, r in shots.items()}


def test_worker_killed_after_charge_is_refused_then_reconciled() -> None:
    outcome = run("worker-killed-after-charge")
    assert outcome.held, [c.text for c in outcome.checks if not c.passed]
    killed = events(outcome, "Worker A claims, marks, charges, and is killed")
    calls = [(e.actor, e.operation, e.code) for e in killed if isinstance(e, Exchange)]
    assert calls == [("worker A", "PutItem", None), ("worker A", "UpdateItem", None)]
    mark = [e for e in killed if isinstance(e, Exchange)][1].request
    assert "list_append" in mark["UpdateExpression"]  # the recovery point, fenced
    assert "#own = :own" in mark["ConditionExpression"]
    texts = [e.text for s in outcome.steps for e in s.events if isinstance(e, Note)]
    assert sum(t.startswith("payment provider: card charged") for t in texts) == 1
    states = _states(outcome)
    a_state, a_owner = states["Worker A claims, marks, charges, and is killed"]
    assert a_state is not None and a_state.startswith("PENDING")
    # B's refusal: its claim was refused for the mark; it wrote nothing and ran nothing.
    refused = events(outcome, "Worker B retries, without a reconcile hook")
    assert not any(isinstance(e, Note) and "charged" in e.text for e in refused)
    assert any(isinstance(e, Note) and e.text.startswith("RecoveryRequiredError") for e in refused)
    assert any(
        isinstance(e, Note) and "503 urn:firstwrite:problem:recovery-required" in e.text
        for e in refused
    )
    b_state, b_owner = states["Worker B retries, without a reconcile hook"]
    assert b_state is not None and b_state.startswith("PENDING") and b_owner == a_owner
    calls = [(e.operation, e.code) for e in refused if isinstance(e, Exchange)]
    assert calls == [("PutItem", "ConditionalCheckFailedException")]
    # C's takeover asked the provider and completed the record with A's charge.
    reconciled = events(outcome, "Worker C retries, with a reconcile hook")
    notes = [e.text for e in reconciled if isinstance(e, Note)]
    assert any(
        n.startswith("payment provider: lookup pay-order-2041 → {'charge': 'ch_0001'")
        for n in notes
    )
    c_state, _ = states["Worker C retries, with a reconcile hook"]
    assert c_state == "COMPLETED"
    assert {(m.name, m.labels) for m in outcome.metrics} >= {
        ("firstwrite_recovery_takeovers_total", "outcome=refused"),
        ("firstwrite_recovery_takeovers_total", "outcome=reconciled"),
    }


def test_worker_killed_after_charge_does_not_hold_without_recovery_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A layer that ignores the marks takes the dead claim over as a plain takeover: B charges
    again, and the verdict says so."""
    from firstwrite.idempotency._machine import recovery as machine_recovery

    def without_settling(machine: Any, hook: Any) -> None:
        # A marked record refused by the claim's condition is taken over as seen, and never
        # settled: the work runs as after any other takeover.
        machine.reconcile = hook
        machine.marked = lambda m, attempt, stored, rec: (
            stored if stored is not None and m.layout.marks in stored else None
        )

    monkeypatch.setattr(machine_recovery, "install", without_settling)
    outcome = run("worker-killed-after-charge")
    assert outcome.error is None and not outcome.held
    failed = {c.text for c in outcome.checks if not c.passed}
    assert "B's refusal ran nothing: the provider got no second charge request" in failed
    assert "the card was charged exactly once (one charge request, one charge)" in failed


# -- scenario 11: two regions both said yes -------------------------------------------------


def test_regions_both_claimed_found_by_the_reconciler_without_a_retry() -> None:
    outcome = run("regions-both-claimed")
    assert outcome.held, [c.text for c in outcome.checks if not c.passed]
    texts = [e.text for s in outcome.steps for e in s.events if isinstance(e, Note)]
    assert sum("order-9117 charged in" in t for t in texts) == 2
    claims = [
        (e.actor, e.operation, e.code)
        for s in outcome.steps
        for e in s.events
        if isinstance(e, Exchange) and e.operation == "PutItem"
    ]
    assert claims == [("us-east-1", "PutItem", None), ("eu-west-1", "PutItem", None)]  # no retry
    found = events(outcome, "The cross-region reconciler reads each region's stream")
    reads = {
        (e.actor, e.region)
        for e in found
        if isinstance(e, Exchange) and e.operation == "GetRecords"
    }
    assert reads == {("reconciler us-east-1", "us-east-1"), ("reconciler eu-west-1", "eu-west-1")}
    (logged,) = [e.text for e in found if isinstance(e, Note) and e.kind == "log"]
    assert logged.startswith(
        "the layer logged ERROR: cross-region duplicate: the claim of 'order-9117'"
    )
    owners = {
        s.label: s.record.owner
        for s in outcome.steps[2].snapshots  # after the second region's claim: two owners
        if s.record is not None
    }
    assert len(set(owners.values())) == 2
    assert all(owner in logged for owner in owners.values())  # both owners named
    metrics = {(m.name, m.labels): m.value for m in outcome.metrics}
    assert metrics[("dynamo_cross_region_duplicate_detected_total", "region=eu-west-1")] == 1


def test_regions_both_claimed_does_not_hold_when_the_reconciler_misses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from firstwrite.events import global_tables

    monkeypatch.setattr(global_tables, "find_overwrite", lambda *a, **k: None)
    outcome = run("regions-both-claimed")
    assert outcome.error is None and not outcome.held
    failed = {c.text for c in outcome.checks if not c.passed}
    assert (
        "the reconciler found exactly one overwrite of order-9117, in us-east-1's stream" in failed
    )
    assert any(text.startswith("dynamo_cross_region_duplicate_detected_total") for text in failed)


def test_regions_both_claimed_sees_no_hazard_without_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without replication lag the second region sees the first one's record and replays it:
    the checks observe what happened, so the verdict does not claim a hazard that was not."""
    from firstwrite.console.scenarios import both_regions

    monkeypatch.setattr(both_regions, "LAG", 0.0)
    outcome = run("regions-both-claimed")
    assert outcome.error is None and not outcome.held
    failed = {c.text for c in outcome.checks if not c.passed}
    assert (
        "the hazard is real: both regions claimed the key and the side effect ran in each" in failed
    )
