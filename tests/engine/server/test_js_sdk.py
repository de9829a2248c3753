"""Another language's SDK against a real server: the AWS SDK for JavaScript v3 (pinned in
tests/engine/server/js/package-lock.json, installed with ``npm ci``) runs tests/engine/server/js/sdk_check.mjs
and reports what it saw; every check here is on the SDK's own view of the answers."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from npm_packages import npm_ci

JS = Path(__file__).with_name("js")
pytestmark = [
    pytest.mark.needs_tool("node", "npm"),
    pytest.mark.slow,
    pytest.mark.xdist_group("js-sdk"),  # one npm ci at a time in tests/engine/js
]


@pytest.fixture(scope="module")
def sdk() -> Path:
    """The JavaScript SDK, installed once per lock file (``npm_packages.npm_ci``)."""
    npm_ci(JS)
    return JS / "sdk_check.mjs"


@pytest.fixture
def seen(sdk: Path, cli_server: Callable[..., Any]) -> dict[str, Any]:
    server = cli_server()
    done = subprocess.run(
        ["node", str(sdk), server.url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_items_round_trip_with_dynamodb_types(seen: dict[str, Any]) -> None:
    assert seen["tables"] == ["js-orders"]
    assert seen["get"] == {
        "blob": [0, 1, 2, 253, 254, 255],  # B: base64 on the wire, bytes again in the SDK
        "big": "12345678901234567890123456789012345678",  # 38 digits, kept exactly
        "tags": ["1.5", "10", "9"],  # NS normalised ("1.50" -> "1.5")
    }
    assert seen["updated"] == {"status": {"S": "PAID"}, "visits": {"N": "1"}}
    assert seen["tablesAfter"] == []


def test_errors_are_the_sdks_modeled_exceptions(seen: dict[str, Any]) -> None:
    duplicate = seen["duplicate"]
    assert duplicate["name"] == "ConditionalCheckFailedException"
    assert duplicate["message"] == "The conditional request failed"
    assert (duplicate["status"], duplicate["fault"]) == (400, "client")
    # ReturnValuesOnConditionCheckFailure=ALL_OLD: the stored item rides on the exception.
    assert duplicate["item"]["pk"] == {"S": "order-1"}
    assert duplicate["item"]["blob"] == [0, 1, 2, 253, 254, 255]

    cancelled = seen["cancelled"]
    assert cancelled["name"] == "TransactionCanceledException"
    assert cancelled["message"].endswith("[None, ConditionalCheckFailed]")
    assert cancelled["reasons"] == [
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"},
    ]
    assert seen["cancelledWrote"] is False  # all or nothing

    assert seen["invalid"]["name"] == "ValidationException"
    assert seen["invalid"]["message"].startswith("Invalid ConditionExpression: Syntax error;")
    assert seen["missing"] == {
        "name": "ResourceNotFoundException",
        "message": "Requested resource not found",
        "status": 400,
        "fault": "client",
        "item": None,
        "reasons": None,
    }


def test_query_pages_and_batch_reads(seen: dict[str, Any]) -> None:
    # The SDK's paginator follows LastEvaluatedKey, newest first, four at a time.
    assert seen["pages"] == [[10, 9, 8, 7], [6, 5, 4, 3], [2, 1]]
    assert seen["count"] == 5
    assert seen["batch"] == [2]  # the missing key is simply absent


def test_indexes_created_queried_and_paged(seen: dict[str, Any]) -> None:
    assert seen["indexCreated"] == {
        "gsi": [["by-tenant", "ACTIVE"], ["multi", "ACTIVE"]],
        "multiKey": ["tenant:HASH", "pk:HASH", "rank:RANGE", "sk:RANGE"],
        "lsi": ["by-rank"],
    }
    # The SDK's paginator follows LastEvaluatedKey through a KEYS_ONLY GSI, two at a time;
    # each key carries the table's and the index's attributes.
    keys_only = ["pk", "sk", "tenant"]
    assert seen["indexPages"] == [
        {"sks": [1, 2], "attributes": keys_only, "last": keys_only},
        {"sks": [3, 4], "attributes": keys_only, "last": keys_only},
        {"sks": [5], "attributes": keys_only, "last": None},
    ]
    assert seen["localRanks"] == [5, 7, 9]  # p1's items, by rank, read consistently
    assert seen["consistentGsi"]["name"] == "ValidationException"
    assert seen["consistentGsi"]["message"] == (
        "Consistent reads are not supported on global secondary indexes"
    )
    # The multi-attribute GSI: p1's items with rank > 5 in rank order (sk 3 has rank 7, sk 1
    # rank 9), one a page; each LastEvaluatedKey carries every key attribute.
    multi_keys = ["pk", "rank", "sk", "tenant"]
    assert seen["multiPages"] == [
        {"sks": [3], "last": multi_keys},
        {"sks": [1], "last": multi_keys},
        {"sks": [], "last": None},
    ]
    assert seen["multiSkip"]["name"] == "ValidationException"
    assert seen["multiSkip"]["message"] == (
        "RANGE key attributes rank must have equality conditions specified in the query because "
        "a condition is present on key attribute sk"
    )
    assert seen["addedStatus"] == ["ACTIVE", "ACTIVE", "CREATING"]
    assert seen["cityCount"] == 5


def test_a_backup_and_a_point_in_time_restore(sdk: Path, cli_server: Callable[..., Any]) -> None:
    """tests/engine/server/js/backup_check.mjs: the SDK's own parsing of the backup shapes,
    timestamps included, and of the backup errors."""
    server = cli_server()
    done = subprocess.run(
        ["node", str(sdk.with_name("backup_check.mjs")), server.url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    base = seen["window"]["earliest"]
    assert seen["backup"] == {
        "status": "AVAILABLE",
        "type": "USER",
        "created": True,
        "createdAt": base,
    }
    assert seen["restored"] == {
        "itemCount": 3,
        "sourceBackupArn": True,
        "restoreDateTime": base,
        "inProgress": False,
    }
    assert seen["restoredAnns"] == ["a", "c"]  # the GSI is restored; d came after the backup
    assert seen["listed"] == ["js-backup"]
    assert seen["sourceItemCount"] == 3
    assert seen["window"] == {"status": "ENABLED", "earliest": base, "latest": base + 310}
    assert seen["pointItems"] == ["a", "b", "c"]
    assert seen["tooEarly"]["name"] == "InvalidRestoreTimeException"
    assert seen["tooEarly"]["status"] == 400
    assert seen["exists"] == {
        "name": "TableAlreadyExistsException",
        "message": "Table already exists: js-point",
        "status": 400,
    }
    assert seen["gone"]["name"] == "BackupNotFoundException"


def test_partiql_statements_batches_and_transactions(
    sdk: Path, cli_server: Callable[..., Any]
) -> None:
    """tests/engine/server/js/partiql_check.mjs: the SDK's own parsing of PartiQL answers,
    of a batch's per-statement errors and of a cancelled transaction's reasons."""
    server = cli_server()
    done = subprocess.run(
        ["node", str(sdk.with_name("partiql_check.mjs")), server.url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen["inserted"] == []
    assert seen["selected"] == [{"title": "first", "cover": [0, 255]}]
    assert seen["duplicate"] == {
        "name": "DuplicateItemException",
        "message": "Duplicate primary key exists in table",
        "status": 400,
        "fault": "client",
        "reasons": None,
    }
    # Each statement of a batch is answered on its own: the duplicate fails alone.
    assert seen["batch"] == [
        None,
        {"Code": "DuplicateItem", "Message": "Duplicate primary key exists in table"},
        None,
    ]
    assert seen["afterBatch"] == [[1, 7], [2, None]]
    cancelled = seen["cancelled"]
    assert cancelled["name"] == "TransactionCanceledException"
    assert cancelled["status"] == 400
    assert cancelled["message"].endswith("[None, None, DuplicateItem]")
    assert cancelled["reasons"] == [
        {"Code": "None"},
        {"Code": "None"},
        {"Code": "DuplicateItem", "Message": "Duplicate primary key exists in table"},
    ]
    assert seen["afterTransaction"] == [1, 2]  # all or nothing
