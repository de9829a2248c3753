"""The TTL-removal audit fed from stream records."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency import (
    Claim,
    Idempotency,
    IdempotencyConfig,
    LateRetryError,
    MemoryMetrics,
    TtlAudit,
)
from firstwrite.idempotency.audit import DynamoAuditStore

from .conftest import TABLE, Backend

TTL_IDENTITY = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}


def stream_record(event: str, item: dict[str, Any], at: float, ttl: bool = False) -> dict[str, Any]:
    image = "OldImage" if event == "REMOVE" else "NewImage"
    record: dict[str, Any] = {
        "eventName": event,
        "dynamodb": {"Keys": {"pk": item["pk"]}, image: item, "ApproximateCreationDateTime": at},
    }
    if ttl:
        record["userIdentity"] = TTL_IDENTITY
    return record


def stored(guard: Idempotency, key: str) -> dict[str, Any]:
    dkey = guard.dynamodb_key(key)
    return dict(guard.client.get_item(TableName=TABLE, Key=dkey, ConsistentRead=True)["Item"])


def test_reclaim_after_ttl_removal_within_window_is_detected(backend: Backend, table: str) -> None:
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, retention=60, client_retry_ceiling=60)
    )
    metrics = MemoryMetrics()
    detected: list[str] = []
    audit = TtlAudit(window=600, metrics=metrics, on_detect=lambda rid, _: detected.append(rid))
    guard.run("a", lambda: 1)
    first = stored(guard, "a")
    t0 = backend.now()
    # TTL removes it, a user delete removes another (not TTL: ignored).
    audit.process([stream_record("REMOVE", first, t0 + 61, ttl=True)])
    guard.client.delete_item(TableName=TABLE, Key={"pk": first["pk"]})
    backend.advance(120)
    guard.run("a", lambda: 2)  # the key looks new: a late retry ran again
    again = stored(guard, "a")
    assert audit.process([stream_record("INSERT", again, backend.now())]) == 1
    assert detected == [first["pk"]["S"]]
    assert metrics.total("dynamo_ttl_delete_before_retry_total") == 1


def test_reclaim_outside_window_and_user_deletes_are_not_counted(
    backend: Backend, table: str
) -> None:
    guard = backend.guard()
    audit = TtlAudit(window=100)
    guard.run("b", lambda: 1)
    guard.run("c", lambda: 1)
    b, c = stored(guard, "b"), stored(guard, "c")
    audit.process([stream_record("REMOVE", b, backend.now(), ttl=True)])
    audit.process([stream_record("REMOVE", c, backend.now(), ttl=False)])  # an operator's delete
    backend.advance(500)
    b2 = {**b, "claimed_at": {"N": str(int(backend.now()))}}
    c2 = {**c, "claimed_at": {"N": str(int(backend.now()))}}
    assert (
        audit.process(
            [stream_record("INSERT", b2, backend.now()), stream_record("INSERT", c2, backend.now())]
        )
        == 0
    )
    # The Lambda event-source casing of userIdentity is accepted too.
    lambda_form = stream_record("REMOVE", b, backend.now())
    lambda_form["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    audit.process([lambda_form])
    assert audit.store.find(b["pk"]["S"]) is not None


def test_dynamo_audit_store(backend: Backend, table: str) -> None:
    backend.client.create_table(
        TableName="idem-audit",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    audit = TtlAudit(window=600, store=DynamoAuditStore(backend.client, "idem-audit"))
    guard = backend.guard()
    guard.run("d", lambda: 1)
    d = stored(guard, "d")
    audit.process([stream_record("REMOVE", d, backend.now(), ttl=True)])
    assert audit.process([stream_record("INSERT", d, backend.now())]) == 1


def test_audit_from_engine_stream(backend: Backend) -> None:
    """The whole path on the engine: TTL deletes the record, its stream carries the REMOVE with
    the TTL service identity, the key is claimed again, and the audit reads it all back."""
    client = backend.client
    config = IdempotencyConfig(table_name="idem-stream", retention=60, client_retry_ceiling=60)
    client.create_table(
        TableName="idem-stream",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    Idempotency(config, client=client, clock=backend.now).ensure_table()
    guard = Idempotency(config, client=client, clock=backend.now)
    guard.run("e", lambda: 1)
    backend.advance(120)
    backend.engine.ttl.sweep_now()  # TTL deletes the expired record (a REMOVE by the service)
    guard.run("e", lambda: 2)
    from firstwrite.engine.binding.sync import local_client

    streams = local_client(backend.engine, service_name="dynamodbstreams")
    arn = client.describe_table(TableName="idem-stream")["Table"]["LatestStreamArn"]
    audit = TtlAudit(window=3600)
    audit.poll(streams, arn)
    assert audit.detected == 1


# -- late retries after the TTL sweeper removed the record (issue 14, defect 3) ----------------
# The docs' settings: retention 24 h, client_retry_ceiling 1 h. The engine's clock is frozen and
# moved by hand; its TTL sweeper deletes an hour after expiry (TTL lag) when the test sweeps;
# the audit reads the table's stream, whose REMOVE records carry the TTL service's identity.

DAY, HOUR = 24 * 3600.0, 3600.0


class Staged:
    """An engine with a streamed idempotency table, a lagging sweeper, and the stream."""

    def __init__(self, tmp: Path, **config: Any) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.engine.binding.sync import local_client
        from firstwrite.engine.features.ttl import TTLConfig

        self.engine = Engine(tmp / "staged.db", ttl_config=TTLConfig(sweep_interval=None, lag=HOUR))
        self.engine.clock.freeze(1_800_000_000.0)
        self.client = local_client(self.engine, region="us-east-1")
        self.streams = local_client(self.engine, service_name="dynamodbstreams")
        self.config = IdempotencyConfig(
            table_name="idem-late", retention=DAY, client_retry_ceiling=HOUR, **config
        )
        self.client.create_table(
            TableName="idem-late",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        self.metrics = MemoryMetrics()
        self.guard = Idempotency(
            self.config, client=self.client, clock=self.engine.clock.now, metrics=self.metrics
        )
        self.guard.ensure_table()
        self.arn = self.client.describe_table(TableName="idem-late")["Table"]["LatestStreamArn"]
        self.effects: list[str] = []

    def run(self, key: str, payload: Any = None) -> Any:
        def side_effect() -> str:
            self.effects.append(key)
            return f"charged {key}"

        return self.guard.run(key, side_effect, {"order": key} if payload is None else payload)

    def expire_and_sweep(self) -> list[Any]:
        """Past retention and the TTL lag; the sweeper removes the records."""
        self.engine.clock.advance(DAY + HOUR + 10)
        return self.engine.ttl.sweep_now()

    def close(self) -> None:
        self.engine.close()


@pytest.fixture
def staged(tmp_path: Path) -> Iterator[Staged]:
    s = Staged(tmp_path)
    yield s
    s.close()


KEYS = ("late-1", "late-2", "late-3")


def test_late_retries_after_the_sweep_are_detected_with_the_documented_wiring(
    staged: Staged, caplog: pytest.LogCaptureFixture
) -> None:
    """The docs' wiring, ``TtlAudit(window=config.client_retry_ceiling)`` fed from the stream:
    three late retries ran again and each is counted and logged with its key and age."""
    audit = TtlAudit(window=staged.config.client_retry_ceiling, metrics=staged.metrics)
    for key in KEYS:
        staged.run(key)
    assert len(staged.expire_and_sweep()) == 3
    iterators = audit.poll(staged.streams, staged.arn)  # the three REMOVEs by the TTL service
    caplog.set_level(logging.INFO, logger="firstwrite.idempotency")
    staged.engine.clock.advance(600)
    for key in KEYS:
        assert staged.run(key) == f"charged {key}"  # no record left: it ran again
    audit.poll(staged.streams, staged.arn, iterators)  # the three INSERTs
    assert audit.detected == 3
    assert staged.metrics.total("dynamo_ttl_delete_before_retry_total") == 3
    logged = [r for r in caplog.records if r.name == "firstwrite.idempotency.audit"]
    assert sorted(r.idempotency_key for r in logged) == list(KEYS)  # type: ignore[attr-defined]
    age = DAY + HOUR + 10 + 600
    # The claim time is the latest DynamoDB time the answers' Date (whole seconds) allowed:
    # up to a second after the claim, so the age up to a second short.
    assert all(age - 2 < r.record_age < age + 1 for r in logged)  # type: ignore[attr-defined]


def test_late_retries_are_refused_when_asked(tmp_path: Path) -> None:
    """With a client the audit leaves a tombstone where TTL removed a finished record; with
    ``refuse_late_retries`` the guard refuses the late retry instead of running it again."""
    staged = Staged(tmp_path, refuse_late_retries=True)
    try:
        audit = TtlAudit(config=staged.config, client=staged.client, window=7 * DAY)
        for key in KEYS:
            staged.run(key)
        staged.expire_and_sweep()
        audit.poll(staged.streams, staged.arn)
        assert audit.tombstones == 3
        staged.engine.clock.advance(3 * DAY)
        for key in KEYS:
            with pytest.raises(LateRetryError) as info:
                staged.run(key)
            assert info.value.key == key and info.value.removed
            assert info.value.age is not None and info.value.age > DAY
        assert staged.effects == list(KEYS)  # each side effect ran once
        assert staged.metrics.total("dynamo_ttl_delete_before_retry_total") == 3
        assert staged.metrics.total("firstwrite_claims_total", outcome="late_retry_refused") == 3
        # Another request with the same key is new: a key is free after retention.
        assert staged.run("late-1", {"order": "something else"}) == "charged late-1"
        # After the audit's window the key is forgotten, like any expired record.
        staged.engine.clock.advance(5 * DAY)
        assert staged.run("late-2") == "charged late-2"
    finally:
        staged.close()


def test_late_retries_run_by_default_and_are_detected_before_they_run(
    staged: Staged, caplog: pytest.LogCaptureFixture
) -> None:
    audit = TtlAudit(config=staged.config, client=staged.client, metrics=staged.metrics)
    staged.run("late-4")
    staged.expire_and_sweep()
    audit.poll(staged.streams, staged.arn)
    caplog.set_level(logging.WARNING, logger="firstwrite.idempotency")
    staged.engine.clock.advance(HOUR)
    assert staged.run("late-4") == "charged late-4"
    assert staged.effects == ["late-4", "late-4"]  # ran again: refusing is opt-in
    (record,) = [r for r in caplog.records if getattr(r, "record_age", None) is not None]
    assert record.idempotency_key == "late-4"  # type: ignore[attr-defined]
    assert record.record_age == pytest.approx(DAY + 2 * HOUR + 10, abs=1)  # type: ignore[attr-defined]
    assert staged.metrics.total("firstwrite_claims_total", outcome="reclaimed_removed") == 1
    # The whole stream again (the old iterators have expired): the claim replaced the
    # tombstone (a MODIFY, not an INSERT), so the late retry is counted once.
    audit.poll(staged.streams, staged.arn)
    assert audit.detected == 0
    assert staged.metrics.total("dynamo_ttl_delete_before_retry_total") == 1


def test_a_late_retry_before_the_sweep_is_refused_too(tmp_path: Path) -> None:
    """Past retention but not yet removed (TTL lags): the same late retry, the same answer."""
    staged = Staged(tmp_path, refuse_late_retries=True)
    try:
        staged.run("late-5")
        staged.engine.clock.advance(DAY + 60)  # expired; the sweeper has not run
        with pytest.raises(LateRetryError) as info:
            staged.run("late-5")
        assert not info.value.removed and staged.effects == ["late-5"]
        assert staged.metrics.total("firstwrite_late_retries_total", record="expired") == 1
        assert staged.guard.get("late-5") is not None  # nothing was written over it
        assert staged.run("late-5", {"order": "new"}) == "charged late-5"
    finally:
        staged.close()


def test_a_late_retry_that_beats_the_audit_is_detected_after_the_fact(staged: Staged) -> None:
    """The stream lags: a retry after the sweep but before the audit read the REMOVE finds no
    tombstone and runs; the audit then writes none over the new claim, and counts it."""
    audit = TtlAudit(config=staged.config, client=staged.client, metrics=staged.metrics)
    staged.run("late-6")
    staged.expire_and_sweep()
    staged.run("late-6")
    audit.poll(staged.streams, staged.arn)
    assert audit.tombstones == 0 and audit.detected == 1
    record = staged.guard.get("late-6")
    assert record is not None and not record.removed


def test_a_transactional_late_retry_is_refused_and_its_business_write_not_applied(
    tmp_path: Path,
) -> None:
    staged = Staged(tmp_path, refuse_late_retries=True)
    try:
        audit = TtlAudit(config=staged.config, client=staged.client)
        order = {
            "Put": {
                "TableName": "idem-late",
                "Item": {"pk": {"S": "ORDER#t"}, "n": {"N": "1"}},
            }
        }
        claim = staged.guard.claim_with("late-7", [order], {"order": 7})
        assert isinstance(claim, Claim)
        staged.guard.complete(claim, "seven")
        staged.expire_and_sweep()
        audit.poll(staged.streams, staged.arn)
        again = {
            **order,
            "Put": {**order["Put"], "Item": {"pk": {"S": "ORDER#t"}, "n": {"N": "2"}}},
        }
        with pytest.raises(LateRetryError):
            staged.guard.claim_with("late-7", [again], {"order": 7})
        item = staged.client.get_item(TableName="idem-late", Key={"pk": {"S": "ORDER#t"}})
        assert item["Item"]["n"] == {"N": "1"}  # the refused transaction wrote nothing
        claim = staged.guard.claim_with("late-7", [again], {"order": "another"})
        assert staged.guard.get("late-7") is not None and not staged.guard.get("late-7").removed  # type: ignore[union-attr]
    finally:
        staged.close()
