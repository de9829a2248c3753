"""On-demand backups: the backup operations, and what every restore shares.

CreateBackup, DescribeBackup, ListBackups, DeleteBackup and RestoreTableFromBackup; the
point-in-time operations are ``pitr.py``'s.

* A backup is a consistent copy of the table's items and of its definition, made in one write
  transaction (``storage/backups.py``); it is ``AVAILABLE`` as soon as CreateBackup returns.
  Deleting a table with point-in-time recovery on leaves a SYSTEM backup of it
  (``features/backups.py``), kept 35 days.
* A restore makes a new table, ``ACTIVE`` when the call returns (DynamoDB restores in the
  background), with the source's key schema, indexes, billing mode, throughput and encryption,
  each overridable; stream, TTL, tags, point-in-time recovery and deletion protection are not
  restored, as on DynamoDB. Its DescribeTable shows a ``RestoreSummary``.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import secrets
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, serialization
from ..index_definitions import GSI_MEMBERS, LSI_MEMBERS, THROUGHPUT
from ..item_keys import index_entry
from ..storage import BackupRow, Reader, TableRow, Writer
from ..validation import TABLE_NAME_PATTERN, F, check
from .tables import create_in, describe, new_definition

if TYPE_CHECKING:
    from ..context import Context

__all__ = [
    "DAY_S",
    "OVERRIDES",
    "SYSTEM_BACKUP_DAYS",
    "TABLE_REF",
    "TARGET",
    "instant_of",
    "restore",
    "restored_definition",
    "system_backup",
    "table_ref",
]

DAY_S = 86400.0
SYSTEM_BACKUP_DAYS = 35  # how long the backup of a deleted table with recovery on is kept

TABLE_REF = F("TableName", required=True, min_len=1, max_len=1024)  # a name, or an ARN
_BACKUP_ARN = F("BackupArn", required=True, min_len=37, max_len=1024)
TARGET = F("TargetTableName", required=True, min_len=3, max_len=255, pattern=TABLE_NAME_PATTERN)
OVERRIDES = (
    F("BillingModeOverride", enum=("PROVISIONED", "PAY_PER_REQUEST")),
    F("GlobalSecondaryIndexOverride", kind="list", members=GSI_MEMBERS),
    F("LocalSecondaryIndexOverride", kind="list", members=LSI_MEMBERS),
    dataclasses.replace(THROUGHPUT, name="ProvisionedThroughputOverride"),
    F(
        "SSESpecificationOverride",
        kind="struct",
        members=(
            F("Enabled", kind="bool"),
            F("SSEType", enum=("AES256", "KMS")),
            F("KMSMasterKeyId"),
        ),
    ),
)
_CREATE_BACKUP = (
    TABLE_REF,
    F("BackupName", required=True, min_len=3, max_len=255, pattern=TABLE_NAME_PATTERN),
)
_BACKUP_ONLY = (_BACKUP_ARN,)
_LIST_BACKUPS = (
    F("TableName", min_len=1, max_len=1024),
    F("Limit", kind="int", min=1, max=100),
    F("TimeRangeLowerBound", kind="any"),
    F("TimeRangeUpperBound", kind="any"),
    F("ExclusiveStartBackupArn", min_len=37, max_len=1024),
    F("BackupType", enum=("USER", "SYSTEM", "AWS_BACKUP", "ALL")),
)
_RESTORE_FROM_BACKUP = (TARGET, _BACKUP_ARN, *OVERRIDES)
_TABLE_ARN = re.compile(
    r"arn:aws[a-z-]*:dynamodb:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"table/(?P<table>[a-zA-Z0-9_.-]{3,255})\Z"
)


# --- messages ------------------------------------------------------------------------------------
# moto's (moto/dynamodb/exceptions.py): TableNotFoundException, BackupNotFoundException,
# TableAlreadyExistsException, PointInTimeRecoveryUnavailableException.


def _table_not_found(ref: str) -> DynamoDBError:
    return DynamoDBError("TableNotFoundException", f"Table not found: {ref}")


def _backup_not_found(arn: str) -> DynamoDBError:
    return DynamoDBError("BackupNotFoundException", f"Backup not found: {arn}")


def _already_exists(name: str) -> DynamoDBError:
    return DynamoDBError("TableAlreadyExistsException", f"Table already exists: {name}")


# --- helpers -------------------------------------------------------------------------------------


def instant_of(params: Mapping[str, Any], member: str) -> float | None:
    """A timestamp member: epoch seconds, as the JSON protocol sends them."""
    value = params.get(member)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise serialization("Unexpected field type")
    return float(value)


def table_ref(ctx: Context, reader: Reader, ref: str) -> TableRow:
    """The table a ``TableName`` member names: by name, or by its ARN in this account and
    region; TableNotFoundException otherwise."""
    name: str | None = ref
    if ref.startswith("arn:"):
        match = _TABLE_ARN.match(ref)
        name = None
        if match and match["region"] == ctx.region and match["account"] == ctx.engine.account_id:
            name = match["table"]
    row = None if name is None else reader.table(ctx.region, name)
    if row is None:
        raise _table_not_found(ref)
    return row


def _require_backup(ctx: Context, reader: Reader, arn: str) -> BackupRow:
    backup = reader.backup(arn)
    if backup is None or backup.region != ctx.region:
        raise _backup_not_found(arn)
    return backup


def _public(definition: Mapping[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in definition.items() if not k.startswith("_")}


def _billing(definition: Mapping[str, Any]) -> str:
    return str((definition.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED"))


def _rw(throughput: Mapping[str, Any]) -> dict[str, int]:
    return {
        "ReadCapacityUnits": int(throughput["ReadCapacityUnits"]),
        "WriteCapacityUnits": int(throughput["WriteCapacityUnits"]),
    }


def _index_input(index: Mapping[str, Any], *, throughput: bool) -> dict[str, Any]:
    """An index description as CreateTable's input takes it."""
    out: dict[str, Any] = {
        "IndexName": index["IndexName"],
        "KeySchema": copy.deepcopy(index["KeySchema"]),
        "Projection": copy.deepcopy(index["Projection"]),
    }
    if throughput and index.get("ProvisionedThroughput") is not None:
        out["ProvisionedThroughput"] = _rw(index["ProvisionedThroughput"])
    return out


