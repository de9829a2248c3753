"""CreateTable's ``ResourcePolicy``: the table's resource-based policy, set at creation.

The policy document is checked and stored as PutResourcePolicy stores it
(``operations/policies.py``), in the CreateTable transaction: a refused policy leaves no table.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..context import Context, Feature
from ..errors import DynamoDBError
from ..operations.policies import new_revision, policy_statements
from ..storage import TableRow, Writer

if TYPE_CHECKING:
    from ..context import Host

__all__ = ["ResourcePolicies"]


def _on_table(
    ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
) -> TableRow:
    document = params.get("ResourcePolicy")
    if action != "create" or document is None:
        return row
    try:
        if not isinstance(document, str):
            raise DynamoDBError("ValidationException", "ResourcePolicy is a policy document")
        policy_statements(document)
    except DynamoDBError:
        w.drop_table(row)  # created in this very transaction: a refused CreateTable leaves nothing
        raise
    definition = copy.deepcopy(row.definition)
    arn = definition["TableArn"]
    definition["_policies"] = {arn: {"Policy": document, "RevisionId": new_revision(ctx, None)}}
    return w.update_table(row, definition)


class ResourcePolicies(Feature):
    """``engine.policies``: CreateTable's ``ResourcePolicy`` (a table hook)."""

    def install(self, engine: Host) -> None:
        engine.hooks.add_table_hook(_on_table)
