"""The TTL-removal audit fed from stream records."""

from __future__ import annotations

from typing import Any

from firstwrite.idempotency import Idempotency, IdempotencyConfig, MemoryMetrics, TtlAudit
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
    from firstwrite.engine.binding import local_client

    streams = local_client(backend.engine, service_name="dynamodbstreams")
    arn = client.describe_table(TableName="idem-stream")["Table"]["LatestStreamArn"]
    audit = TtlAudit(window=3600)
    audit.poll(streams, arn)
    assert audit.detected == 1
