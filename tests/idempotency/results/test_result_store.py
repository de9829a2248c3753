"""The result stores' contract (firstwrite.idempotency.result_store): write once per record and
owner, checked on the way back, listable; the S3 store against moto's S3 server over HTTP."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency.errors import (
    ResultIntegrityError,
    ResultStoreConflictError,
    ResultStoreError,
)
from firstwrite.idempotency.result_store import (
    DirectoryResultStore,
    ResultAddress,
    ResultStore,
    S3ResultStore,
    StreamingResultStore,
)
from firstwrite.idempotency.spooled_results import SpooledResult

ADDRESS = ResultAddress("orders", "IDEMPOTENCY#pay-1 é/../x", "0123456789abcdef0123456789abcdef:1")


@pytest.fixture(params=["directory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ResultStore:
    if request.param == "directory":
        return DirectoryResultStore(tmp_path / "results")
    s3: Any = request.getfixturevalue("s3")
    return S3ResultStore(s3, request.getfixturevalue("bucket"), prefix="fw/")


def test_a_result_comes_back_byte_for_byte_with_its_pointer(store: ResultStore) -> None:
    body = bytes(range(256)) * 4099
    stored = store.put(ADDRESS, body)
    assert stored.size == len(body)
    assert stored.sha256 == hashlib.sha256(body).hexdigest()
    assert store.read(stored) == body
    assert b"".join(store.stream(stored, chunk_size=65536)) == body


def _spooled(head: bytes, body: bytes) -> SpooledResult:
    file = tempfile.TemporaryFile()  # noqa: SIM115 (closed when collected)
    file.write(body)
    file.flush()
    return SpooledResult(head, file, len(body))  # type: ignore[arg-type]


def test_a_result_in_a_file_is_stored_from_it_byte_for_byte(store: ResultStore) -> None:
    # 12 MB: more than botocore reads in one piece to sign and checksum an upload
    head, body = b"\x02meta\n", os.urandom(12 << 20)
    assert isinstance(store, StreamingResultStore)
    spooled = _spooled(head, body)
    stored = store.put_stream(ADDRESS, spooled)
    assert stored.size == len(head) + len(body)
    assert stored.sha256 == hashlib.sha256(head + body).hexdigest()
    assert store.read(stored) == head + body
    assert store.put_stream(ADDRESS, spooled) == stored  # the same owner's retry: accepted
    assert store.put(ADDRESS, head + body) == stored
    with pytest.raises(ResultStoreConflictError):
        # the last byte changed (a fixed b"!" was no change once in 256 random bodies)
        store.put_stream(ADDRESS, _spooled(head, body[:-1] + bytes([body[-1] ^ 1])))


def test_a_spooled_result_reads_as_a_seekable_file() -> None:
    spooled = _spooled(b"head:", b"0123456789")
    reader = spooled.reader()
    assert len(reader) == 15 and reader.read(3) == b"hea" and len(reader) == 12
    assert reader.read(4) == b"d:01" and reader.tell() == 7
    reader.seek(0)
    assert reader.read() == b"head:0123456789" and reader.read(5) == b""
    reader.seek(-3, os.SEEK_END)
    assert reader.read() == b"789"
    assert list(spooled.chunks(4)) == [b"head:", b"0123", b"4567", b"89"]


def test_the_object_name_is_safe_whatever_the_key_holds(store: ResultStore) -> None:
    stored = store.put(ADDRESS, b"x")
    assert ".." not in stored.location and " " not in stored.location
    assert stored.location.endswith(
        "orders/"
        + hashlib.sha256(ADDRESS.record_id.encode()).hexdigest()[:32]
        + "/0123456789abcdef0123456789abcdef"
    )


def test_the_same_owner_writing_the_same_bytes_again_succeeds(store: ResultStore) -> None:
    first = store.put(ADDRESS, b"answer")
    assert store.put(ADDRESS, b"answer") == first


def test_other_bytes_for_the_same_record_and_owner_are_refused(store: ResultStore) -> None:
    store.put(ADDRESS, b"answer")
    with pytest.raises(ResultStoreConflictError):
        store.put(ADDRESS, b"another answer")
    stored = store.put(ADDRESS, b"answer")
    assert store.read(stored) == b"answer"


def test_another_owner_gets_its_own_object(store: ResultStore) -> None:
    a = store.put(ADDRESS, b"first")
    b = store.put(ResultAddress(ADDRESS.table, ADDRESS.record_id, "f" * 32 + ":2"), b"second")
    assert a.location != b.location
    assert store.read(a) == b"first" and store.read(b) == b"second"


def test_a_pointer_that_does_not_match_is_never_replayed(store: ResultStore) -> None:
    stored = store.put(ADDRESS, b"answer")
    forged = type(stored)(stored.location, stored.size, hashlib.sha256(b"other!").hexdigest())
    with pytest.raises(ResultIntegrityError):
        store.read(forged)
    with pytest.raises(ResultIntegrityError):
        b"".join(store.stream(forged))
    wrong_size = type(stored)(stored.location, stored.size + 1, stored.sha256)
    with pytest.raises(ResultIntegrityError):
        store.stream(wrong_size)  # the size is judged before the first chunk


def test_a_missing_object_is_a_store_error(store: ResultStore) -> None:
    stored = store.put(ADDRESS, b"answer")
    store.delete(stored.location)
    with pytest.raises(ResultStoreError, match="gone"):
        store.read(stored)


def test_objects_lists_each_object_with_its_record(store: ResultStore) -> None:
    a = store.put(ADDRESS, b"first")
    other = ResultAddress("orders", "IDEMPOTENCY#pay-2", "e" * 32 + ":1")
    b = store.put(other, b"second!")
    listed = {o.location: o for o in store.objects()}
    assert set(listed) == {a.location, b.location}
    assert listed[a.location].record_id == ADDRESS.record_id
    assert listed[b.location].record_id == other.record_id
    assert listed[b.location].table == "orders" and listed[b.location].size == 7


def test_a_race_of_16_writers_on_one_address_leaves_one_object(store: ResultStore) -> None:
    body = b"z" * (1 << 20)
    barrier = threading.Barrier(16)
    outcomes: list[object] = []

    def write() -> None:
        barrier.wait()
        try:
            outcomes.append(store.put(ADDRESS, body))
        except Exception as exc:  # recorded, asserted below
            outcomes.append(exc)

    threads = [threading.Thread(target=write) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == 16 and all(o == outcomes[0] for o in outcomes), outcomes
    assert len(list(store.objects())) == 1


def test_the_directory_store_refuses_a_location_outside_it(tmp_path: Path) -> None:
    store = DirectoryResultStore(tmp_path / "results")
    stored = store.put(ADDRESS, b"x")
    escaped = type(stored)("../../etc/passwd", 1, stored.sha256)
    with pytest.raises(ResultStoreError, match="outside"):
        store.read(escaped)


def test_an_s3_outage_is_a_store_error(s3: Any) -> None:
    store = S3ResultStore(s3, "no-such-bucket-anywhere")
    with pytest.raises(ResultStoreError):
        store.put(ADDRESS, b"x")
