"""Where a completed result's stored form goes: inline as it is, sealed, or to a result store.

Configured by ``result_store``, ``result_store_threshold`` and ``result_cipher`` on
:class:`~firstwrite.idempotency.config.IdempotencyConfig`; without either, none of this runs.
The *inner form* is the stored form :func:`.serialization.encode` makes, as bytes (a ``B``
form as it is, an ``S`` form as tag ``0x08`` + its UTF-8). Then:

* with a cipher, the inner form is sealed (:mod:`.result_cipher`) for the record's table and
  id, so it opens only in that record;
* with a store, the (sealed) inner form goes to the store when it is over the threshold or does
  not fit the record, and the record keeps a pointer (tag ``0x07`` + JSON: ``location``,
  ``size``, ``sha256``, ``store``, ``sealed``); otherwise a sealed form is kept inline (tag
  ``0x06`` + the sealed bytes).

On replay :meth:`Placement.inner` undoes the steps: the pointer is read from the store (size and
digest checked), the sealed form opened with the record's context, the inner form decoded.
A store or cipher failure on completion is a completion that could not be recorded
(:class:`~firstwrite.idempotency.errors.CompletionNotRecordedError`), never a rerun.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import serialization
from .errors import ResultDecryptionError, ResultTooLargeError, SerializationError
from .result_cipher import ResultCipher, context_for
from .result_store import ResultAddress, ResultStore, StoredResult, StreamingResultStore
from .spooled_results import SpooledResult

SEALED = serialization.SEALED
POINTER = serialization.POINTER
JSON_BYTES = serialization.JSON_BYTES


@dataclass(frozen=True, slots=True)
class Pointer:
    """A record's pointer to its result in a store (what tag ``0x07`` holds)."""

    stored: StoredResult
    store: str  # the store's kind: "directory", "s3" or the class name
    sealed: bool

    def to_bytes(self) -> bytes:
        s = self.stored
        text = json.dumps(
            {
                "location": s.location,
                "size": s.size,
                "sha256": s.sha256,
                "store": self.store,
                "sealed": self.sealed,
            },
            separators=(",", ":"),
        )
        return bytes((POINTER,)) + text.encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Pointer:
        try:
            info = json.loads(raw[1:])
            stored = StoredResult(str(info["location"]), int(info["size"]), str(info["sha256"]))
            return cls(stored, str(info.get("store", "")), bool(info.get("sealed", False)))
        except (ValueError, KeyError, TypeError) as exc:
            raise SerializationError(f"stored result pointer is corrupt: {exc}") from exc


def store_kind(store: ResultStore) -> str:
    name = type(store).__name__
    return {"DirectoryResultStore": "directory", "S3ResultStore": "s3"}.get(name, name)


def inner_bytes(value: dict[str, Any]) -> bytes | SpooledResult:
    """The inner form of a stored AttributeValue (``{"S": ...}`` or ``{"B": ...}``); a ``B``
    held in a file (:class:`~.spooled_results.SpooledResult`) stays there."""
    if "S" in value:
        text: str = value["S"]
        return bytes((JSON_BYTES,)) + text.encode("utf-8")
    raw = value["B"]
    return raw if isinstance(raw, SpooledResult) else bytes(raw)


def from_inner(inner: bytes) -> str | bytes:
    """The stored form (as :func:`.serialization.decode` takes it) of an inner form."""
    if not inner:
        raise SerializationError("stored result is corrupt: empty")
    if inner[0] == JSON_BYTES:
        return inner[1:].decode("utf-8")
    if inner[0] in (SEALED, POINTER):
        raise SerializationError("stored result is corrupt: a sealed or stored form nested")
    return inner