# --- backups -------------------------------------------------------------------------------------


def _make_backup(
    ctx: Context, w: Writer, row: TableRow, name: str, kind: str, keep_s: float | None
) -> BackupRow:
    now = ctx.now()
    expires = None if keep_s is None else now + keep_s
    definition = row.definition
    count, size = w.table_stats(row.id)
    arn = f"{definition['TableArn']}/backup/{int(now * 1000):014d}-{secrets.token_hex(4)}"
    details: dict[str, Any] = {
        "BackupArn": arn,
        "BackupName": name,
        "BackupSizeBytes": size,
        "BackupStatus": "AVAILABLE",
        "BackupType": kind,
        "BackupCreationDateTime": now,
    }
    if expires is not None:
        details["BackupExpiryDateTime"] = expires
    billing = _billing(definition)
    source: dict[str, Any] = {
        "TableName": row.name,
        "TableId": definition["TableId"],
        "TableArn": definition["TableArn"],
        "TableSizeBytes": size,
        "KeySchema": copy.deepcopy(definition["KeySchema"]),
        "TableCreationDateTime": definition["CreationDateTime"],
        "ProvisionedThroughput": _rw(definition["ProvisionedThroughput"]),
        "ItemCount": count,
        "BillingMode": billing,
    }
    features: dict[str, Any] = {}
    for member in ("LocalSecondaryIndexes", "GlobalSecondaryIndexes"):
        if definition.get(member):
            features[member] = [
                _index_input(i, throughput=billing == "PROVISIONED") for i in definition[member]
            ]
    if definition.get("StreamSpecification"):
        features["StreamDescription"] = copy.deepcopy(definition["StreamSpecification"])
    ttl = definition.get("_ttl")
    features["TimeToLiveDescription"] = (
        {"TimeToLiveStatus": "ENABLED", "AttributeName": ttl["AttributeName"]}
        if ttl
        else {"TimeToLiveStatus": "DISABLED"}
    )
    if definition.get("SSEDescription"):
        features["SSEDescription"] = copy.deepcopy(definition["SSEDescription"])
    description = {
        "BackupDetails": details,
        "SourceTableDetails": source,
        "SourceTableFeatureDetails": features,
        "_definition": _public(definition),
    }
    backup_id = w.backup_create(row.id, arn, ctx.region, row.name, kind, now, expires, description)
    return BackupRow(backup_id, arn, ctx.region, row.name, kind, now, expires, description)


