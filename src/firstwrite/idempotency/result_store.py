"""Result stores: where a record keeps a result too big (or unwanted) in its own item.

A record whose result goes to a store keeps a pointer (:class:`StoredResult`). The contract:

* **Write once per record and owner.** :meth:`ResultStore.put` creates the object at the
  :class:`ResultAddress` (table, record id, claim owner) only if it is absent: S3's conditional
  put (``If-None-Match: *``), a directory's hard link (``link(2)`` fails on an existing name).
  Putting the same bytes again is a success (the same owner retrying its own write); other
  bytes raise :class:`~.errors.ResultStoreConflictError`. Two owners never share an object, so
  a worker whose lease ran out cannot overwrite the result of the one that took over.
* **Checked on the way back.** :meth:`ResultStore.read` and :meth:`ResultStore.stream` (size
  before the first chunk, digest after the last) give the pointer's size and digest or raise
  :class:`~.errors.ResultIntegrityError`.
* **Streamed in.** :meth:`StreamingResultStore.put_stream` writes it from a file in chunks.
* **Listable.** :meth:`ResultStore.objects` lists each object with its record, so objects
  whose record is gone (orphans) can be found and removed.

An object is written before its record is completed; S3 objects go by a bucket lifecycle
rule once their record expires (retention plus TTL lag, docs/results.md).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .client_errors import client_error_code, is_sdk_error
from .errors import ResultIntegrityError, ResultStoreConflictError, ResultStoreError
from .spooled_results import SpooledResult

CHUNK = 1 << 20


class S3Api(Protocol):
    """The calls :class:`S3ResultStore` makes of a boto3 S3 client."""

    def put_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def head_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_paginator(self, operation_name: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class ResultAddress:
    """Which record (and which claim of it) an object belongs to."""

    table: str
    record_id: str
    owner: str

    def object_name(self) -> str:
        """``<table>/<sha256 of the record id, 32 hex>/<owner token>``: safe in any store
        whatever the key holds, one folder per record, one object per claim."""
        digest = hashlib.sha256(self.record_id.encode()).hexdigest()[:32]
        return f"{self.table}/{digest}/{self.owner.split(':', 1)[0]}"


@dataclass(frozen=True, slots=True)
class StoredResult:
    """The pointer a record keeps: where the bytes are, how many, and their SHA-256 (hex)."""

    location: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One object a store holds, as :meth:`ResultStore.objects` lists it."""

    location: str
    table: str
    record_id: str
    size: int
    modified_at: float  # epoch seconds


@runtime_checkable
class ResultStore(Protocol):
    """Where results too big for the record go (module docstring: the contract)."""

    def put(self, address: ResultAddress, body: bytes) -> StoredResult: ...

    def read(self, stored: StoredResult) -> bytes: ...

    def stream(self, stored: StoredResult, chunk_size: int = CHUNK) -> Iterator[bytes]: ...

    def delete(self, location: str) -> None: ...

    def objects(self) -> Iterator[StoredObject]: ...


@runtime_checkable
class StreamingResultStore(ResultStore, Protocol):
    """A store that also writes an object from a file, in chunks (both stores here do)."""

    def put_stream(self, address: ResultAddress, body: SpooledResult) -> StoredResult: ...


def pointer_for(location: str, body: bytes) -> StoredResult:
    return StoredResult(location, len(body), hashlib.sha256(body).hexdigest())


def _check(stored: StoredResult, body: bytes) -> bytes:
    if len(body) != stored.size or hashlib.sha256(body).hexdigest() != stored.sha256:
        raise ResultIntegrityError(stored.location, stored.size, len(body))
    return body


