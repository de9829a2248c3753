"""Backups and point-in-time recovery through boto3, in process and over HTTP.

The messages of TableNotFoundException, BackupNotFoundException, TableAlreadyExistsException
and PointInTimeRecoveryUnavailableException are moto's (moto/dynamodb/exceptions.py); the
restored settings follow DynamoDB's RestoreTableFromBackup reference (stream, TTL and tags
are not restored); ListBackups' default BackupType (USER) and time bounds (lower inclusive,
upper exclusive) are its API reference's. Time is the engine's clock: in process the engine's
own, over HTTP the server's through its admin API (``clock`` below), so a test restores to a
moment it staged.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from firstwrite.engine import Engine

KEY = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
ATTRS = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "N"},
    {"AttributeName": "g", "AttributeType": "S"},
    {"AttributeName": "rank", "AttributeType": "N"},
]
GSI = {
    "IndexName": "by-g",
    "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
    "Projection": {"ProjectionType": "ALL"},
}
LSI = {
    "IndexName": "by-rank",
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "rank", "KeyType": "RANGE"},
    ],
    "Projection": {"ProjectionType": "KEYS_ONLY"},
}
BACKUP_ARN = re.compile(
    r"arn:aws:dynamodb:us-east-1:\d{12}:table/[\w.-]+/backup/\d{14}-[0-9a-f]{8}\Z"
)
T0 = 1_800_000_000.0  # a staged instant (2027-01-15)


class Clock:
    """The engine clock of the transport under test: the engine's own in process, the
    server's through its admin API over HTTP."""

    def __init__(self, engine: Engine | None, url: str | None) -> None:
        self.engine = engine
        self.url = url

    def _post(self, body: dict[str, Any]) -> float:
        if self.engine is not None:
            clock = self.engine.clock
            if body.get("reset"):
                clock.reset()
            if "set" in body:
                clock.freeze(body["set"])
            if "advance" in body:
                clock.advance(body["advance"])
            return clock.now()
        answer = httpx.post(f"{self.url}/_firstwrite/clock", json=body)
        assert answer.status_code == 200, answer.text
        return float(answer.json()["now"])

    def freeze(self, at: float) -> float:
        return self._post({"freeze": True, "set": at})

    def advance(self, seconds: float) -> float:
        return self._post({"advance": seconds})

    def reset(self) -> None:
        self._post({"reset": True})


@pytest.fixture
def clock(request: pytest.FixtureRequest, ddb: Any) -> Iterator[Clock]:
    transport = request.node.callspec.params["ddb"]
    if transport == "inprocess":
        made = Clock(request.getfixturevalue("engine"), None)
    else:
        made = Clock(None, request.getfixturevalue("http_server").url)
    yield made
    made.reset()


def create(ddb: Any, name: str, **extra: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": KEY,
        "AttributeDefinitions": ATTRS,
        "GlobalSecondaryIndexes": [GSI],
        "LocalSecondaryIndexes": [LSI],
        "BillingMode": "PAY_PER_REQUEST",
        **extra,
    }
    if request["BillingMode"] == "PROVISIONED":
        request["GlobalSecondaryIndexes"] = [
            {**GSI, "ProvisionedThroughput": {"ReadCapacityUnits": 3, "WriteCapacityUnits": 4}}
        ]
    description: dict[str, Any] = ddb.create_table(**request)["TableDescription"]
    return description


def item(pk: str, sk: int, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"pk": {"S": pk}, "sk": {"N": str(sk)}}
    for name, value in more.items():
        out[name] = {"N": str(value)} if isinstance(value, int) else {"S": value}
    return out


def scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = ddb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda i: (i["pk"]["S"], int(i["sk"]["N"])))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def code_of(call: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


def gsi_keys(ddb: Any, table: str, g: str) -> list[tuple[str, int]]:
    page = ddb.query(
        TableName=table,
        IndexName="by-g",
        KeyConditionExpression="g = :g",
        ExpressionAttributeValues={":g": {"S": g}},
    )
    return sorted((i["pk"]["S"], int(i["sk"]["N"])) for i in page["Items"])


def lsi_keys(ddb: Any, table: str, pk: str) -> list[int]:
    page = ddb.query(
        TableName=table,
        IndexName="by-rank",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": pk}},
    )
    return [int(i["sk"]["N"]) for i in page["Items"]]


# --- on-demand backups -----------------------------------------------------------------------


def test_a_backup_is_created_described_listed_and_deleted(ddb: Any, table_name: str) -> None:
    table = create(ddb, table_name)
    ddb.put_item(TableName=table_name, Item=item("a", 1, g="x", rank=5))
    details = ddb.create_backup(TableName=table_name, BackupName="nightly")["BackupDetails"]
    assert BACKUP_ARN.match(details["BackupArn"])
    assert details["BackupArn"].startswith(table["TableArn"] + "/backup/")
    assert details["BackupName"] == "nightly"
    assert (details["BackupStatus"], details["BackupType"]) == ("AVAILABLE", "USER")
    assert details["BackupSizeBytes"] > 0
    arn = details["BackupArn"]

    described = ddb.describe_backup(BackupArn=arn)["BackupDescription"]
    assert described["BackupDetails"] == details
    source = described["SourceTableDetails"]
    assert (source["TableName"], source["TableArn"]) == (table_name, table["TableArn"])
    assert (source["TableId"], source["ItemCount"]) == (table["TableId"], 1)
    assert source["KeySchema"] == KEY
    assert source["BillingMode"] == "PAY_PER_REQUEST"
    features = described["SourceTableFeatureDetails"]
    assert [i["IndexName"] for i in features["GlobalSecondaryIndexes"]] == ["by-g"]
    assert [i["IndexName"] for i in features["LocalSecondaryIndexes"]] == ["by-rank"]
    assert features["TimeToLiveDescription"] == {"TimeToLiveStatus": "DISABLED"}

    listed = ddb.list_backups(TableName=table_name)
    assert [b["BackupArn"] for b in listed["BackupSummaries"]] == [arn]
    summary = listed["BackupSummaries"][0]
    assert (summary["TableName"], summary["TableId"]) == (table_name, table["TableId"])
    assert "LastEvaluatedBackupArn" not in listed

    deleted = ddb.delete_backup(BackupArn=arn)["BackupDescription"]
    assert deleted["BackupDetails"]["BackupStatus"] == "DELETED"
    assert ddb.list_backups(TableName=table_name)["BackupSummaries"] == []
    for call in (
        lambda: ddb.describe_backup(BackupArn=arn),
        lambda: ddb.delete_backup(BackupArn=arn),
        lambda: ddb.restore_table_from_backup(TargetTableName=table_name + "-r", BackupArn=arn),
    ):
        assert code_of(call) == ("BackupNotFoundException", f"Backup not found: {arn}")


def test_create_backup_takes_a_name_or_an_arn_and_needs_the_table(
    ddb: Any, table_name: str
) -> None:
    arn = create(ddb, table_name)["TableArn"]
    by_arn = ddb.create_backup(TableName=arn, BackupName="by-arn")["BackupDetails"]
    assert by_arn["BackupArn"].startswith(arn + "/backup/")
    missing = table_name + "-missing"
    assert code_of(lambda: ddb.create_backup(TableName=missing, BackupName="b01")) == (
        "TableNotFoundException",
        f"Table not found: {missing}",
    )
    elsewhere = arn.replace("us-east-1", "eu-west-1")
    assert code_of(lambda: ddb.create_backup(TableName=elsewhere, BackupName="b01"))[0] == (
        "TableNotFoundException"
    )


def test_list_backups_filters_and_pages(ddb: Any, table_name: str, clock: Clock) -> None:
    clock.freeze(T0)
    create(ddb, table_name)
    other = table_name + "-other"
    create(ddb, other)
    arns = []
    for n in range(5):
        arns.append(
            ddb.create_backup(TableName=table_name, BackupName=f"b-{n}")["BackupDetails"][
                "BackupArn"
            ]
        )
        clock.advance(10)
    ddb.create_backup(TableName=other, BackupName="other")

    def listed(**kwargs: Any) -> list[str]:
        return [b["BackupArn"] for b in ddb.list_backups(**kwargs)["BackupSummaries"]]

    assert listed(TableName=table_name) == arns
    # The lower bound is inclusive, the upper one exclusive (T0 + 10 n is backup n's time).
    assert listed(TableName=table_name, TimeRangeLowerBound=T0 + 10) == arns[1:]
    assert listed(TableName=table_name, TimeRangeUpperBound=T0 + 30) == arns[:3]
    assert listed(
        TableName=table_name, TimeRangeLowerBound=T0 + 10, TimeRangeUpperBound=T0 + 20
    ) == [arns[1]]
    assert listed(TableName=table_name, BackupType="SYSTEM") == []
    assert listed(TableName=table_name, BackupType="ALL") == arns
    # Paging: LastEvaluatedBackupArn only while more remain.
    pages, start = [], None
    while True:
        kwargs: dict[str, Any] = {"TableName": table_name, "Limit": 2}
        if start is not None:
            kwargs["ExclusiveStartBackupArn"] = start
        page = ddb.list_backups(**kwargs)
        pages.append([b["BackupArn"] for b in page["BackupSummaries"]])
        start = page.get("LastEvaluatedBackupArn")
        if start is None:
            break
        assert start == pages[-1][-1]
    assert pages == [arns[:2], arns[2:4], arns[4:]]
    # A backup deleted between two pages does not stop the paging.
    ddb.delete_backup(BackupArn=arns[1])
    assert listed(TableName=table_name, ExclusiveStartBackupArn=arns[1]) == arns[2:]


def test_a_restore_from_backup_brings_back_the_items_and_indexes(ddb: Any, table_name: str) -> None:
    source = create(ddb, table_name)
    for n in range(30):
        ddb.put_item(TableName=table_name, Item=item(f"p{n % 3}", n, g=f"g{n % 2}", rank=n))
    ddb.put_item(TableName=table_name, Item=item("sparse", 1))  # in no index
    before = scan(ddb, table_name)
    arn = ddb.create_backup(TableName=table_name, BackupName="before")["BackupDetails"]["BackupArn"]
    ddb.delete_item(TableName=table_name, Key={"pk": {"S": "p0"}, "sk": {"N": "0"}})
    ddb.put_item(TableName=table_name, Item=item("later", 1, g="g0", rank=1))

    target = table_name + "-restored"
    restored = ddb.restore_table_from_backup(TargetTableName=target, BackupArn=arn)[
        "TableDescription"
    ]
    assert restored["TableName"] == target
    assert restored["TableArn"] == source["TableArn"].replace(table_name, target)
    assert restored["TableId"] != source["TableId"]
    assert restored["ItemCount"] == len(before) == 31
    summary = restored["RestoreSummary"]
    assert summary["SourceBackupArn"] == arn
    assert summary["SourceTableArn"] == source["TableArn"]
    assert summary["RestoreInProgress"] is False
    assert ddb.describe_table(TableName=target)["Table"]["RestoreSummary"] == summary
    assert scan(ddb, target) == before
    assert gsi_keys(ddb, target, "g0") == sorted((f"p{n % 3}", n) for n in range(30) if n % 2 == 0)
    assert lsi_keys(ddb, target, "p1") == list(range(1, 30, 3))
    gsi = restored["GlobalSecondaryIndexes"][0]
    assert gsi["IndexArn"].endswith(f"table/{target}/index/by-g")
    assert gsi["IndexStatus"] == "ACTIVE" and gsi["ItemCount"] == 30
    assert restored["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    # The restored table is a table like any other.
    ddb.put_item(TableName=target, Item=item("new", 1, g="g9", rank=1))
    assert gsi_keys(ddb, target, "g9") == [("new", 1)]
    assert code_of(
        lambda: ddb.restore_table_from_backup(TargetTableName=target, BackupArn=arn)
    ) == ("TableAlreadyExistsException", f"Table already exists: {target}")


def test_stream_ttl_tags_and_deletion_protection_are_not_restored(
    ddb: Any, table_name: str
) -> None:
    create(
        ddb,
        table_name,
        BillingMode="PROVISIONED",
        ProvisionedThroughput={"ReadCapacityUnits": 7, "WriteCapacityUnits": 8},
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        Tags=[{"Key": "team", "Value": "core"}],
        DeletionProtectionEnabled=True,
        TableClass="STANDARD_INFREQUENT_ACCESS",
    )
    ddb.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
    )
    ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    arn = ddb.create_backup(TableName=table_name, BackupName="full")["BackupDetails"]["BackupArn"]
    features = ddb.describe_backup(BackupArn=arn)["BackupDescription"]["SourceTableFeatureDetails"]
    assert features["StreamDescription"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert features["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "exp",
    }
    target = table_name + "-restored"
    table = ddb.restore_table_from_backup(TargetTableName=target, BackupArn=arn)["TableDescription"]
    assert "StreamSpecification" not in table and "LatestStreamArn" not in table
    assert table["DeletionProtectionEnabled"] is False
    assert table["TableClassSummary"] == {"TableClass": "STANDARD_INFREQUENT_ACCESS"}
    assert table["BillingModeSummary"]["BillingMode"] == "PROVISIONED"
    throughput = table["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (7, 8)
    gsi_throughput = table["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]
    assert (gsi_throughput["ReadCapacityUnits"], gsi_throughput["WriteCapacityUnits"]) == (3, 4)
    assert ddb.describe_time_to_live(TableName=target)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "DISABLED"
    }
    assert ddb.list_tags_of_resource(ResourceArn=table["TableArn"])["Tags"] == []
    recovery = ddb.describe_continuous_backups(TableName=target)["ContinuousBackupsDescription"]
    assert recovery["PointInTimeRecoveryDescription"] == {"PointInTimeRecoveryStatus": "DISABLED"}


def test_restore_overrides(ddb: Any, table_name: str) -> None:
    create(
        ddb,
        table_name,
        BillingMode="PROVISIONED",
        ProvisionedThroughput={"ReadCapacityUnits": 7, "WriteCapacityUnits": 8},
    )
    ddb.put_item(TableName=table_name, Item=item("a", 1, g="x", rank=2))
    arn = ddb.create_backup(TableName=table_name, BackupName="base")["BackupDetails"]["BackupArn"]

    on_demand = ddb.restore_table_from_backup(
        TargetTableName=table_name + "-od", BackupArn=arn, BillingModeOverride="PAY_PER_REQUEST"
    )["TableDescription"]
    assert on_demand["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert on_demand["ProvisionedThroughput"]["ReadCapacityUnits"] == 0

    bigger = ddb.restore_table_from_backup(
        TargetTableName=table_name + "-pt",
        BackupArn=arn,
        ProvisionedThroughputOverride={"ReadCapacityUnits": 20, "WriteCapacityUnits": 30},
    )["TableDescription"]
    assert bigger["ProvisionedThroughput"]["ReadCapacityUnits"] == 20
    assert bigger["ProvisionedThroughput"]["WriteCapacityUnits"] == 30

    # Indexes left out of the overrides are not restored, nor their attribute definitions.
    bare = ddb.restore_table_from_backup(
        TargetTableName=table_name + "-bare",
        BackupArn=arn,
        GlobalSecondaryIndexOverride=[],
        LocalSecondaryIndexOverride=[],
    )["TableDescription"]
    assert "GlobalSecondaryIndexes" not in bare and "LocalSecondaryIndexes" not in bare
    assert [d["AttributeName"] for d in bare["AttributeDefinitions"]] == ["pk", "sk"]
    assert bare["ItemCount"] == 1

    encrypted = ddb.restore_table_from_backup(
        TargetTableName=table_name + "-sse",
        BackupArn=arn,
        SSESpecificationOverride={"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": "k-1"},
    )["TableDescription"]
    assert encrypted["SSEDescription"] == {
        "Status": "ENABLED",
        "SSEType": "KMS",
        "KMSMasterKeyArn": "arn:aws:kms:us-east-1:000000000000:key/k-1",
    }
    # An override is checked as CreateTable checks its members.
    assert code_of(
        lambda: ddb.restore_table_from_backup(
            TargetTableName=table_name + "-bad",
            BackupArn=arn,
            BillingModeOverride="PAY_PER_REQUEST",
            ProvisionedThroughputOverride={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
        )
    ) == (
        "ValidationException",
        "One or more parameter values were invalid: Neither ReadCapacityUnits nor "
        "WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST",
    )
    assert ddb.list_tables()["TableNames"].count(table_name + "-bad") == 0


def test_deleting_a_table_with_recovery_on_leaves_a_system_backup(
    ddb: Any, table_name: str
) -> None:
    create(ddb, table_name)
    ddb.put_item(TableName=table_name, Item=item("a", 1, g="x", rank=1))
    ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    ddb.delete_table(TableName=table_name)
    assert ddb.list_backups(TableName=table_name)["BackupSummaries"] == []  # USER by default
    (system,) = ddb.list_backups(TableName=table_name, BackupType="SYSTEM")["BackupSummaries"]
    assert system["BackupType"] == "SYSTEM"
    assert system["BackupName"] == f"{table_name}$DeletedTableBackup"
    expiry = system["BackupExpiryDateTime"] - system["BackupCreationDateTime"]
    assert expiry.days == 35
    restored = ddb.restore_table_from_backup(
        TargetTableName=table_name, BackupArn=system["BackupArn"]
    )
    assert restored["TableDescription"]["ItemCount"] == 1
    # Without recovery, a deleted table leaves none.
    ddb.delete_table(TableName=table_name)
    summaries = ddb.list_backups(TableName=table_name, BackupType="ALL")["BackupSummaries"]
    assert [b["BackupArn"] for b in summaries] == [system["BackupArn"]]


# --- point-in-time recovery ------------------------------------------------------------------


def test_continuous_backups_are_described_and_switched(
    ddb: Any, table_name: str, clock: Clock
) -> None:
    create(ddb, table_name)
    off = ddb.describe_continuous_backups(TableName=table_name)["ContinuousBackupsDescription"]
    assert off == {
        "ContinuousBackupsStatus": "ENABLED",
        "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"},
    }
    clock.freeze(T0)
    on = ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    assert on["PointInTimeRecoveryStatus"] == "ENABLED"
    assert on["RecoveryPeriodInDays"] == 35
    assert on["EarliestRestorableDateTime"].timestamp() == T0
    assert on["LatestRestorableDateTime"].timestamp() == T0 - 300
    clock.advance(3600)
    later = ddb.describe_continuous_backups(TableName=table_name)["ContinuousBackupsDescription"]
    window = later["PointInTimeRecoveryDescription"]
    assert window["EarliestRestorableDateTime"].timestamp() == T0
    assert window["LatestRestorableDateTime"].timestamp() == T0 + 3600 - 300
    # A shorter period moves the earliest restorable time once it is older.
    clock.advance(3 * 86400)
    short = ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={
            "PointInTimeRecoveryEnabled": True,
            "RecoveryPeriodInDays": 1,
        },
    )["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    assert short["RecoveryPeriodInDays"] == 1
    now = T0 + 3600 + 3 * 86400
    assert short["EarliestRestorableDateTime"].timestamp() == now - 86400
    disabled = ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False},
    )["ContinuousBackupsDescription"]
    assert disabled["PointInTimeRecoveryDescription"] == {"PointInTimeRecoveryStatus": "DISABLED"}
    missing = table_name + "-missing"
    for call in (
        lambda: ddb.describe_continuous_backups(TableName=missing),
        lambda: ddb.update_continuous_backups(
            TableName=missing,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        ),
    ):
        assert code_of(call) == ("TableNotFoundException", f"Table not found: {missing}")


def test_a_point_in_time_restore_gives_the_table_as_it_was(
    ddb: Any, table_name: str, clock: Clock
) -> None:
    clock.freeze(T0)
    source = create(ddb, table_name)
    ddb.put_item(TableName=table_name, Item=item("a", 1, g="x", rank=1, v="before"))
    ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    states = {}
    clock.advance(10)  # T0 + 10: b added, a updated
    ddb.put_item(TableName=table_name, Item=item("b", 2, g="x", rank=2))
    ddb.update_item(
        TableName=table_name,
        Key={"pk": {"S": "a"}, "sk": {"N": "1"}},
        UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"S": "after"}},
    )
    states[15] = scan(ddb, table_name)
    clock.advance(10)  # T0 + 20: a deleted, c added, b moved out of the GSI
    ddb.delete_item(TableName=table_name, Key={"pk": {"S": "a"}, "sk": {"N": "1"}})
    ddb.put_item(TableName=table_name, Item=item("c", 3, g="y", rank=3))
    ddb.put_item(TableName=table_name, Item=item("b", 2, rank=2))
    states[25] = scan(ddb, table_name)
    clock.advance(10)  # T0 + 30: a back, with another value
    ddb.put_item(TableName=table_name, Item=item("a", 1, g="x", rank=1, v="again"))
    states[35] = scan(ddb, table_name)
    clock.advance(600)

    restored = {}
    for offset in (5, 15, 25, 35):
        target = f"{table_name}-at-{offset}"
        restored[offset] = ddb.restore_table_to_point_in_time(
            SourceTableName=table_name, TargetTableName=target, RestoreDateTime=T0 + offset
        )["TableDescription"]
        summary = restored[offset]["RestoreSummary"]
        assert summary["SourceTableArn"] == source["TableArn"]
        assert summary["RestoreDateTime"].timestamp() == T0 + offset
        assert "SourceBackupArn" not in summary
    assert scan(ddb, f"{table_name}-at-5") == [item("a", 1, g="x", rank=1, v="before")]
    for offset, state in states.items():
        assert scan(ddb, f"{table_name}-at-{offset}") == state
    assert gsi_keys(ddb, f"{table_name}-at-15", "x") == [("a", 1), ("b", 2)]
    assert gsi_keys(ddb, f"{table_name}-at-25", "x") == []
    assert lsi_keys(ddb, f"{table_name}-at-25", "c") == [3]
    # By ARN, to the latest restorable time (five minutes ago: all of it).
    latest = ddb.restore_table_to_point_in_time(
        SourceTableArn=source["TableArn"],
        TargetTableName=f"{table_name}-latest",
        UseLatestRestorableTime=True,
    )["TableDescription"]
    assert latest["RestoreSummary"]["RestoreDateTime"].timestamp() == T0 + 630 - 300
    assert scan(ddb, f"{table_name}-latest") == states[35]