def system_backup(ctx: Context, w: Writer, row: TableRow) -> BackupRow:
    """The SYSTEM backup DynamoDB keeps of a deleted table that had point-in-time recovery on
    (made in DeleteTable's transaction, kept for :data:`SYSTEM_BACKUP_DAYS`)."""
    name = f"{row.name}$DeletedTableBackup"
    return _make_backup(ctx, w, row, name, "SYSTEM", SYSTEM_BACKUP_DAYS * DAY_S)


def _described(backup: BackupRow) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in backup.description.items() if not k.startswith("_")}


def create_backup(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _CREATE_BACKUP)

    def write(w: Writer) -> dict[str, Any]:
        row = table_ref(ctx, w, params["TableName"])
        backup = _make_backup(ctx, w, row, params["BackupName"], "USER", None)
        details: dict[str, Any] = copy.deepcopy(backup.description["BackupDetails"])
        return details

    return {"BackupDetails": ctx.storage.write(write)}


def describe_backup(ctx: Context) -> dict[str, Any]:
    check(ctx.params, _BACKUP_ONLY)
    arn = ctx.params["BackupArn"]
    backup = ctx.storage.read(lambda r: _require_backup(ctx, r, arn))
    return {"BackupDescription": _described(backup)}


def delete_backup(ctx: Context) -> dict[str, Any]:
    check(ctx.params, _BACKUP_ONLY)
    arn = ctx.params["BackupArn"]

    def write(w: Writer) -> BackupRow:
        backup = _require_backup(ctx, w, arn)
        w.backup_delete(backup.id)
        return backup

    described = _described(ctx.storage.write(write))
    described["BackupDetails"]["BackupStatus"] = "DELETED"
    return {"BackupDescription": described}


def _arn_position(arn: str) -> tuple[float, str]:
    """Where a backup ARN sorts in ListBackups' order, from the creation time it carries (so
    paging goes on past a backup deleted between two pages)."""
    match = re.search(r"/backup/(\d+)-[0-9a-f]+\Z", arn)
    return (int(match[1]) / 1000.0 if match else 0.0), arn


def list_backups(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _LIST_BACKUPS)
    lower = instant_of(params, "TimeRangeLowerBound")
    upper = instant_of(params, "TimeRangeUpperBound")
    kind = params.get("BackupType") or "USER"
    limit = params.get("Limit")
    table = params.get("TableName")
    if table is not None and table.startswith("arn:"):
        match = _TABLE_ARN.match(table)
        table = match["table"] if match else None
    start = params.get("ExclusiveStartBackupArn")
    after = None if start is None else _arn_position(start)
    selected = []
    for backup in ctx.storage.read(lambda r: r.backups(ctx.region)):
        if "TableName" in params and backup.table_name != table:
            continue
        if kind != "ALL" and backup.kind != kind:
            continue
        if lower is not None and backup.created_at < lower:  # the lower bound is inclusive
            continue
        if upper is not None and backup.created_at >= upper:  # the upper one exclusive
            continue
        position = (int(backup.created_at * 1000) / 1000.0, backup.arn)
        if after is not None and position <= after:
            continue
        selected.append((position, backup))
    selected.sort(key=lambda entry: entry[0])
    page = selected if limit is None else selected[: int(limit)]
    summaries = []
    for _position, backup in page:
        details = backup.description["BackupDetails"]
        source = backup.description["SourceTableDetails"]
        summary = {
            "TableName": backup.table_name,
            "TableId": source["TableId"],
            "TableArn": source["TableArn"],
            **{k: v for k, v in details.items()},
        }
        summaries.append(summary)
    out: dict[str, Any] = {"BackupSummaries": summaries}
    if len(page) < len(selected):
        out["LastEvaluatedBackupArn"] = page[-1][1].arn
    return out


# --- restores ------------------------------------------------------------------------------------