def _checked_chunks(stored: StoredResult, size: int, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks``, checked: the size at once (before the caller sends anything), the digest
    after the last chunk."""
    if size != stored.size:
        raise ResultIntegrityError(stored.location, stored.size, size)
    return _digest_checked(stored, chunks)


def _digest_checked(stored: StoredResult, chunks: Iterator[bytes]) -> Iterator[bytes]:
    digest = hashlib.sha256()
    seen = 0
    for chunk in chunks:
        digest.update(chunk)
        seen += len(chunk)
        yield chunk
    if seen != stored.size or digest.hexdigest() != stored.sha256:
        raise ResultIntegrityError(stored.location, stored.size, seen)


def _encode_record(record_id: str) -> str:
    return base64.urlsafe_b64encode(record_id.encode()).decode()


def _decode_record(text: str) -> str:
    return base64.urlsafe_b64decode(text.encode()).decode()


class DirectoryResultStore:
    """A folder of files, one per record and owner: for the local engine, tests and a single
    machine. Writes are atomic (a temporary file, fsync, then a hard link that fails if the
    name exists), so a crash leaves either the whole object or none."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, location: str) -> Path:
        path = (self.root / location).resolve()
        if self.root.resolve() not in path.parents:
            raise ResultStoreError(f"result location {location!r} is outside the store")
        return path

    def put(self, address: ResultAddress, body: bytes) -> StoredResult:
        return self._write(address, (body,))

    def put_stream(self, address: ResultAddress, body: SpooledResult) -> StoredResult:
        """:meth:`put` from a file: copied in chunks into the store's temporary file."""
        return self._write(address, body.chunks())

    def _write(self, address: ResultAddress, chunks: Iterable[bytes]) -> StoredResult:
        location = address.object_name()
        path = self._path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / ".record").write_text(_encode_record(address.record_id))
        digest = hashlib.sha256()
        size = 0
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            pointer = StoredResult(location, size, digest.hexdigest())
            try:
                os.link(tmp, path)
            except FileExistsError:
                if not self._holds(path, pointer):
                    raise ResultStoreConflictError(location) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return pointer

    @staticmethod
    def _holds(path: Path, pointer: StoredResult) -> bool:
        """Whether the file at ``path`` holds the bytes ``pointer`` describes."""
        if path.stat().st_size != pointer.size:
            return False
        digest = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
        return digest.hexdigest() == pointer.sha256

    def read(self, stored: StoredResult) -> bytes:
        try:
            return _check(stored, self._path(stored.location).read_bytes())
        except FileNotFoundError:
            raise ResultStoreError(f"the stored result {stored.location!r} is gone") from None

    def stream(self, stored: StoredResult, chunk_size: int = CHUNK) -> Iterator[bytes]:
        path = self._path(stored.location)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise ResultStoreError(f"the stored result {stored.location!r} is gone") from None

        def chunks() -> Iterator[bytes]:
            with path.open("rb") as f:
                while chunk := f.read(chunk_size):
                    yield chunk

        return _checked_chunks(stored, size, chunks())

    def delete(self, location: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(location).unlink()

    def objects(self) -> Iterator[StoredObject]:
        for marker in sorted(self.root.glob("*/*/.record")):
            record_id = _decode_record(marker.read_text())
            table = marker.parent.parent.name
            for path in sorted(marker.parent.iterdir()):
                if path.name.startswith("."):
                    continue
                st = path.stat()
                location = path.relative_to(self.root).as_posix()
                yield StoredObject(location, table, record_id, st.st_size, st.st_mtime)


class S3ResultStore:
    """Objects in an S3 bucket (or any S3-API endpoint), under ``prefix``.

    The put is conditional (``IfNoneMatch="*"``, S3's write-once; an answer of
    ``PreconditionFailed`` means the object exists, and it is then compared); the object carries
    its record id in its metadata (``x-amz-meta-firstwrite-record``, base64url) for the orphan
    sweep. The client's credentials need ``s3:PutObject``, ``s3:GetObject``, ``s3:ListBucket``
    and, for the sweep, ``s3:DeleteObject``."""

    def __init__(self, client: S3Api, bucket: str, prefix: str = "firstwrite/") -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix

    def put(self, address: ResultAddress, body: bytes) -> StoredResult:
        location = self.prefix + address.object_name()
        return self._put(address, location, pointer_for(location, body), body)

    def put_stream(self, address: ResultAddress, body: SpooledResult) -> StoredResult:
        """:meth:`put` from a file: one ``PutObject`` whose body is read from the file as the
        SDK sends it (its digest is read once before)."""
        location = self.prefix + address.object_name()
        pointer = StoredResult(location, len(body), body.sha256())
        return self._put(address, location, pointer, body.reader())

    def _put(
        self, address: ResultAddress, location: str, pointer: StoredResult, body: Any
    ) -> StoredResult:
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=location,
                Body=body,
                ContentLength=pointer.size,
                IfNoneMatch="*",
                Metadata={"firstwrite-record": _encode_record(address.record_id)},
            )
        except Exception as exc:
            if not is_sdk_error(exc):
                raise
            if client_error_code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise ResultStoreError(f"cannot store the result at {location!r}: {exc}") from exc
            try:  # the object exists: ours (a retry of our own write), or a conflict
                for _ in self.stream(pointer):
                    pass
            except ResultIntegrityError:
                raise ResultStoreConflictError(location) from None
        return pointer

    def _get(self, location: str) -> bytes:
        return bytes(self._open(location)["Body"].read())

    def _open(self, location: str) -> dict[str, Any]:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=location)
        except Exception as exc:
            if not is_sdk_error(exc):
                raise
            if client_error_code(exc) in ("NoSuchKey", "404"):
                raise ResultStoreError(f"the stored result {location!r} is gone") from None
            raise ResultStoreError(f"cannot read the stored result {location!r}: {exc}") from exc

    def read(self, stored: StoredResult) -> bytes:
        return _check(stored, self._get(stored.location))

    def stream(self, stored: StoredResult, chunk_size: int = CHUNK) -> Iterator[bytes]:
        answer = self._open(stored.location)
        body = answer["Body"]
        return _checked_chunks(stored, int(answer["ContentLength"]), body.iter_chunks(chunk_size))

    def delete(self, location: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=location)

    def objects(self) -> Iterator[StoredObject]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix
        )
        for page in pages:
            for entry in page.get("Contents", []):
                location = entry["Key"]
                head = self.client.head_object(Bucket=self.bucket, Key=location)
                encoded = head.get("Metadata", {}).get("firstwrite-record")
                if encoded is None:
                    continue  # not one of ours
                table = location[len(self.prefix) :].split("/", 1)[0]
                yield StoredObject(
                    location,
                    table,
                    _decode_record(encoded),
                    int(entry["Size"]),
                    entry["LastModified"].timestamp(),
                )
