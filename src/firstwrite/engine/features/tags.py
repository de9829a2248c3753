"""Tags: the rules a table's tags follow, and CreateTable's ``Tags`` (a table hook).

Tags live in the table definition (``_tags``, private: DescribeTable does not show them). The
rules tags follow are the tagging operations' (``operations/tags.py``); CreateTable's ``Tags``
are checked by the same rules, from here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..context import Context, Feature
from ..errors import DynamoDBError
from ..operations.tags import check_tags, merge_tags
from ..storage import TableRow, Writer

if TYPE_CHECKING:
    from ..context import Host

__all__ = ["Tags"]


def _on_table(
    ctx: Context, w: Writer, row: TableRow, action: str, params: Mapping[str, Any]
) -> TableRow:
    if action != "create" or not params.get("Tags"):
        return row
    tags = row.definition.get("_tags") or []
    try:
        check_tags(tags)
        merged = merge_tags([], tags)
    except DynamoDBError:
        w.drop_table(row)  # created in this very transaction: a refused CreateTable leaves nothing
        raise
    if len(merged) == len(tags):
        return row
    definition = copy.deepcopy(row.definition)
    definition["_tags"] = merged  # a key given twice keeps its last value
    return w.update_table(row, definition)


class Tags(Feature):
    """``engine.tags``: checks CreateTable's ``Tags`` (installed before the streams feature's
    table hook, so a refused CreateTable creates no stream first)."""

    def install(self, engine: Host) -> None:
        engine.hooks.add_table_hook(_on_table)