class Placement:
    """The result store and cipher of one table (see the module docstring)."""

    __slots__ = ("cipher", "store", "table", "threshold")

    def __init__(
        self,
        table: str,
        store: ResultStore | None,
        cipher: ResultCipher | None,
        threshold: int,
    ) -> None:
        self.table = table
        self.store = store
        self.cipher = cipher
        self.threshold = threshold

    def place(self, value: dict[str, Any], record_id: str, owner: str, room: int) -> dict[str, Any]:
        """The AttributeValue to record for ``value`` (the plain stored form): sealed and/or
        moved to the store. ``room`` is how many bytes the record has for it (at least); a
        form over it with no store raises :class:`~.errors.ResultTooLargeError`. Performs the
        store's write (I/O): called by the drivers, never by the state machine."""
        sealed = self.cipher is not None
        inner = inner_bytes(value)
        if self.cipher is not None:  # AES-GCM seals the whole message at once
            whole = inner.read() if isinstance(inner, SpooledResult) else inner
            inner = self.cipher.seal(whole, context_for(self.table, record_id))
        size = len(inner) + 1
        if self.store is not None and (size > self.threshold or size > room):
            address = ResultAddress(self.table, record_id, owner)
            if isinstance(inner, SpooledResult) and isinstance(self.store, StreamingResultStore):
                stored = self.store.put_stream(address, inner)
            else:
                whole = inner.read() if isinstance(inner, SpooledResult) else inner
                stored = self.store.put(address, whole)
            return {"B": Pointer(stored, store_kind(self.store), sealed).to_bytes()}
        if size > room:
            raise ResultTooLargeError(record_id, size, room)
        if isinstance(inner, SpooledResult):  # small enough for the record after all
            return {"B": inner.read()}
        if not sealed:
            return value
        return {"B": bytes((SEALED,)) + inner}

    def _open(self, sealed: bytes, record_id: str) -> bytes:
        if self.cipher is None:
            raise ResultDecryptionError(
                "the stored result is sealed (encrypted) and no result_cipher is configured "
                "to open it"
            )
        return self.cipher.open(sealed, context_for(self.table, record_id))

    def _fetch(self, pointer: Pointer) -> bytes:
        if self.store is None:
            raise SerializationError(
                f"the result is kept in a result store ({pointer.store} "
                f"{pointer.stored.location!r}) and no result_store is configured to read it"
            )
        return self.store.read(pointer.stored)

    def inner(self, raw: str | bytes | None, record_id: str) -> str | bytes | None:
        """The plain stored form of ``raw`` (a record's ``result``): read from the store,
        opened, as :func:`.serialization.decode` takes it. Other forms come back as they are."""
        if raw is None or isinstance(raw, str) or not raw or raw[0] not in (SEALED, POINTER):
            return raw
        if raw[0] == SEALED:
            return from_inner(self._open(bytes(raw[1:]), record_id))
        pointer = Pointer.from_bytes(bytes(raw))
        data = self._fetch(pointer)
        if pointer.sealed:
            data = self._open(data, record_id)
        return from_inner(data)

    def stream(
        self, raw: bytes, record_id: str, chunk_size: int = 1 << 20
    ) -> tuple[int, Iterator[bytes]] | None:
        """The size and the chunks of an unsealed pointer's object (its inner form) straight
        from the store (size checked before the first chunk, digest after the last), or
        ``None`` when ``raw`` is not such a pointer (then use :meth:`inner`)."""
        if not raw or raw[0] != POINTER:
            return None
        pointer = Pointer.from_bytes(bytes(raw))
        if pointer.sealed or self.store is None:
            return None
        return pointer.stored.size, self.store.stream(pointer.stored, chunk_size)


def describe(raw: str | bytes) -> dict[str, Any]:
    """Where a record's ``result`` lives, for ``firstwrite keys get`` and the console:
    ``{"where": "inline" | "store", "sealed": bool, "size": bytes, ...}`` with the store's
    ``location``, ``store`` and ``sha256`` for a pointer. Never decrypts."""
    if isinstance(raw, str) or not raw or raw[0] not in (SEALED, POINTER):
        size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
        return {"where": "inline", "sealed": False, "size": size}
    if raw[0] == SEALED:
        return {"where": "inline", "sealed": True, "size": len(raw) - 1}
    pointer = Pointer.from_bytes(bytes(raw))
    return {
        "where": "store",
        "sealed": pointer.sealed,
        "size": pointer.stored.size,
        "store": pointer.store,
        "location": pointer.stored.location,
        "sha256": pointer.stored.sha256,
    }
