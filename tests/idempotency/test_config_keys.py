"""Configuration validation, keys and fingerprints, serialisation corners."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firstwrite.idempotency import serialization
from firstwrite.idempotency.config import IdempotencyConfig, RetryPolicy
from firstwrite.idempotency.errors import ConfigurationError, MissingKeyError, SerializationError
from firstwrite.idempotency.guard import Idempotency
from firstwrite.idempotency.keys import KeyBuilder, canonical_json, fingerprint, key_from


@pytest.mark.parametrize(
    "changes",
    [
        {"retention": 600, "client_retry_ceiling": 3600},  # the TTL race
        {"lease": 0},
        {"retention": 30, "lease": 60, "client_retry_ceiling": 0},
        {"hash_function": "md5"},
        {"hash_function": "nope"},
        {"table_name": "x"},
        {"key_prefix": "A#B"},
        {"partition_key": "k", "sort_key": "k"},
        {"in_progress_wait": -1},
        {"max_item_size": 500 * 1024},
    ],
)
def test_unsafe_configuration_is_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        IdempotencyConfig(**changes)  # type: ignore[arg-type]


def test_defaults_are_valid_and_frozen() -> None:
    config = IdempotencyConfig()
    assert config.retention >= config.client_retry_ceiling
    assert config.in_progress_wait == 1.0  # a live duplicate waits about a second, as seed 001
    with pytest.raises(AttributeError):
        config.lease = 1  # type: ignore[misc]
    with pytest.raises(ConfigurationError):
        config.with_(retention=10)
    assert RetryPolicy(max_attempts=3, base=0.1, cap=0.15).ceiling == pytest.approx(0.25)


def test_canonical_json_and_fingerprints() -> None:
    assert canonical_json({"b": 1, "a": [1.0, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1.0})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint({})) == 64
    with pytest.raises(SerializationError):
        canonical_json({"x": float("nan")})


def test_keys_never_collide_across_scopes() -> None:
    kb = KeyBuilder(
        prefix="IDEMPOTENCY",
        scope="",
        partition_key="pk",
        sort_key=None,
        max_key_length=250,
        hash_function="sha256",
    )
    assert kb.record_id("c", "a#b") != kb.record_id("b#c", "a")
    assert kb.record_id("k", "t1") != kb.record_id("k", "t2")
    long_pk, _ = kb.record_id("x" * 5000)
    assert len(long_pk) < 120 and "#%sha256:" in long_pk
    assert kb.record_id("x" * 5000) != kb.record_id("x" * 4999)
    with pytest.raises(MissingKeyError):
        kb.record_id("")


def test_a_hashed_key_is_never_a_literal_key(ddb: Any, table_name: str) -> None:
    """A key over ``max_key_length`` is stored hashed; the literal key spelling that hash is
    another request, which runs (they shared one record when the hash was ``sha256:<hex>``)."""
    guard = Idempotency(IdempotencyConfig(table_name=table_name), client=ddb)
    guard.ensure_table()
    long_key = "L" * 300
    literal = "sha256:" + hashlib.sha256(long_key.encode()).hexdigest()
    runs: list[str] = []
    assert guard.run(long_key, lambda: runs.append("long") or "long") == "long"
    assert guard.run(literal, lambda: runs.append("literal") or "literal") == "literal"
    assert runs == ["long", "literal"]
    assert guard.run(long_key, lambda: runs.append("again") or "again") == "long"
    assert guard.record_id(long_key) != guard.record_id(literal)
    assert guard.record_id(long_key).rpartition("#")[2].startswith("%sha256:")


def test_sort_key_layout() -> None:
    kb = KeyBuilder(
        prefix="IDEMPOTENCY",
        scope="svc",
        partition_key="pk",
        sort_key="sk",
        max_key_length=250,
        hash_function="sha256",
    )
    key, record_id = kb.key("k1", "tenant")
    assert key == {"pk": {"S": "IDEMPOTENCY#svc#tenant"}, "sk": {"S": "k1"}}
    assert record_id == "IDEMPOTENCY#svc#tenant|k1"


def test_key_from_fields() -> None:
    assert key_from({"id": "abc"}, "id") == "abc"
    assert key_from({"a": 1, "b": 2}, "[a, b]") == fingerprint([1, 2])
    with pytest.raises(MissingKeyError):
        key_from({"a": None}, "[a]")


def test_serialization_forms() -> None:
    assert serialization.encode({"a": 1}) == {"S": '{"a":1}'}
    raw = serialization.encode(b"\x00\x01")
    assert raw["B"][0] == 2 and serialization.decode(raw["B"]) == b"\x00\x01"
    packed = serialization.encode("z" * 10_000, threshold=100)
    assert packed["B"][0] == 1 and serialization.decode(packed["B"]) == "z" * 10_000
    with pytest.raises(SerializationError):
        serialization.encode(object())
    with pytest.raises(SerializationError):
        serialization.decode(b"\x09junk")


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
_trees = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=3),
    ),
    max_leaves=12,
)


_stdlib_result_json = json.JSONEncoder(
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=serialization._result_default,
).encode


@given(_trees)
def test_results_are_stored_as_the_stdlib_encoder_writes_them(tree: object) -> None:
    """The result encoder built once writes the text ``JSONEncoder.encode`` writes."""
    try:
        expected: object = _stdlib_result_json(tree)
    except Exception as exc:  # a tree holding a value plain JSON would change: typed JSON
        expected = type(exc)
    try:
        got: object = serialization._result_dumps(tree)
    except Exception as exc:
        got = type(exc)
    assert got == expected


def test_a_circular_result_cannot_be_stored() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    ring: dict[str, object] = {}
    ring["self"] = ring
    for value in (loop, ring, {"deep": [loop]}):
        with pytest.raises(SerializationError):
            serialization.encode(value)


@given(_trees)
def test_canonical_json_fast_path_matches_normalising(tree: object) -> None:
    """Plain trees skip normalising: they must encode exactly as the normalised tree does."""
    from firstwrite.idempotency.keys import _canonical_text, normalise

    assert canonical_json(tree) == _canonical_text(normalise(tree)).encode("utf-8")
