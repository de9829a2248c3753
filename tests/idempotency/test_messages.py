"""Messages a user can act on (issue 14, defect 7): errors and logs name the caller's key, not
the internal partition key; a missing table says what to do; the zero-config default says
where its database is; results keep their types."""

from __future__ import annotations

import datetime
import decimal
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.idempotency import (
    BusinessConditionFailedError,
    Claim,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    LostClaimError,
    PayloadMismatchError,
    ReplayedFailureError,
    ResultTooLargeError,
    TableNotFoundError,
    local,
)

from .conftest import TABLE, Backend

KEY = "order-1234"


def _assert_names_the_key(exc: BaseException, guard: Idempotency, scope: str | None) -> None:
    assert KEY in str(exc) and "IDEMPOTENCY" not in str(exc), str(exc)
    assert exc.key == KEY  # type: ignore[attr-defined]
    assert exc.record_id == guard.record_id(KEY, scope=scope)  # type: ignore[attr-defined]
    # Not chained to the failed condition it was read from: no "During handling of
    # ConditionalCheckFailedException" with botocore's frames above the caller's traceback.
    assert exc.__context__ is None and exc.__cause__ is None, repr(exc.__context__)


class Final(Exception):
    idempotency_retryable = False


@pytest.mark.parametrize("scope", [None, "tenant-a"])
def test_errors_name_the_callers_key(backend: Backend, table: str, scope: str | None) -> None:
    guard = backend.guard()
    stale = guard.claim(KEY, {"n": 1}, scope=scope, lease=5)
    assert isinstance(stale, Claim)
    with pytest.raises(InProgressError) as busy:
        guard.claim(KEY, {"n": 1}, scope=scope)
    _assert_names_the_key(busy.value, guard, scope)
    with pytest.raises(PayloadMismatchError) as mismatch:
        guard.claim(KEY, {"n": 2}, scope=scope)
    _assert_names_the_key(mismatch.value, guard, scope)
    backend.advance(6)
    fresh = guard.claim(KEY, {"n": 1}, scope=scope)
    assert isinstance(fresh, Claim) and fresh.idempotency_key == KEY
    with pytest.raises(LostClaimError) as lost:
        guard.complete(stale, "late")
    _assert_names_the_key(lost.value, guard, scope)
    guard.fail(fresh, Final("declined"), retryable=False)
    with pytest.raises(ReplayedFailureError) as replayed:
        guard.run(KEY, lambda: None, {"n": 1}, scope=scope)
    assert replayed.value.key == KEY
    assert replayed.value.record_id == guard.record_id(KEY, scope=scope)


