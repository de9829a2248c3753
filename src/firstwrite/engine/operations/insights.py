"""Contributor Insights: Describe-, Update- and ListContributorInsights.

The state of a table's (and each GSI's) insights lives in the table definition (``_insights``:
``""`` for the table, or an index name -> ``{"Status", "Mode", "Created", "Updated"}``,
private: DescribeTable does not show it). An update answers ``ENABLING`` or ``DISABLING`` and
the state is ``ENABLED`` or ``DISABLED`` from then on (DynamoDB takes a moment; the engine none).
The rules DescribeContributorInsights lists are DynamoDB's four (``PKC``/``SKC``: most accessed
partition keys / items, ``PKT``/``SKT``: most throttled; the ``SK`` ones for keys with a sort
key). The top keys themselves are counted by the contributor insights feature
(``features/insights.py``), told of each change through the table hooks (action ``insights``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, resource_not_found
from ..storage import TableRow, Writer
from ..validation import TABLE_NAME, F, check

if TYPE_CHECKING:
    from ..context import Context

MODES = ("ACCESSED_AND_THROTTLED_KEYS", "THROTTLED_KEYS")
_INDEX = F("IndexName", min_len=3, max_len=255)
_DESCRIBE = (TABLE_NAME, _INDEX)
_UPDATE = (
    TABLE_NAME,
    _INDEX,
    F("ContributorInsightsAction", required=True, enum=("ENABLE", "DISABLE")),
    F("ContributorInsightsMode", enum=MODES),
)
_LIST = (
    F("TableName", min_len=1, max_len=1024),
    F("NextToken", kind="str"),
    F("MaxResults", kind="int", max=100),
)


def _row(ctx: Context, reader: Any, name: str, index: str | None) -> TableRow:
    row: TableRow | None = reader.table(ctx.region, name)
    if row is None:
        raise resource_not_found(f"Requested resource not found: Table: {name} not found")
    if index is not None and not any(
        i["IndexName"] == index for i in row.definition.get("GlobalSecondaryIndexes") or ()
    ):
        raise resource_not_found(f"Requested resource not found: Index: {index} not found")
    return row


def _rules(row: TableRow, index: str | None, created: float) -> list[str]:
    """DynamoDB's rule names: ``DynamoDBContributorInsights-<rule>-<table>[-<index>]-<ms>``."""
    schema = row.definition["KeySchema"]
    if index is not None:
        schema = next(
            i["KeySchema"]
            for i in row.definition.get("GlobalSecondaryIndexes") or ()
            if i["IndexName"] == index
        )
    kinds = ["PKC", "PKT"]
    if any(k["KeyType"] == "RANGE" for k in schema):
        kinds = ["PKC", "SKC", "PKT", "SKT"]
    scope = row.name if index is None else f"{row.name}-{index}"
    return [f"DynamoDBContributorInsights-{k}-{scope}-{int(created * 1000)}" for k in kinds]


def describe_contributor_insights(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _DESCRIBE)
    name, index = params["TableName"], params.get("IndexName")
    row = ctx.storage.read(lambda r: _row(ctx, r, name, index))
    state = (row.definition.get("_insights") or {}).get(index or "")
    out: dict[str, Any] = {"TableName": name}
    if index is not None:
        out["IndexName"] = index
    if state is None:
        out["ContributorInsightsStatus"] = "DISABLED"
        return out
    out["ContributorInsightsStatus"] = state["Status"]
    out["LastUpdateDateTime"] = state["Updated"]
    out["ContributorInsightsMode"] = state["Mode"]
    if state["Status"] == "ENABLED":
        out["ContributorInsightsRuleList"] = _rules(row, index, state["Created"])
    return out


def update_contributor_insights(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _UPDATE)
    name, index = params["TableName"], params.get("IndexName")
    enable = params["ContributorInsightsAction"] == "ENABLE"

    def write(w: Writer) -> dict[str, Any]:
        row = _row(ctx, w, name, index)
        states = dict(row.definition.get("_insights") or {})
        current: Mapping[str, Any] = states.get(index or "") or {}
        now = ctx.now()
        mode = params.get("ContributorInsightsMode") or current.get("Mode") or MODES[0]
        if enable:
            created = current.get("Created") if current.get("Status") == "ENABLED" else None
            states[index or ""] = {
                "Status": "ENABLED",
                "Mode": mode,
                "Created": created or now,
                "Updated": now,
            }
        elif current:
            states[index or ""] = {**current, "Status": "DISABLED", "Updated": now}
        definition = copy.deepcopy(row.definition)
        definition["_insights"] = states
        row = w.update_table(row, definition)
        for hook in ctx.engine.hooks.table_hooks:
            row = hook(ctx, w, row, "insights", params)
        out = {
            "TableName": name,
            "ContributorInsightsStatus": "ENABLING" if enable else "DISABLING",
        }
        if index is not None:
            out["IndexName"] = index
        out["ContributorInsightsMode"] = mode
        return out

    return ctx.storage.write(write)


def list_contributor_insights(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _LIST)
    wanted, token = params.get("TableName"), params.get("NextToken")
    limit = int(params.get("MaxResults") or 100)
    if limit < 1:
        raise DynamoDBError("ValidationException", "MaxResults must be at least 1")
    rows = ctx.storage.read(lambda r: r.tables(ctx.region))
    summaries: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: r.name):
        if wanted is not None and row.name != wanted:
            continue
        for scope, state in sorted((row.definition.get("_insights") or {}).items()):
            summary: dict[str, Any] = {"TableName": row.name}
            if scope:
                summary["IndexName"] = scope
            summary["ContributorInsightsStatus"] = state["Status"]
            summary["ContributorInsightsMode"] = state["Mode"]
            summaries.append(summary)
    start = int(token) if token is not None and str(token).isdigit() else 0
    page = summaries[start : start + limit]
    out: dict[str, Any] = {"ContributorInsightsSummaries": page}
    if start + limit < len(summaries):
        out["NextToken"] = str(start + limit)
    return out
