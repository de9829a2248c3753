"""Point-in-time recovery: its settings and RestoreTableToPointInTime.

UpdateContinuousBackups and DescribeContinuousBackups switch and describe it.

Point-in-time recovery is a table setting (``_pitr`` in its definition: since when, and the
recovery period in days). While it is on, the backups feature (``features/backups.py``) records
the pre-image of every change in the write's own transaction, so the table can be rebuilt as of
any instant of the window: from ``EarliestRestorableDateTime`` (when it was switched on, or the
recovery period ago) to ``LatestRestorableDateTime`` (five minutes before the engine clock's
now, as DynamoDB documents it). The restore itself is the one ``backups.py`` makes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, validation
from ..storage import Reader, Writer
from ..validation import TABLE_NAME_PATTERN, F, check
from .backups import (
    DAY_S,
    OVERRIDES,
    TABLE_REF,
    TARGET,
    instant_of,
    restore,
    restored_definition,
    table_ref,
)

if TYPE_CHECKING:
    from ..context import Context

__all__ = ["LATEST_LAG_S", "RECOVERY_DAYS"]

RECOVERY_DAYS = 35  # the default (and longest) recovery period
LATEST_LAG_S = 300.0  # LatestRestorableDateTime is five minutes before now

_RESTORE_TO_POINT = (
    F("SourceTableArn", min_len=1, max_len=1024),
    F("SourceTableName", min_len=3, max_len=255, pattern=TABLE_NAME_PATTERN),
    TARGET,
    F("UseLatestRestorableTime", kind="bool"),
    F("RestoreDateTime", kind="any"),
    *OVERRIDES,
)
_UPDATE_CONTINUOUS = (
    TABLE_REF,
    F(
        "PointInTimeRecoverySpecification",
        kind="struct",
        required=True,
        members=(
            F("PointInTimeRecoveryEnabled", kind="bool", required=True),
            F("RecoveryPeriodInDays", kind="int", min=1, max=RECOVERY_DAYS),
        ),
    ),
)
_TABLE_ONLY = (TABLE_REF,)


def _pitr_window(definition: Mapping[str, Any], now: float) -> tuple[float, float] | None:
    """(earliest, latest) restorable instants of a table, or ``None`` when recovery is off."""
    pitr = definition.get("_pitr")
    if pitr is None:
        return None
    earliest = max(float(pitr["since"]), now - pitr["days"] * DAY_S)
    if now < earliest:
        # The clock stands before recovery was switched on (moved back: a reset, a restart on
        # a wall clock set back): the window is one instant, its start, to which a restore is
        # accepted, rather than end before it starts (docs/engine.md's differences).
        return earliest, earliest
    return earliest, now - LATEST_LAG_S


def _continuous(definition: Mapping[str, Any], now: float) -> dict[str, Any]:
    """ContinuousBackupsDescription of a table (on-demand backups are always available)."""
    window = _pitr_window(definition, now)
    if window is None:
        recovery: dict[str, Any] = {"PointInTimeRecoveryStatus": "DISABLED"}
    else:
        recovery = {
            "PointInTimeRecoveryStatus": "ENABLED",
            "RecoveryPeriodInDays": definition["_pitr"]["days"],
            "EarliestRestorableDateTime": window[0],
            "LatestRestorableDateTime": window[1],
        }
    return {"ContinuousBackupsStatus": "ENABLED", "PointInTimeRecoveryDescription": recovery}


def restore_table_to_point_in_time(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _RESTORE_TO_POINT)
    target = params["TargetTableName"]
    at = instant_of(params, "RestoreDateTime")
    latest = bool(params.get("UseLatestRestorableTime"))
    ref = params.get("SourceTableArn") or params.get("SourceTableName")
    if ref is None:
        raise validation("Either SourceTableArn or SourceTableName must be specified")
    if params.get("SourceTableArn") is not None and params.get("SourceTableName") is not None:
        raise validation("Only one of SourceTableArn or SourceTableName may be specified")
    if at is not None and latest:
        raise validation("Only one of RestoreDateTime or UseLatestRestorableTime may be specified")
    if at is None and not latest:
        raise validation("Either RestoreDateTime or UseLatestRestorableTime must be specified")

    def write(w: Writer) -> dict[str, Any]:
        source_row = table_ref(ctx, w, ref)
        window = _pitr_window(source_row.definition, ctx.now())
        if window is None:
            raise DynamoDBError(
                "PointInTimeRecoveryUnavailableException",
                f"Point in time recovery is not enabled for table '{source_row.name}'",
            )
        instant = window[1] if at is None else at
        if not window[0] <= instant <= window[1]:
            raise DynamoDBError(
                "InvalidRestoreTimeException",
                "RestoreDateTime must be between EarliestRestorableDateTime and "
                "LatestRestorableDateTime",
            )
        source = source_row.definition
        request, definition = restored_definition(ctx, source, target, params)
        definition["RestoreSummary"] = {
            "SourceTableArn": source["TableArn"],
            "RestoreDateTime": instant,
            "RestoreInProgress": False,
        }
        return restore(
            ctx,
            w,
            request,
            definition,
            lambda table_id: w.pitr_restore_items(source_row.id, table_id, instant),
        )

    return {"TableDescription": ctx.storage.write(write, savepoint=True)}


# --- point-in-time recovery settings -------------------------------------------------------------


def update_continuous_backups(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _UPDATE_CONTINUOUS)
    spec = params["PointInTimeRecoverySpecification"]
    enabled = bool(spec["PointInTimeRecoveryEnabled"])
    days = spec.get("RecoveryPeriodInDays")

    def write(w: Writer) -> dict[str, Any]:
        row = table_ref(ctx, w, params["TableName"])
        definition = copy.deepcopy(row.definition)
        current = definition.get("_pitr")
        now = ctx.now()
        if enabled:
            pitr = dict(current) if current else {"since": now, "days": RECOVERY_DAYS}
            if days is not None:
                pitr["days"] = int(days)
            definition["_pitr"] = pitr
        else:
            definition.pop("_pitr", None)
            w.pitr_forget(row.id)
        if definition != row.definition:
            row = w.update_table(row, definition)
        return _continuous(row.definition, now)

    return {"ContinuousBackupsDescription": ctx.storage.write(write)}


def describe_continuous_backups(ctx: Context) -> dict[str, Any]:
    check(ctx.params, _TABLE_ONLY)

    def read(r: Reader) -> dict[str, Any]:
        row = table_ref(ctx, r, ctx.params["TableName"])
        return _continuous(row.definition, ctx.now())

    return {"ContinuousBackupsDescription": ctx.storage.read(read)}