def restored_definition(
    ctx: Context, source: Mapping[str, Any], target: str, params: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The CreateTable request a restore amounts to, from the source table's definition and the
    call's overrides, and the definition it makes (CreateTable's rules and messages)."""
    billing = params.get("BillingModeOverride") or _billing(source)
    provisioned = billing == "PROVISIONED"
    request: dict[str, Any] = {
        "TableName": target,
        "KeySchema": copy.deepcopy(source["KeySchema"]),
        "BillingMode": billing,
    }
    throughput = params.get("ProvisionedThroughputOverride")
    if throughput is not None:
        request["ProvisionedThroughput"] = _rw(throughput)
    elif provisioned and _billing(source) == "PROVISIONED":
        request["ProvisionedThroughput"] = _rw(source["ProvisionedThroughput"])
    lsis = params.get("LocalSecondaryIndexOverride")
    if lsis is None:
        lsis = [_index_input(i, throughput=False) for i in source.get("LocalSecondaryIndexes", ())]
    gsis = params.get("GlobalSecondaryIndexOverride")
    if gsis is None:
        gsis = [
            _index_input(i, throughput=provisioned)
            for i in source.get("GlobalSecondaryIndexes", ())
        ]
        if provisioned and "ProvisionedThroughput" in request:
            for index in gsis:  # a switch to PROVISIONED gives the indexes the table's
                index.setdefault("ProvisionedThroughput", dict(request["ProvisionedThroughput"]))
    if lsis:
        request["LocalSecondaryIndexes"] = copy.deepcopy(list(lsis))
    if gsis:
        request["GlobalSecondaryIndexes"] = copy.deepcopy(list(gsis))
    used = {k["AttributeName"] for k in request["KeySchema"]}
    for index in [*lsis, *gsis]:
        used.update(k["AttributeName"] for k in index["KeySchema"])
    request["AttributeDefinitions"] = [
        copy.deepcopy(d) for d in source["AttributeDefinitions"] if d["AttributeName"] in used
    ]
    if source.get("TableClassSummary"):
        request["TableClass"] = source["TableClassSummary"]["TableClass"]
    definition = new_definition(ctx, request)
    sse = params.get("SSESpecificationOverride")
    if sse is not None:
        if sse.get("Enabled"):
            key = sse.get("KMSMasterKeyId")
            if not key:
                key = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{ctx.engine.account_id}/aws/dynamodb"))
            if not key.startswith("arn:"):
                key = f"arn:aws:kms:{ctx.region}:{ctx.engine.account_id}:key/{key}"
            definition["SSEDescription"] = {
                "Status": "ENABLED",
                "SSEType": "KMS",
                "KMSMasterKeyArn": key,
            }
    elif source.get("SSEDescription"):
        definition["SSEDescription"] = copy.deepcopy(source["SSEDescription"])
    return request, definition


def restore(
    ctx: Context,
    w: Writer,
    request: Mapping[str, Any],
    definition: dict[str, Any],
    fill: Callable[[int], None],
) -> dict[str, Any]:
    """Create the restored table in ``w``'s transaction, ``fill`` its items, index them."""
    target = definition["TableName"]
    if w.table(ctx.region, target) is not None:
        raise _already_exists(target)
    row = create_in(ctx, w, definition, request)
    fill(row.id)
    for index in row.indexes:
        for _pk, _sk, _size, item in w.scan_from(row.id):
            entry = index_entry(row.key_schema, index, item)
            if entry is not None:
                w.index_put(index.id, *entry)
    return describe(w, row)


def restore_table_from_backup(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _RESTORE_FROM_BACKUP)
    target = params["TargetTableName"]

    def write(w: Writer) -> dict[str, Any]:
        backup = _require_backup(ctx, w, params["BackupArn"])
        source = backup.description["_definition"]
        request, definition = restored_definition(ctx, source, target, params)
        definition["RestoreSummary"] = {
            "SourceBackupArn": backup.arn,
            "SourceTableArn": source["TableArn"],
            "RestoreDateTime": backup.created_at,
            "RestoreInProgress": False,
        }
        return restore(
            ctx,
            w,
            request,
            definition,
            lambda table_id: w.backup_restore_items(backup.id, table_id),
        )

    return {"TableDescription": ctx.storage.write(write, savepoint=True)}
