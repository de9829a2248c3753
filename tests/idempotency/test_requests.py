"""Each condition expression of :mod:`firstwrite.idempotency.requests` and its Python mirror
agree: for generated stored records and requests, DynamoDB accepts the write exactly when the
mirror says it would. The state machine decides on ``ALL_OLD`` items with the mirrors, so a
disagreement would be a wrong answer to a duplicate.

"DynamoDB" is three implementations, each sent the same generated cases through boto3: the
project's engine, dynalite (Node) and moto's server, the two written by others
(``independent_dynamodb``), so that a condition the engine and the mirror misread alike is still
caught. dynalite needs node: without it that case skips as a missing tool (a failure in CI)."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from firstwrite.idempotency import IdempotencyConfig
from firstwrite.idempotency import requests as q
from firstwrite.idempotency.record import Record, Status
from hypothesis_budget import examples
from independent_dynamodb import dynalite, moto_server

TABLE = "mirrors"
NOW = 1_800_000_000.25  # a fraction, so the rounding of :now and :now_ms is exercised
_keys = itertools.count()


# Where the conditions are sent: the project's engine, and two DynamoDB implementations
# written by others, so that the mirrors are not only checked against our own reading of
# DynamoDB. Each gets the same cases (RUN_SEED, below).
# (make test-fast leaves the two servers out: slow.)
BACKENDS = (
    "engine",
    pytest.param("dynalite", marks=pytest.mark.slow),
    pytest.param("moto", marks=pytest.mark.slow),
)


@pytest.fixture(scope="module", params=BACKENDS)
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    from firstwrite.idempotency import Idempotency

    with ExitStack() as stack:
        if request.param == "engine":
            from firstwrite.engine.api import Engine
            from firstwrite.engine.binding.sync import local_client
            from firstwrite.engine.features.ttl import TTLConfig

            path: Path = tmp_path_factory.mktemp("mirrors") / "engine.db"
            # No background sweeper: records past expires_at must stay, as they do on DynamoDB
            # until TTL gets to them, for the conditions to see them.
            engine = stack.enter_context(Engine(path, ttl_config=TTLConfig(sweep_interval=None)))
            engine.clock.freeze(NOW)
            c = local_client(engine, region="us-east-1")
        else:
            if request.param == "dynalite":
                url = stack.enter_context(dynalite(tmp_path_factory.mktemp("mirrors-dynalite")))
            else:
                url = stack.enter_context(moto_server())
            c = boto3.client(
                "dynamodb",
                endpoint_url=url,
                region_name="us-east-1",
                aws_access_key_id="firstwrite",
                aws_secret_access_key="local",
            )
        # (dynalite cannot enable TTL: ensure_table logs that and goes on. The conditions never
        # depend on the server's clock: every instant is a value of the request.)
        Idempotency(IdempotencyConfig(table_name=TABLE), client=c).ensure_table()
        yield c


# One seed for the whole run (xdist's workers share its run id), so that every backend is sent
# exactly the same generated cases; a fresh one each run, so that runs still explore.
RUN_SEED = int(os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex, 16) % 2**64


FPS = st.sampled_from(["fp-a", "fp-b", None])
OFFSETS = st.sampled_from([-5000, -1000, -1, 0, 1, 999, 1000, 5000])  # ms around NOW


@st.composite
def stored(draw: Any) -> dict[str, Any] | None:
    """A stored record in any state the layer writes (or nothing)."""
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    state = draw(
        st.sampled_from(["pending", "completed", "failed-retryable", "failed-final", "tombstone"])
    )
    item: dict[str, Any] = {
        q.A_OWNER: {
            "S": q.fence(draw(st.sampled_from(["t" * 32, "u" * 32])), draw(st.integers(1, 3)))
        },
        q.A_EXPIRES: {"N": str(int(NOW) + draw(st.sampled_from([-2, -1, 0, 1, 100])))},
    }
    fp = draw(FPS)
    if fp is not None:
        item[q.A_FINGERPRINT] = {"S": fp}
    if state == "pending":
        item[q.A_LEASE] = {"N": str(q.millis(NOW) + draw(OFFSETS))}
    elif state == "completed":
        item[q.A_RESULT] = {"S": "1"}
    elif state == "failed-retryable":
        item[q.A_ERROR] = {"S": "{}"}
        item[q.A_LEASE] = {"N": "0"}
    elif state == "failed-final":
        item[q.A_ERROR] = {"S": "{}"}
    else:
        item[q.A_REMOVED_AT] = {"N": str(int(NOW) - 10)}
        item[q.A_REMOVED_STATUS] = {"S": "COMPLETED"}
    return item


def _put(client: Any, key: dict[str, Any], item: dict[str, Any] | None) -> Record | None:
    if item is None:
        return None
    client.put_item(TableName=TABLE, Item={**key, **item})
    return Record.from_item(item)


def _accepted(client: Any, call: q.Call) -> bool:
    method = getattr(client, {"PutItem": "put_item", "UpdateItem": "update_item"}[call.operation])
    try:
        method(**call.params)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"
        return False
    return True


# 60 cases per backend and run (a fresh seed each run, so runs add up): every state the layer
# writes, both fingerprints and each lease offset appear in a run; three backends at 150 cost
# a minute of the suite.
COMMON = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def same_cases(test: Callable[..., None]) -> Callable[..., None]:
    """``test`` drawn from :data:`RUN_SEED` (so, without the example database, the same cases
    on every backend), under :data:`COMMON`."""
    return seed(RUN_SEED)(COMMON(test))


@same_cases
@given(
    item=stored(),
    fp=st.sampled_from(["fp-a", "fp-b", q.NO_FINGERPRINT]),
    refuse=st.booleans(),
)
def test_claim_condition_and_its_mirror_agree(
    client: Any, item: dict[str, Any] | None, fp: str, refuse: bool
) -> None:
    """Both claim conditions: with the retention branch, and without it
    (``refuse_late_retries``)."""
    requests = q.Requests(IdempotencyConfig(table_name=TABLE, refuse_late_retries=refuse))
    key = {"pk": {"S": f"claim-{next(_keys)}"}}
    rec = _put(client, key, item)
    claim = requests.claim_item(key, "c" * 32, fp, NOW, 60)
    expected = q.claim_allows(rec, fp, NOW, retention_branch=not refuse)
    assert _accepted(client, requests.put_claim(claim, fp, NOW)) is expected


@same_cases
@given(item=stored(), seen_owner=st.sampled_from(["t" * 32, "u" * 32]), version=st.integers(1, 3))
def test_replace_condition_and_its_mirror_agree(
    client: Any, item: dict[str, Any] | None, seen_owner: str, version: int
) -> None:
    requests = q.Requests(IdempotencyConfig(table_name=TABLE))
    key = {"pk": {"S": f"replace-{next(_keys)}"}}
    rec = _put(client, key, item)
    seen = q.fence(seen_owner, version)
    claim = requests.claim_item(key, "c" * 32, "fp-a", NOW, 60)
    assert _accepted(client, requests.replace_claim(claim, seen)) is q.replace_allows(rec, seen)


@same_cases
@given(item=stored())
def test_the_tombstone_condition_and_its_mirror_agree(
    client: Any, item: dict[str, Any] | None
) -> None:
    requests = q.Requests(IdempotencyConfig(table_name=TABLE))
    key = {"pk": {"S": f"tomb-{next(_keys)}"}}
    rec = _put(client, key, item)
    call = requests.tombstone(key, "t" * 32 + ":1", "fp-a", "COMPLETED", NOW, 3600)
    assert _accepted(client, call) is q.absent(rec)


@same_cases
@given(item=stored(), owner=st.sampled_from(["t" * 32, "u" * 32]), version=st.integers(1, 3))
def test_fence_and_its_mirror_agree(
    client: Any, item: dict[str, Any] | None, owner: str, version: int
) -> None:
    requests = q.Requests(IdempotencyConfig(table_name=TABLE))
    key = {"pk": {"S": f"fence-{next(_keys)}"}}
    rec = _put(client, key, item)
    for call in (
        requests.complete(key, owner, version, {"S": "2"}),
        requests.renew(key, owner, version, q.millis(NOW) + 1000, NOW),
        requests.fail(key, owner, version, "{}", retryable=True),
    ):
        expected = q.fence_allows(rec, owner, version)
        assert _accepted(client, call) is expected
        if expected:
            return  # the record has moved on: the other writes would see another state


def test_the_mirrors_are_not_constant() -> None:
    """Both answers occur, so agreement above is not agreement on one answer."""
    live = Record.from_item(
        {
            q.A_OWNER: {"S": "t" * 32 + ":1"},
            q.A_EXPIRES: {"N": str(int(NOW) + 10)},
            q.A_LEASE: {"N": str(q.millis(NOW) + 10)},
        }
    )
    assert q.claim_allows(None, "fp-a", NOW) and not q.claim_allows(live, "fp-a", NOW)
    assert q.fence_allows(live, "t" * 32, 1) and not q.fence_allows(live, "t" * 32, 2)


def test_a_record_decodes_numbers_in_any_form_dynamodb_returns() -> None:
    # The layer writes integers; a record edited by hand (or by another tool) may hold numbers
    # with a fraction or an exponent, and owner tokens are split at their last colon.
    rec = Record.from_item(
        {
            q.A_OWNER: {"S": "tok:en:3"},
            q.A_EXPIRES: {"N": "1.8E9"},
            q.A_LEASE: {"N": "-12.5"},
            q.A_FINGERPRINT: {"S": "fp-a"},
        }
    )
    assert (rec.owner, rec.version, rec.expires_at, rec.lease_expires_at) == (
        "tok:en",
        3,
        1_800_000_000,
        -12,
    )
    assert rec.status is Status.PENDING and rec.fingerprint == "fp-a" and rec.result is None
    done = Record.from_item(
        {q.A_OWNER: {"S": "t:1"}, q.A_EXPIRES: {"N": "+7"}, q.A_RESULT: {"B": b"\x02ab"}}
    )
    assert (done.status, done.expires_at, done.result) == (Status.COMPLETED, 7, b"\x02ab")
