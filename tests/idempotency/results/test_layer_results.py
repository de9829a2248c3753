"""Result stores and ciphers wired into the layer (firstwrite.idempotency.result_placement):
big results replayed byte for byte from the store, a store outage after the work (no rerun),
sealed results bound to their record, a wrong key refused, a race on one big result."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency import AsyncIdempotency, IdempotencyConfig
from firstwrite.idempotency.errors import (
    CompletionNotRecordedError,
    InProgressError,
    ResultDecryptionError,
    ResultStoreError,
    ResultTooLargeError,
    SerializationError,
)
from firstwrite.idempotency.result_cipher import KmsEnvelopeCipher, LocalKeyCipher
from firstwrite.idempotency.result_placement import describe
from firstwrite.idempotency.result_store import (
    DirectoryResultStore,
    ResultAddress,
    S3ResultStore,
    StoredResult,
)

from ..conftest import TABLE, Backend

MB = 1 << 20
KEY = os.urandom(32)


def _cipher(key: bytes = KEY, key_id: str = "k1") -> LocalKeyCipher:
    return LocalKeyCipher({key_id: key}, key_id)


def _config(**changes: Any) -> IdempotencyConfig:
    return IdempotencyConfig(table_name=TABLE, **changes)


class Counted:
    """A side effect returning ``result``, counting its runs."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.runs = 0
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            self.runs += 1
        return self.result


def _stored_result(backend: Backend, guard: Any, key: str) -> Any:
    item = backend.client.get_item(
        TableName=TABLE, Key=guard.dynamodb_key(key), ConsistentRead=True
    )["Item"]
    return item["result"]


@pytest.mark.parametrize(
    "size",
    [MB, 10 * MB, pytest.param(100 * MB, marks=pytest.mark.slow)],
    ids=["1MB", "10MB", "100MB"],
)
@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_a_big_result_is_replayed_byte_for_byte_from_the_store(
    backend: Backend, table: str, tmp_path: Path, size: int, sealed: bool
) -> None:
    store = DirectoryResultStore(tmp_path / "results")
    guard = backend.guard(_config(result_store=store, result_cipher=_cipher() if sealed else None))
    body = os.urandom(size)
    work = Counted(body)
    assert guard.run("export-1", work) == body
    replayed = guard.run("export-1", work)
    assert work.runs == 1
    assert hashlib.sha256(replayed).digest() == hashlib.sha256(body).digest()
    assert len(replayed) == size
    objects = list(store.objects())
    assert len(objects) == 1
    assert objects[0].record_id == guard.record_id("export-1")
    where = describe(_stored_result(backend, guard, "export-1")["B"])
    assert where["where"] == "store" and where["sealed"] is sealed
    on_disk = (store.root / objects[0].location).read_bytes()
    assert (body[:4096] in on_disk) is not sealed  # sealed: the plaintext is nowhere in it


def test_a_json_result_over_the_threshold_goes_to_the_store_and_comes_back(
    backend: Backend, table: str, tmp_path: Path
) -> None:
    store = DirectoryResultStore(tmp_path / "results")
    guard = backend.guard(_config(result_store=store, result_store_threshold=1024))
    rows = [{"id": i, "name": f"row {i}", "tags": ["é", "x"]} for i in range(2000)]
    work = Counted(rows)
    guard.run("report-1", work)
    assert guard.run("report-1", work) == rows
    assert work.runs == 1
    assert len(list(store.objects())) == 1
    small = Counted({"ok": True})
    guard.run("small-1", small)
    assert guard.run("small-1", small) == {"ok": True}
    assert _stored_result(backend, guard, "small-1") == {"S": '{"ok":true}'}  # inline, as before
    assert len(list(store.objects())) == 1


def test_without_a_store_a_result_over_the_item_limit_is_still_too_large(
    backend: Backend, table: str
) -> None:
    guard = backend.guard(_config(result_cipher=_cipher()))
    with pytest.raises(ResultTooLargeError):
        guard.run("big-1", Counted(os.urandom(MB)))


class _DownStore(DirectoryResultStore):
    """A store whose writes fail, as S3 does in an outage."""

    def put(self, address: ResultAddress, body: bytes) -> StoredResult:
        raise ResultStoreError("cannot store the result: S3 answered 503 SlowDown")


