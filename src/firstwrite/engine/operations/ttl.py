"""Time to Live's operations: UpdateTimeToLive and DescribeTimeToLive.

The setting lives in the table definition (``_ttl``, with the time of the last change for
DynamoDB's change-interval rule). Enabling it queues a backfill of the expiry index for the
items already there; the TTL feature (``engine/features/ttl.py``, ``engine.ttl``) keeps that index and
deletes expired items.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from ..errors import validation
from ..storage import Reader, Writer
from ..validation import TABLE_NAME, F, check
from .tables import require_table

if TYPE_CHECKING:
    from ..context import Context

_CHANGED_TOO_OFTEN = "Time to live has been modified multiple times within a fixed interval"
_UPDATE = (
    TABLE_NAME,
    F(
        "TimeToLiveSpecification",
        kind="struct",
        required=True,
        members=(
            F("Enabled", kind="bool", required=True),
            F("AttributeName", required=True, min_len=1, max_len=255),
        ),
    ),
)
_DESCRIBE = (TABLE_NAME,)


def _different(current: str) -> str:
    return f"TimeToLive is active on a different AttributeName: current AttributeName is {current}"


def update_time_to_live(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _UPDATE)
    name = params["TableName"]
    spec = params["TimeToLiveSpecification"]
    enabled = bool(spec["Enabled"])
    attribute = spec["AttributeName"]
    ttl = ctx.engine.ttl
    interval = ttl.config.change_interval

    def write(w: Writer) -> None:
        row = require_table(ctx, w, name, control_plane=True)
        current = row.definition.get("_ttl")
        # Every check before the first change (storage's rule for write functions).
        if enabled and current is not None:
            if current["AttributeName"] == attribute:
                raise validation("TimeToLive is already enabled")
            raise validation(_different(current["AttributeName"]))
        if not enabled:
            if current is None:
                raise validation("TimeToLive is already disabled")
            if current["AttributeName"] != attribute:
                raise validation(_different(current["AttributeName"]))
        now = ctx.now()
        changed = row.definition.get("_ttl_changed")
        if interval is not None and changed is not None and now - changed < interval:
            raise validation(_CHANGED_TOO_OFTEN)
        definition = copy.deepcopy(row.definition)
        definition["_ttl_changed"] = now
        w.ttl_drop_table(row.id)
        if enabled:
            definition["_ttl"] = {"AttributeName": attribute}
            w.ttl_backfill_set(row.id, attribute, None)
        else:
            definition.pop("_ttl", None)
        w.update_table(row, definition)

    ctx.storage.write(write)
    if enabled:
        ttl.wake()  # build the index of the existing items soon, not a tick later
    return {"TimeToLiveSpecification": {"Enabled": enabled, "AttributeName": attribute}}


def describe_time_to_live(ctx: Context) -> dict[str, Any]:
    check(ctx.params, _DESCRIBE, name_first=True)
    name = ctx.params["TableName"]

    def read(r: Reader) -> dict[str, Any]:
        row = require_table(ctx, r, name, control_plane=True)
        current = row.definition.get("_ttl")
        if current is None:
            return {"TimeToLiveStatus": "DISABLED"}
        return {"TimeToLiveStatus": "ENABLED", "AttributeName": current["AttributeName"]}

    return {"TimeToLiveDescription": ctx.storage.read(read)}