def test_transaction_and_size_errors_name_the_callers_key(backend: Backend, table: str) -> None:
    guard = backend.guard()
    guard.client.put_item(TableName=TABLE, Item={"pk": {"S": "ORDER#1"}})
    taken = {
        "Put": {
            "TableName": TABLE,
            "Item": {"pk": {"S": "ORDER#1"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }
    with pytest.raises(BusinessConditionFailedError) as business:
        guard.claim_with(KEY, [taken])
    _assert_names_the_key(business.value, guard, None)
    with pytest.raises(ResultTooLargeError) as large:
        guard.run(KEY, lambda: os.urandom(500 * 1024))  # incompressible
    assert KEY in str(large.value) and "IDEMPOTENCY" not in str(large.value)


def test_logs_name_the_callers_key_and_the_record(
    backend: Backend, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    guard = backend.guard()
    stale = guard.claim(KEY, lease=5)
    assert isinstance(stale, Claim)
    backend.advance(6)
    caplog.set_level(logging.WARNING, logger="firstwrite.idempotency")
    guard.claim(KEY)  # a takeover: logged
    with pytest.raises(LostClaimError):
        guard.complete(stale, "late")  # a lost claim: logged
    logged = [
        r
        for r in caplog.records
        if r.name == "firstwrite.idempotency" and not hasattr(r, "slowest_attempt")
    ]
    assert len(logged) == 2
    for record in logged:
        assert record.idempotency_key == KEY  # type: ignore[attr-defined]
        assert record.record_id == guard.record_id(KEY)  # type: ignore[attr-defined]
        assert KEY in record.getMessage() and "IDEMPOTENCY" not in record.getMessage()


def test_a_missing_table_says_how_to_make_it(backend: Backend) -> None:
    guard = backend.guard(IdempotencyConfig(table_name="never-created"))
    with pytest.raises(TableNotFoundError) as info:
        guard.run(KEY, lambda: 1)
    message = str(info.value)
    assert "'never-created'" in message and "ensure_table()" in message
    assert isinstance(info.value, ClientError)  # existing handlers keep working
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
    guard.ensure_table()
    assert guard.run(KEY, lambda: 1) == 1


def test_a_missing_business_table_is_named_too(backend: Backend, table: str) -> None:
    guard = backend.guard()
    write = {"Put": {"TableName": "no-such-accounts", "Item": {"pk": {"S": "a"}}}}
    with pytest.raises(TableNotFoundError) as info:
        guard.claim_with(KEY, [write])
    assert "'no-such-accounts'" in str(info.value) and f"'{TABLE}'" in str(info.value)


def test_the_zero_config_default_says_where_its_database_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "where" / "local.db"
    monkeypatch.setenv(local.ENV_VAR, str(path))
    caplog.set_level(logging.INFO, logger="firstwrite.idempotency")
    Idempotency().run("hello", lambda: 1)
    Idempotency().run("hello", lambda: 1)
    said = [r for r in caplog.records if str(path) in r.getMessage()]
    assert len(said) == 1  # once per database file
    assert said[0].levelno == logging.WARNING and local.ENV_VAR in said[0].getMessage()


# -- results keep their types ---------------------------------------------------------------------

VALUES: list[Any] = [
    decimal.Decimal("10.50"),
    {"amount": decimal.Decimal("19.99"), "count": decimal.Decimal("3")},
    datetime.datetime(2026, 12, 3, 9, 14, 5, 123456, tzinfo=datetime.UTC),
    datetime.datetime(2026, 12, 3, 9, 14),  # naive stays naive
    {"on": datetime.date(2026, 12, 3), "at": datetime.time(9, 14, 5)},
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    {"tags": {"a", "b"}, "frozen": frozenset({1, 2})},
    [{"raw": b"\x00\xff", "n": decimal.Decimal("-1E+3")}],
    {"\x00decimal": "a key of the caller's own", "\x00\x00": 1},
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_results_json_cannot_keep_are_preserved(guard: Idempotency, value: Any) -> None:
    key = f"typed-{uuid.uuid4().hex}"
    assert guard.run(key, lambda: value) == value
    replayed = guard.run(key, lambda: None)
    assert replayed == value and type(replayed) is type(value)
    assert repr(replayed) == repr(value) or isinstance(value, (dict, list))
    if isinstance(value, dict):
        assert {k: type(v) for k, v in replayed.items()} == {k: type(v) for k, v in value.items()}


def test_decimals_keep_their_exact_digits(guard: Idempotency) -> None:
    value = decimal.Decimal("0.1000000000000000000000000001")
    guard.run("exact", lambda: value)
    assert str(guard.run("exact", lambda: None)) == "0.1000000000000000000000000001"


def test_plain_json_results_stay_readable_json(guard: Idempotency) -> None:
    guard.run("plain", lambda: {"a": [1, 2.5, "x", None, True]})
    record = guard.get("plain")
    assert record is not None and record.result == '{"a":[1,2.5,"x",null,true]}'


def test_a_result_type_still_rebuilds_typed_values(guard: Idempotency) -> None:
    import pydantic

    class Receipt(pydantic.BaseModel):
        amount: decimal.Decimal
        at: datetime.datetime

    value = Receipt(amount=decimal.Decimal("5.10"), at=datetime.datetime(2026, 1, 1))
    assert guard.run("typed-model", lambda: value, result_type=Receipt) == value
    assert guard.run("typed-model", lambda: None, result_type=Receipt) == value
    plain = {"amount": decimal.Decimal("5.10")}
    guard.run("typed-dict", lambda: plain)
    assert guard.run("typed-dict", lambda: None, result_type=dict[str, Any]) == plain
