"""Sealed results (firstwrite.idempotency.result_cipher): AES-GCM bound to the record, with a
local keyring and with AWS KMS envelope encryption against moto's KMS server over HTTP."""

from __future__ import annotations

import os
from typing import Any

import pytest

from firstwrite.idempotency.errors import ConfigurationError, ResultDecryptionError
from firstwrite.idempotency.result_cipher import (
    KmsEnvelopeCipher,
    LocalKeyCipher,
    ResultCipher,
    context_for,
    is_sealed,
)

HERE = context_for("orders", "IDEMPOTENCY#pay-1")
ELSEWHERE = context_for("orders", "IDEMPOTENCY#pay-2")
OTHER_TABLE = context_for("refunds", "IDEMPOTENCY#pay-1")
SECRET = b'{"card_last4":"4242","token":"tok_live_abc"}'


class CountingKms:
    def __init__(self, kms: Any) -> None:
        self.kms = kms
        self.calls: list[str] = []

    def generate_data_key(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("GenerateDataKey")
        return dict(self.kms.generate_data_key(**kwargs))

    def decrypt(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("Decrypt")
        return dict(self.kms.decrypt(**kwargs))


@pytest.fixture
def kms_key(kms: Any) -> str:
    return str(kms.create_key()["KeyMetadata"]["KeyId"])


@pytest.fixture(params=["local", "kms", "kms-per-record"])
def cipher(request: pytest.FixtureRequest) -> ResultCipher:
    if request.param == "local":
        return LocalKeyCipher({"k1": os.urandom(32)}, current="k1")
    kms = request.getfixturevalue("kms")
    return KmsEnvelopeCipher(
        kms, request.getfixturevalue("kms_key"), per_record=request.param == "kms-per-record"
    )


def test_a_sealed_result_opens_for_its_record(cipher: ResultCipher) -> None:
    sealed = cipher.seal(SECRET, HERE)
    assert is_sealed(sealed)
    assert SECRET not in sealed and b"4242" not in sealed
    assert cipher.open(sealed, HERE) == SECRET


def test_two_seals_of_one_result_differ(cipher: ResultCipher) -> None:
    assert cipher.seal(SECRET, HERE) != cipher.seal(SECRET, HERE)


@pytest.mark.parametrize("where", [ELSEWHERE, OTHER_TABLE], ids=["other record", "other table"])
def test_a_ciphertext_moved_to_another_record_is_refused(
    cipher: ResultCipher, where: dict[str, str]
) -> None:
    sealed = cipher.seal(SECRET, HERE)
    with pytest.raises(ResultDecryptionError):
        cipher.open(sealed, where)


def test_an_altered_ciphertext_is_refused(cipher: ResultCipher) -> None:
    sealed = bytearray(cipher.seal(SECRET, HERE))
    sealed[-20] ^= 1
    with pytest.raises(ResultDecryptionError, match="altered"):
        cipher.open(bytes(sealed), HERE)


def test_a_wrong_local_key_is_refused_with_a_clear_error() -> None:
    sealed = LocalKeyCipher({"k1": os.urandom(32)}, "k1").seal(SECRET, HERE)
    with pytest.raises(ResultDecryptionError, match=r"'k1'.*does not hold"):
        LocalKeyCipher({"k2": os.urandom(32)}, "k2").open(sealed, HERE)
    with pytest.raises(ResultDecryptionError, match="another record or table, or altered"):
        LocalKeyCipher({"k1": os.urandom(32)}, "k1").open(sealed, HERE)


def test_local_keys_rotate() -> None:
    old, new = os.urandom(32), os.urandom(16)
    before = LocalKeyCipher({"2026-11": old}, "2026-11").seal(SECRET, HERE)
    rotated = LocalKeyCipher({"2026-11": old, "2026-12": new}, "2026-12")
    after = rotated.seal(SECRET, HERE)
    assert rotated.open(before, HERE) == SECRET and rotated.open(after, HERE) == SECRET
    with pytest.raises(ResultDecryptionError):
        LocalKeyCipher({"2026-12": new}, "2026-12").open(before, HERE)


def test_bad_local_keys_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="16, 24 or 32"):
        LocalKeyCipher({"k": b"short"}, "k")
    with pytest.raises(ConfigurationError, match="not among"):
        LocalKeyCipher({"k": os.urandom(32)}, "other")


def test_a_data_key_kms_will_not_unwrap_is_refused_with_a_clear_error(
    kms: Any, kms_key: str
) -> None:
    sealed = KmsEnvelopeCipher(kms, kms_key).seal(SECRET, HERE)
    other_key = str(kms.create_key()["KeyMetadata"]["KeyId"])
    reader = KmsEnvelopeCipher(kms, other_key)  # seals with another key; opens by the blob
    assert reader.open(sealed, HERE) == SECRET  # KMS names the key in the wrapped blob
    # A wrapped key KMS cannot read (another account's, a deleted key's, or damaged): moto
    # models neither disabled nor deleted keys on Decrypt, so the blob is damaged here.
    damaged = bytearray(sealed)
    damaged[12] ^= 0xFF
    with pytest.raises(ResultDecryptionError, match=r"KMS refused.*InvalidCiphertextException"):
        KmsEnvelopeCipher(kms, other_key).open(bytes(damaged), HERE)


def test_the_data_key_is_cached_for_a_bounded_time_and_number_of_uses(
    kms: Any, kms_key: str
) -> None:
    now = [0.0]
    counting = CountingKms(kms)
    cipher = KmsEnvelopeCipher(
        counting, kms_key, data_key_ttl=60, data_key_uses=3, clock=lambda: now[0]
    )
    sealed = [cipher.seal(SECRET, context_for("orders", f"k{i}")) for i in range(4)]
    assert counting.calls == ["GenerateDataKey", "GenerateDataKey"]  # 3 uses, then a new key
    assert cipher.open(sealed[0], context_for("orders", "k0")) == SECRET
    assert counting.calls.count("Decrypt") == 0  # the key it made is cached for reading too
    now[0] = 61.0
    cipher.seal(SECRET, HERE)
    assert counting.calls.count("GenerateDataKey") == 3  # the cached key expired
    assert cipher.open(sealed[1], context_for("orders", "k1")) == SECRET
    assert counting.calls.count("Decrypt") == 1  # expired in the read cache too: unwrapped


def test_per_record_data_keys_bind_kms_itself_to_the_record(kms: Any, kms_key: str) -> None:
    counting = CountingKms(kms)
    cipher = KmsEnvelopeCipher(counting, kms_key, per_record=True, data_key_ttl=0)
    sealed = cipher.seal(SECRET, HERE)
    with pytest.raises(ResultDecryptionError, match="KMS refused"):
        cipher.open(sealed, ELSEWHERE)  # KMS's own encryption context check, before AES-GCM
    assert counting.calls == ["GenerateDataKey", "Decrypt"]


def test_a_local_seal_is_not_opened_by_kms_and_back(kms: Any, kms_key: str) -> None:
    local = LocalKeyCipher({"k": os.urandom(32)}, "k")
    envelope = KmsEnvelopeCipher(kms, kms_key)
    with pytest.raises(ResultDecryptionError, match="local key"):
        envelope.open(local.seal(SECRET, HERE), HERE)
    with pytest.raises(ResultDecryptionError, match="KMS"):
        local.open(envelope.seal(SECRET, HERE), HERE)
    with pytest.raises(ResultDecryptionError, match="not a sealed result"):
        local.open(b"plain text", HERE)
