"""The TTL audit's histogram of Streams REMOVE event age against the last request for the key
(``dynamo_ttl_remove_age_seconds``), for the layer's records and for hand-built rows."""

from __future__ import annotations

from typing import Any

from firstwrite.idempotency import IdempotencyConfig, RecordLayout, TtlAudit
from firstwrite.idempotency.metrics import HookMetrics

from .conftest import TABLE, Backend
from .test_audit import stored, stream_record


def test_every_ttl_remove_is_observed_against_its_last_request(
    backend: Backend, table: str
) -> None:
    guard = backend.guard(
        IdempotencyConfig(table_name=TABLE, retention=60, client_retry_ceiling=60)
    )
    seen: list[tuple[str, float, dict[str, str]]] = []
    metrics = HookMetrics(lambda name, value, labels: seen.append((name, value, dict(labels))))
    audit = TtlAudit(window=600, metrics=metrics)
    claimed = backend.now()
    guard.run("a", lambda: 1)
    first = stored(guard, "a")
    audit.process([stream_record("REMOVE", first, claimed + 3600, ttl=True)])
    audit.process([stream_record("REMOVE", first, claimed + 7200)])  # a user delete: not TTL
    ages = [(value, labels) for name, value, labels in seen if name.startswith("dynamo_ttl_rem")]
    assert len(ages) == 1
    age, labels = ages[0]
    assert abs(age - 3600) <= 2 and labels == {"record": "completed"}


def test_a_hand_built_row_is_observed_and_leaves_no_tombstone() -> None:
    seen: list[tuple[str, float]] = []
    audit = TtlAudit(
        config=IdempotencyConfig(layout=RecordLayout.seed_001("lower")),
        window=600,
        metrics=HookMetrics(lambda name, value, labels: seen.append((name, value))),
    )
    row: dict[str, Any] = {
        "pk": {"S": "IDEMPOTENCY#h"},
        "status": {"S": "succeeded"},
        "claimedAt": {"N": "1000"},
        "expiresAt": {"N": "2000"},
        "resultId": {"S": "r-1"},
    }
    audit.process([stream_record("REMOVE", row, 1000 + 90_000, ttl=True)])
    assert seen == [("dynamo_ttl_remove_age_seconds", 90_000.0)]
    # noted for detection after the fact (a tombstone needs an owner to fence it: none)
    removal = audit.store.find("IDEMPOTENCY#h")
    assert removal is not None and removal.claimed_at == 1000 and removal.status == "COMPLETED"