def test_a_store_outage_after_the_work_is_a_completion_not_recorded_never_a_rerun(
    backend: Backend, table: str, tmp_path: Path
) -> None:
    guard = backend.guard(_config(result_store=_DownStore(tmp_path / "results"), lease=30.0))
    body = os.urandom(2 * MB)
    work = Counted(body)
    with pytest.raises(CompletionNotRecordedError) as raised:
        guard.run("export-2", work)
    assert raised.value.result == body  # the result is on the error
    assert isinstance(raised.value.__cause__, ResultStoreError)
    for _ in range(3):  # retries within the lease: in progress, not run again
        with pytest.raises(InProgressError):
            guard.run("export-2", work, wait=0)
    assert work.runs == 1


def test_a_sealed_result_moved_to_another_record_is_refused(backend: Backend, table: str) -> None:
    guard = backend.guard(_config(result_cipher=_cipher()))
    guard.run("card-1", Counted({"pan_last4": "4242", "token": "tok_secret"}))
    guard.run("card-2", Counted({"pan_last4": "0000", "token": "tok_other"}))
    sealed = _stored_result(backend, guard, "card-1")
    assert b"tok_secret" not in sealed["B"]
    backend.client.update_item(
        TableName=TABLE,
        Key=guard.dynamodb_key("card-2"),
        UpdateExpression="SET #r = :r",
        ExpressionAttributeNames={"#r": "result"},
        ExpressionAttributeValues={":r": sealed},
    )
    with pytest.raises(ResultDecryptionError, match="does not open for this record"):
        guard.run("card-2", Counted(None))
    assert guard.run("card-1", Counted(None))["token"] == "tok_secret"


def test_a_stored_sealed_result_pointed_at_from_another_record_is_refused(
    backend: Backend, table: str, tmp_path: Path
) -> None:
    store = DirectoryResultStore(tmp_path / "results")
    guard = backend.guard(_config(result_store=store, result_cipher=_cipher()))
    guard.run("doc-1", Counted(os.urandom(MB)))
    guard.run("doc-2", Counted(os.urandom(MB)))
    pointer = _stored_result(backend, guard, "doc-1")
    backend.client.update_item(
        TableName=TABLE,
        Key=guard.dynamodb_key("doc-2"),
        UpdateExpression="SET #r = :r",
        ExpressionAttributeNames={"#r": "result"},
        ExpressionAttributeValues={":r": pointer},
    )
    with pytest.raises(ResultDecryptionError, match="does not open for this record"):
        guard.run("doc-2", Counted(None))


def test_a_wrong_key_is_refused_with_a_clear_error(backend: Backend, table: str) -> None:
    backend.guard(_config(result_cipher=_cipher())).run("k-1", Counted({"secret": 1}))
    wrong_bytes = backend.guard(_config(result_cipher=_cipher(os.urandom(32))))
    with pytest.raises(ResultDecryptionError, match="does not open for this record"):
        wrong_bytes.run("k-1", Counted(None))
    other_id = backend.guard(_config(result_cipher=_cipher(os.urandom(32), "k2")))
    with pytest.raises(ResultDecryptionError, match="key 'k1', which this cipher does not hold"):
        other_id.run("k-1", Counted(None))
    no_cipher = backend.guard(_config())
    with pytest.raises(SerializationError, match=r"sealed \(encrypted\): configure"):
        no_cipher.run("k-1", Counted(None))


def test_rotated_local_keys_still_open_older_results(backend: Backend, table: str) -> None:
    old, new = os.urandom(32), os.urandom(32)
    backend.guard(_config(result_cipher=_cipher(old, "2026-01"))).run("r-1", Counted([1, 2]))
    rotated = LocalKeyCipher({"2026-01": old, "2026-06": new}, "2026-06")
    guard = backend.guard(_config(result_cipher=rotated))
    assert guard.run("r-1", Counted(None)) == [1, 2]
    guard.run("r-2", Counted([3]))
    assert b"2026-06" in _stored_result(backend, guard, "r-2")["B"]


