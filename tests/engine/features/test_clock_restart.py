"""The engine clock's setting survives a restart (issue 39, point 4).

After ``POST /_firstwrite/clock`` moved the clock and the server restarted, the clock was back at
real time: ``DescribeContinuousBackups`` showed ``EarliestRestorableDateTime`` after
``LatestRestorableDateTime`` and every restore was refused; TTL, leases and stream timestamps
staged on the moved clock no longer held. The setting (offset, or the frozen instant) is now kept
in the database and restored when the file is opened again: by an in-process Engine, and by a
real server process killed and started again on the same file.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import httpx

from firstwrite.engine.api import Engine

DAY = 86_400.0
TABLE = "clocked"


def _table(call: Callable[..., Any]) -> None:
    call(
        "CreateTable",
        {
            "TableName": TABLE,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    call(
        "UpdateContinuousBackups",
        {
            "TableName": TABLE,
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        },
    )
    call(
        "UpdateTimeToLive",
        {"TableName": TABLE, "TimeToLiveSpecification": {"Enabled": True, "AttributeName": "ttl"}},
    )


def _window(call: Callable[..., Any]) -> tuple[float, float]:
    answer = call("DescribeContinuousBackups", {"TableName": TABLE})
    recovery = answer["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    earliest, latest = (
        recovery[k] for k in ("EarliestRestorableDateTime", "LatestRestorableDateTime")
    )
    if not isinstance(earliest, float):  # boto3 parses the timestamps: datetimes
        earliest, latest = earliest.timestamp(), latest.timestamp()
    return float(earliest), float(latest)


def test_an_in_process_engine_reopened_keeps_its_moved_clock(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    with Engine(path) as engine:
        engine.clock.advance(2 * DAY)
        _table(engine.execute)
        engine.clock.advance(600)  # ten minutes of history: a window of five
        moved = engine.clock.now()
        # Expired on the moved clock only (a day from real time, a day before the engine's).
        expiry = str(int(time.time() + DAY))
        engine.execute(
            "PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "gone"}, "ttl": {"N": expiry}}}
        )
        engine.execute("PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "kept"}}})
        before = _window(engine.execute)
    with Engine(path) as engine:
        assert abs(engine.clock.now() - moved) < 60, "the clock went back to real time"
        earliest, latest = _window(engine.execute)
        assert earliest == before[0]
        assert earliest < latest, (earliest, latest)
        engine.execute(
            "RestoreTableToPointInTime",
            {
                "SourceTableName": TABLE,
                "TargetTableName": "restored",
                "UseLatestRestorableTime": True,
            },
        )
        engine.ttl.sweep_now()
        assert "Item" not in engine.execute(
            "GetItem", {"TableName": TABLE, "Key": {"pk": {"S": "gone"}}}
        )
        assert "Item" in engine.execute(
            "GetItem", {"TableName": TABLE, "Key": {"pk": {"S": "kept"}}}
        )
        # A frozen clock stays frozen where it stood; a reset is kept too.
        engine.clock.freeze(engine.clock.now() + DAY)
        frozen = engine.clock.now()
    with Engine(path) as engine:
        assert engine.clock.frozen and engine.clock.now() == frozen
        engine.clock.reset()
    with Engine(path) as engine:
        assert not engine.clock.frozen and abs(engine.clock.now() - time.time()) < 5


def test_the_pitr_window_stays_well_formed_when_the_clock_moved_back(tmp_path: Path) -> None:
    """The clock moved forward, PITR switched on, the clock set back to real time (a reset, or a
    restart on a wall clock set back): the window is one instant, its start, and a restore to it
    is accepted (docs/engine.md, "The clock")."""
    with Engine(tmp_path / "engine.db") as engine:
        engine.clock.advance(DAY)
        _table(engine.execute)
        engine.clock.reset()
    with Engine(tmp_path / "engine.db") as engine:
        earliest, latest = _window(engine.execute)
        assert earliest == latest
        engine.execute(
            "RestoreTableToPointInTime",
            {"SourceTableName": TABLE, "TargetTableName": "back", "UseLatestRestorableTime": True},
        )


def test_a_server_restarted_on_the_same_file_keeps_its_moved_clock(
    cli_server: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "served.db"
    server = cli_server(db_path=db)

    def client(url: str) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )

    def call_on(url: str) -> Callable[..., Any]:
        ddb = client(url)
        return lambda operation, request: ddb._make_api_call(operation, request)

    with httpx.Client(base_url=server.url, timeout=10) as http:
        http.post("/_firstwrite/clock", json={"advance": 2 * DAY}).raise_for_status()
        _table(call_on(server.url))
        moved = http.post("/_firstwrite/clock", json={"advance": 600}).json()["now"]
    before = _window(call_on(server.url))
    server.stop(signal.SIGKILL)  # a crash: nothing but the database survives
    server = cli_server(db_path=db)
    with httpx.Client(base_url=server.url, timeout=10) as http:
        state = http.get("/_firstwrite/clock").json()
    assert abs(state["now"] - moved) < 60, state
    earliest, latest = _window(call_on(server.url))
    assert earliest == before[0] < latest
    call_on(server.url)(
        "RestoreTableToPointInTime",
        {"SourceTableName": TABLE, "TargetTableName": "restored", "UseLatestRestorableTime": True},
    )
