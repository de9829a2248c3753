"""Result ciphers: stored results sealed with AES-GCM, so reading the table is not reading them.

A cipher seals a result's stored bytes before they are written (inline in the record or in a
:mod:`result store <.result_store>`) and opens them on replay. The contract:

* **Bound to its record.** :meth:`ResultCipher.seal` takes an encryption context (the table
  and the record id, :func:`context_for`); it is authenticated with the ciphertext (AES-GCM's
  associated data), so a sealed result copied into another record, or into another table, does
  not open: :class:`~.errors.ResultDecryptionError`, never a replay of someone else's result.
* **Self-describing.** The sealed bytes name the key that sealed them (a key id, or KMS's
  wrapped data key), so keys can be rotated: new results are sealed with the current key, older
  ones still open while their key is kept.

Two ciphers, both needing the ``encryption`` extra: :class:`KmsEnvelopeCipher` (AWS KMS
envelope encryption) and :class:`LocalKeyCipher` (keys the process holds).

Sealed form: ``FWS`` + version ``0x01`` + kind (``0x01`` local, ``0x02`` KMS) + the key
reference's length (2 bytes, big-endian) + the key reference + a 12-byte nonce + the
ciphertext with its 16-byte tag.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from .client_errors import client_error_code
from .errors import ConfigurationError, ResultDecryptionError

MAGIC = b"FWS\x01"
_LOCAL = 1
_KMS = 2
_NONCE = 12

EncryptionContext = Mapping[str, str]


def context_for(table: str, record_id: str) -> dict[str, str]:
    """The encryption context of a record's result."""
    return {"firstwrite:table": table, "firstwrite:record": record_id}


def is_sealed(data: bytes) -> bool:
    return data[:4] == MAGIC


@runtime_checkable
class ResultCipher(Protocol):
    """Seals and opens stored results (module docstring: the contract)."""

    def seal(self, plaintext: bytes, context: EncryptionContext) -> bytes: ...

    def open(self, sealed: bytes, context: EncryptionContext) -> bytes: ...


class KmsApi(Protocol):
    """The calls :class:`KmsEnvelopeCipher` makes of a boto3 KMS client."""

    def generate_data_key(self, **kwargs: Any) -> dict[str, Any]: ...

    def decrypt(self, **kwargs: Any) -> dict[str, Any]: ...


_AEAD: dict[str, Any] = {}  # AESGCM and InvalidTag, imported on first use (the extra)


def _aesgcm(key: bytes) -> Any:
    """An AES-GCM object for ``key`` (built once per key by the ciphers, which keep it)."""
    if not _AEAD:
        try:
            from cryptography.exceptions import InvalidTag
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:  # pragma: no cover - the extra is in every test environment
            raise ConfigurationError(
                "sealed results need the 'cryptography' package: "
                "pip install 'firstwrite[encryption]'"
            ) from None
        _AEAD.update(AESGCM=AESGCM, InvalidTag=InvalidTag)
    return _AEAD["AESGCM"](key)


# json.dumps(context, sort_keys=True, separators=(",", ":")), its encoder built once
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def _aad(kind: int, ref: bytes, context: EncryptionContext) -> bytes:
    return MAGIC + bytes([kind]) + ref + _canonical(dict(context)).encode()


def _pack(kind: int, ref: bytes, aead: Any, plaintext: bytes, context: EncryptionContext) -> bytes:
    nonce = os.urandom(_NONCE)
    body = aead.encrypt(nonce, plaintext, _aad(kind, ref, context))
    return b"".join((MAGIC, bytes([kind]), struct.pack(">H", len(ref)), ref, nonce, body))


def _unpack(sealed: bytes) -> tuple[int, bytes, bytes, bytes]:
    """(kind, key reference, nonce, ciphertext) of sealed bytes."""
    if not is_sealed(sealed) or len(sealed) < 7:
        raise ResultDecryptionError("the stored result is not a sealed result")
    kind = sealed[4]
    (length,) = struct.unpack(">H", sealed[5:7])
    ref = sealed[7 : 7 + length]
    nonce = sealed[7 + length : 7 + length + _NONCE]
    return kind, ref, nonce, sealed[7 + length + _NONCE :]


def _open_with(
    aead: Any, kind: int, ref: bytes, nonce: bytes, body: bytes, context: EncryptionContext
) -> bytes:
    try:
        return bytes(aead.decrypt(nonce, body, _aad(kind, ref, context)))
    except _AEAD["InvalidTag"]:
        raise ResultDecryptionError(
            "the sealed result does not open for this record: it was sealed for another "
            "record or table, or altered"
        ) from None


class LocalKeyCipher:
    """AES-GCM with keys the process holds: ``keys`` maps a key id to 16, 24 or 32 bytes, and
    ``current`` names the key new results are sealed with. Rotate by adding a key and making it
    current; keep the old ones while results sealed with them may still be replayed (the
    retention)."""

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        for key_id, key in keys.items():
            if len(key) not in (16, 24, 32):
                raise ConfigurationError(
                    f"key {key_id!r} is {len(key)} bytes; AES-GCM needs 16, 24 or 32"
                )
        if current not in keys:
            raise ConfigurationError(f"the current key {current!r} is not among the keys given")
        self.keys = dict(keys)
        self.current = current
        self._aeads = {key_id: _aesgcm(key) for key_id, key in self.keys.items()}

    def seal(self, plaintext: bytes, context: EncryptionContext) -> bytes:
        ref = self.current.encode()
        return _pack(_LOCAL, ref, self._aeads[self.current], plaintext, context)

    def open(self, sealed: bytes, context: EncryptionContext) -> bytes:
        kind, ref, nonce, body = _unpack(sealed)
        if kind != _LOCAL:
            raise ResultDecryptionError("the result was sealed with AWS KMS, not a local key")
        aead = self._aeads.get(ref.decode(errors="replace"))
        if aead is None:
            raise ResultDecryptionError(
                f"the result was sealed with key {ref.decode(errors='replace')!r}, "
                "which this cipher does not hold"
            )
        return _open_with(aead, kind, ref, nonce, body, context)