@pytest.mark.slow
def test_a_race_of_16_on_one_key_with_a_big_result_writes_one_object(
    backend: Backend, table: str, tmp_path: Path
) -> None:
    store = DirectoryResultStore(tmp_path / "results")
    config = _config(result_store=store, result_cipher=_cipher(), in_progress_wait=60.0)
    body = os.urandom(4 * MB)
    work = Counted(body)
    start = threading.Barrier(16)
    answers: list[bytes] = []
    errors: list[BaseException] = []

    def caller() -> None:
        guard = backend.guard(config)  # one guard per thread, one shared database
        start.wait()
        try:
            answers.append(guard.run("race-1", work))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert work.runs == 1
    assert len(answers) == 16 and all(a == body for a in answers)
    assert len(list(store.objects())) == 1


def test_status_only_replays_the_status_and_ids_and_stores_no_result(
    backend: Backend, table: str
) -> None:
    guard = backend.guard(_config(replay="status-only"))
    work = Counted({"api_key": "sk_live_minted_once"})
    assert guard.run("mint-1", work) == {"api_key": "sk_live_minted_once"}
    replayed = guard.run("mint-1", work)
    assert replayed == {
        "status": "COMPLETED",
        "idempotency_key": "mint-1",
        "record_id": guard.record_id("mint-1"),
    }
    assert work.runs == 1
    assert "sk_live" not in str(_stored_result(backend, guard, "mint-1"))


def test_the_s3_store_and_kms_cipher_through_the_layer(
    backend: Backend, table: str, s3: Any, bucket: str, kms: Any
) -> None:
    key_id = str(kms.create_key()["KeyMetadata"]["KeyId"])
    config = _config(
        result_store=S3ResultStore(s3, bucket), result_cipher=KmsEnvelopeCipher(kms, key_id)
    )
    guard = backend.guard(config)
    body = os.urandom(3 * MB)
    work = Counted(body)
    guard.run("s3-1", work)
    assert backend.guard(config).run("s3-1", work) == body
    assert work.runs == 1
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert len(listed) == 1
    assert body[:4096] not in s3.get_object(Bucket=bucket, Key=listed[0]["Key"])["Body"].read()


class _AsyncClient:
    """An asyncio facade over the engine's boto3 client (each call in a worker thread)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.meta = client.meta
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        async def call(**kwargs: Any) -> Any:
            return await asyncio.to_thread(lambda: method(**kwargs))

        return call


def test_the_async_guard_stores_and_replays_a_big_sealed_result(
    backend: Backend, table: str, tmp_path: Path
) -> None:
    store = DirectoryResultStore(tmp_path / "results")
    config = _config(result_store=store, result_cipher=_cipher())
    body = os.urandom(3 * MB)
    work = Counted(body)

    async def twice() -> list[bytes]:
        guard = AsyncIdempotency(config, client=_AsyncClient(backend.client), clock=backend.now)

        async def fn() -> bytes:
            return work()  # type: ignore[no-any-return]

        return [await guard.run("async-1", fn), await guard.run("async-1", fn)]

    assert asyncio.run(twice()) == [body, body]
    assert work.runs == 1
    assert len(list(store.objects())) == 1


def test_the_record_view_describes_sealed_and_stored_results_never_their_bytes(
    backend: Backend, table: str, tmp_path: Path
) -> None:
    from firstwrite.idempotency import record_view

    store = DirectoryResultStore(tmp_path / "results")
    guard = backend.guard(_config(result_store=store, result_cipher=_cipher()))
    guard.run("small", Counted({"token": "tok_small"}))
    guard.run("big", Counted(os.urandom(MB)))
    sealed = record_view.stored_result(_stored_result(backend, guard, "small")["B"])
    assert sealed.format == "sealed (encrypted)"
    assert sealed.summary.startswith("<sealed result: ") and "tok_small" not in sealed.summary
    stored = record_view.stored_result(_stored_result(backend, guard, "big")["B"])
    assert stored.format == "in a result store"
    location = next(iter(store.objects())).location
    assert stored.summary == (
        # the inner form (tag + bytes) sealed: magic 4, kind 1, key id length 2 + "k1",
        # nonce 12, GCM tag 16
        f"<sealed (encrypted), {1 + MB + 4 + 1 + 2 + 2 + 12 + 16} B in the directory result store "
        f"at {location!r}>"
    )
