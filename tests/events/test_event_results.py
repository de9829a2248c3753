"""An event consumer whose handler returns results too big for a DynamoDB item: they go to the
guard's result store (firstwrite.idempotency.result_store), duplicates are acknowledged without
running and their result is replayed from the store, and a store outage after the work is a
record to redeliver that is never run twice."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firstwrite.events import RecordOutcome, SQSBatch
from firstwrite.idempotency import Idempotency, InProgressError
from firstwrite.idempotency.errors import ResultStoreError
from firstwrite.idempotency.result_placement import describe
from firstwrite.idempotency.result_store import (
    DirectoryResultStore,
    ResultAddress,
    StoredResult,
)
from firstwrite.testing.events import FakeContext

from .conftest import sample

MB = 1 << 20


class Reports:
    """A handler making a 2 MB report per message (five times what an item holds)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.made: dict[str, bytes] = {}

    def __call__(self, record: Any) -> bytes:
        message = record["messageId"]
        self.ran.append(message)
        report = hashlib.sha256(message.encode()).digest() + os.urandom(2 * MB)
        self.made[message] = report
        return report


def failures(response: Any) -> list[str]:
    return [item["itemIdentifier"] for item in response["batchItemFailures"]]


def test_big_results_go_to_the_store_and_duplicates_replay_from_it(
    make_guard: Callable[..., Idempotency], tmp_path: Path
) -> None:
    store = DirectoryResultStore(tmp_path / "results")
    guard = make_guard(result_store=store)
    event = sample("sqs_event")
    ids = [r["messageId"] for r in event["Records"]]
    handler = Reports()
    batch = SQSBatch(guard)
    assert batch.handle(event, FakeContext(), handler) == {"batchItemFailures": []}
    result = batch.process(event["Records"], FakeContext(), handler)  # the batch delivered again
    assert [r.outcome for r in result.results] == [RecordOutcome.REPLAYED] * len(ids)
    assert handler.ran == ids  # each message ran once
    assert len(list(store.objects())) == len(ids)  # one object per record
    for message in ids:
        record = guard.get(message)
        assert record is not None and isinstance(record.result, bytes)
        where = describe(record.result)
        assert where["where"] == "store" and where["size"] == 2 * MB + 32 + 1
        replayed = guard.run(message, lambda: b"never run")
        assert replayed == handler.made[message]  # read back from the store, byte for byte
    assert handler.ran == ids


class _DownStore(DirectoryResultStore):
    """A store whose writes fail, as S3 does in an outage."""

    def put(self, address: ResultAddress, body: bytes) -> StoredResult:
        raise ResultStoreError("cannot store the result: S3 answered 503 SlowDown")


def test_a_store_outage_after_the_work_redelivers_but_never_reruns(
    make_guard: Callable[..., Idempotency], tmp_path: Path
) -> None:
    guard = make_guard(result_store=_DownStore(tmp_path / "results"), lease=60.0)
    event = sample("sqs_event")
    ids = [r["messageId"] for r in event["Records"]]
    handler = Reports()
    batch = SQSBatch(guard)
    result = batch.process(event["Records"], FakeContext(), handler)
    assert [r.outcome for r in result.results] == [RecordOutcome.LOST] * len(ids)
    assert all("not recorded" in (r.reason or "") for r in result.results)
    assert failures(batch.handle(event, FakeContext(), handler)) == ids  # redelivered...
    again = batch.process(event["Records"], FakeContext(), handler)
    assert [r.outcome for r in again.results] == [RecordOutcome.IN_PROGRESS] * len(ids)
    assert handler.ran == ids  # ...and never run a second time: 0 reruns
    with pytest.raises(InProgressError):  # the key waits for its lease, holding no result
        guard.run(ids[0], lambda: b"rerun", wait=0)
