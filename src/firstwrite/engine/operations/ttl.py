"""Time to Live's operations: UpdateTimeToLive and DescribeTimeToLive.

The setting lives in the table definition (``_ttl``, with the time of the last change). Enabling
it queues a backfill of the expiry index for the items already there. UpdateTimeToLive runs the
table hooks (action ``ttl``) after its own checks and before any change: the TTL feature
(``features/ttl.py``) applies DynamoDB's change-interval rule there, keeps the index and deletes
expired items.
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
    hooks = ctx.engine.hooks

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
        for hook in hooks.table_hooks:
            row = hook(ctx, w, row, "ttl", params)
        definition = copy.deepcopy(row.definition)
        definition["_ttl_changed"] = ctx.now()
        w.ttl_drop_table(row.id)
        if enabled:
            definition["_ttl"] = {"AttributeName": attribute}
            w.ttl_backfill_set(row.id, attribute, None)
        else:
            definition.pop("_ttl", None)
        w.update_table(row, definition)

    ctx.storage.write(write)
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