def test_point_in_time_restore_refusals(ddb: Any, table_name: str, clock: Clock) -> None:
    clock.freeze(T0)
    create(ddb, table_name)
    target = table_name + "-r"

    def restore(**kwargs: Any) -> tuple[str, str]:
        return code_of(lambda: ddb.restore_table_to_point_in_time(TargetTableName=target, **kwargs))

    assert restore(SourceTableName=table_name, UseLatestRestorableTime=True) == (
        "PointInTimeRecoveryUnavailableException",
        f"Point in time recovery is not enabled for table '{table_name}'",
    )
    ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    # Five minutes must pass before the first restorable moment.
    assert restore(SourceTableName=table_name, UseLatestRestorableTime=True)[0] == (
        "InvalidRestoreTimeException"
    )
    clock.advance(3600)
    for moment in (T0 - 1, T0 + 3600 - 299):
        assert restore(SourceTableName=table_name, RestoreDateTime=moment) == (
            "InvalidRestoreTimeException",
            "RestoreDateTime must be between EarliestRestorableDateTime and "
            "LatestRestorableDateTime",
        )
    missing = table_name + "-missing"
    assert restore(SourceTableName=missing, UseLatestRestorableTime=True) == (
        "TableNotFoundException",
        f"Table not found: {missing}",
    )
    assert restore(UseLatestRestorableTime=True)[0] == "ValidationException"
    assert restore(SourceTableName=table_name)[0] == "ValidationException"
    assert (
        restore(SourceTableName=table_name, UseLatestRestorableTime=True, RestoreDateTime=T0 + 1)[0]
        == "ValidationException"
    )
    assert code_of(
        lambda: ddb.restore_table_to_point_in_time(
            SourceTableName=table_name,
            TargetTableName=table_name,
            RestoreDateTime=T0,
        )
    ) == ("TableAlreadyExistsException", f"Table already exists: {table_name}")
    # Switched off and on, the window starts again.
    ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False},
    )
    ddb.update_continuous_backups(
        TableName=table_name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    clock.advance(600)
    assert restore(SourceTableName=table_name, RestoreDateTime=T0 + 1)[0] == (
        "InvalidRestoreTimeException"
    )
    restored = ddb.restore_table_to_point_in_time(
        SourceTableName=table_name, TargetTableName=target, RestoreDateTime=T0 + 3600
    )
    assert restored["TableDescription"]["ItemCount"] == 0


# --- storage (in process) ----------------------------------------------------------------------


def test_history_grows_with_the_changes_and_is_trimmed(engine: Engine, make_ddb: Any) -> None:
    """One history row per change while recovery is on, none before or after it; rows older
    than the recovery period are dropped by the sweep hook, and a restore still sees the
    window."""
    assert engine.path is not None
    ddb = make_ddb("inprocess")
    engine.clock.freeze(T0)
    create(ddb, "hist")
    for n in range(50):  # before recovery: nothing recorded, nothing copied when it starts
        ddb.put_item(TableName="hist", Item=item("p", n, g="x"))

    def rows() -> int:
        with sqlite3.connect(engine.path) as conn:
            return int(conn.execute("SELECT count(*) FROM pitr_changes").fetchone()[0])

    ddb.update_continuous_backups(
        TableName="hist",
        PointInTimeRecoverySpecification={
            "PointInTimeRecoveryEnabled": True,
            "RecoveryPeriodInDays": 1,
        },
    )
    assert rows() == 0
    for n in range(10):
        ddb.put_item(TableName="hist", Item=item("p", n, g="y"))
    assert rows() == 10
    engine.clock.advance(2 * 86400)
    ddb.delete_item(TableName="hist", Key={"pk": {"S": "p"}, "sk": {"N": "0"}})
    engine.backups.purge(engine.clock.now())
    assert rows() == 1
    ddb.restore_table_to_point_in_time(
        SourceTableName="hist", TargetTableName="hist-r", RestoreDateTime=T0 + 86400 * 1.5
    )
    assert len(scan(ddb, "hist-r")) == 50
    assert gsi_keys(ddb, "hist-r", "y") == [("p", n) for n in range(10)]
    ddb.update_continuous_backups(
        TableName="hist",
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False},
    )
    assert rows() == 0
    ddb.put_item(TableName="hist", Item=item("p", 99))
    assert rows() == 0


def test_system_backups_expire(engine: Engine, make_ddb: Any) -> None:
    ddb = make_ddb("inprocess")
    engine.clock.freeze(T0)
    create(ddb, "gone")
    ddb.update_continuous_backups(
        TableName="gone", PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
    )
    ddb.delete_table(TableName="gone")
    assert len(ddb.list_backups(BackupType="SYSTEM")["BackupSummaries"]) == 1
    engine.clock.advance(35 * 86400 - 1)
    engine.backups.purge(engine.clock.now())
    assert len(ddb.list_backups(BackupType="SYSTEM")["BackupSummaries"]) == 1
    engine.clock.advance(1)
    engine.backups.purge(engine.clock.now())
    assert ddb.list_backups(BackupType="SYSTEM")["BackupSummaries"] == []


def test_the_operations_take_real_time_by_default(ddb: Any, table_name: str) -> None:
    create(ddb, table_name)
    details = ddb.create_backup(TableName=table_name, BackupName="now")["BackupDetails"]
    assert abs(details["BackupCreationDateTime"].timestamp() - time.time()) < 60