class _KeyCache:
    """Plaintext data keys (as AES-GCM objects) by their wrapped form, each kept at most
    ``ttl`` seconds; at most ``size`` of them (least recently used first out)."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._keys: OrderedDict[bytes, tuple[Any, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, wrapped: bytes) -> Any:
        with self._lock:
            found = self._keys.get(wrapped)
            if found is None or found[1] <= self.clock():
                self._keys.pop(wrapped, None)
                return None
            self._keys.move_to_end(wrapped)
            return found[0]

    def put(self, wrapped: bytes, key: Any) -> None:
        with self._lock:
            self._keys[wrapped] = (key, self.clock() + self.ttl)
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)


class KmsEnvelopeCipher:
    """AWS KMS envelope encryption of stored results.

    Each result is sealed with AES-GCM under a data key from ``GenerateDataKey`` on ``key_id``;
    the data key, wrapped by KMS, travels with the ciphertext. The KMS encryption context is the
    table (and, with ``per_record=True``, the record id), so KMS itself refuses to unwrap a data
    key for another table; the AES-GCM associated data binds each ciphertext to its record.

    A data key is reused for up to ``data_key_ttl`` seconds and ``data_key_uses`` results per
    table (``per_record=True``: one data key per result, one KMS call per write); unwrapped
    data keys are cached as long on replay. ``data_key_ttl=0`` turns both caches off.

    Rotation: KMS's automatic rotation needs nothing here (a wrapped key names its key version).
    To move to another KMS key, give the new ``key_id``: new results use it, and older ones
    still open while the old key is enabled and the caller may ``kms:Decrypt`` with it.
    The caller needs ``kms:GenerateDataKey`` and ``kms:Decrypt`` on the key(s).
    """

    def __init__(
        self,
        kms: KmsApi,
        key_id: str,
        *,
        per_record: bool = False,
        data_key_ttl: float = 300.0,
        data_key_uses: int = 10_000,
        cache_size: int = 1_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if data_key_ttl < 0 or data_key_uses < 1:
            raise ConfigurationError("data_key_ttl must be >= 0 and data_key_uses >= 1")
        self.kms = kms
        self.key_id = key_id
        self.per_record = per_record
        self.data_key_ttl = data_key_ttl
        self.data_key_uses = data_key_uses
        self._clock = clock
        self._unwrapped = _KeyCache(data_key_ttl, cache_size, clock)
        self._current: dict[str, tuple[Any, bytes, float, int]] = {}
        self._lock = threading.Lock()

    def _kms_context(self, context: EncryptionContext) -> dict[str, str]:
        if self.per_record:
            return dict(context)
        return {k: v for k, v in context.items() if k != "firstwrite:record"}

    def _data_key(self, context: EncryptionContext) -> tuple[Any, bytes]:
        """The AES-GCM object of the data key to seal with, and the key's wrapped form."""
        kms_context = self._kms_context(context)
        slot = _canonical(kms_context)
        caching = self.data_key_ttl > 0 and not self.per_record
        if caching:
            with self._lock:
                found = self._current.get(slot)
                if found is not None and found[2] > self._clock() and found[3] < self.data_key_uses:
                    self._current[slot] = (found[0], found[1], found[2], found[3] + 1)
                    return found[0], found[1]
        answer = self.kms.generate_data_key(
            KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=kms_context
        )
        key, wrapped = _aesgcm(bytes(answer["Plaintext"])), bytes(answer["CiphertextBlob"])
        if caching:
            with self._lock:
                self._current[slot] = (key, wrapped, self._clock() + self.data_key_ttl, 1)
            self._unwrapped.put(wrapped, key)
        return key, wrapped

    def seal(self, plaintext: bytes, context: EncryptionContext) -> bytes:
        key, wrapped = self._data_key(context)
        return _pack(_KMS, wrapped, key, plaintext, context)

    def open(self, sealed: bytes, context: EncryptionContext) -> bytes:
        kind, wrapped, nonce, body = _unpack(sealed)
        if kind != _KMS:
            raise ResultDecryptionError("the result was sealed with a local key, not AWS KMS")
        key = self._unwrapped.get(wrapped) if self.data_key_ttl > 0 else None
        if key is None:
            key = _aesgcm(self._unwrap(wrapped, context))
            if self.data_key_ttl > 0:
                self._unwrapped.put(wrapped, key)
        return _open_with(key, kind, wrapped, nonce, body, context)

    def _unwrap(self, wrapped: bytes, context: EncryptionContext) -> bytes:
        try:
            answer = self.kms.decrypt(
                CiphertextBlob=wrapped, EncryptionContext=self._kms_context(context)
            )
        except Exception as exc:
            code = client_error_code(exc)
            if code is None:
                raise  # not an answer of KMS's (a dropped connection...): not a refusal
            raise ResultDecryptionError(
                f"AWS KMS refused to unwrap the result's data key ({code}): the key is "
                "disabled or not yours to use, or the result was sealed for another "
                "table or record"
            ) from exc
        return bytes(answer["Plaintext"])
