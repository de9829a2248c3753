"""Tags: the rules a table's tags follow, and CreateTable's ``Tags`` (a table hook).

Tags live in the table definition (``_tags``, private: DescribeTable does not show them). The
tagging operations are in ``operations/tags.py``; both they and CreateTable check tags here.
"""

from __future__ import annotations

import copy
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..context import Context, Feature
from ..errors import DynamoDBError, invalid_parameters
from ..storage import TableRow, Writer

if TYPE_CHECKING:
    from ..api import Engine

__all__ = ["MAX_TAGS", "Tags", "check_tags", "merge_tags"]

MAX_TAGS = 50
# Tag keys and values: Unicode letters, separators and digits, and _ . : / = + - @ (AWS's
# ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$, which Python's re cannot spell).
_TAG_PUNCTUATION = frozenset("_.:/=+-@")


def _valid_tag_text(text: str) -> bool:
    return all(c in _TAG_PUNCTUATION or unicodedata.category(c)[0] in ("L", "Z", "N") for c in text)


def check_tags(tags: list[dict[str, str]]) -> None:
    for tag in tags:
        key, value = tag["Key"], tag["Value"]
        if not _valid_tag_text(key) or not _valid_tag_text(value):
            raise invalid_parameters(
                "Invalid tag: tag keys and values may contain only Unicode letters, digits, "
                f"white space and _ . : / = + - @. Key: {key}"
            )
        if key.lower().startswith("aws:"):
            raise invalid_parameters(f"The tag key prefix 'aws:' is reserved. Key: {key}")


def merge_tags(current: list[dict[str, str]], new: list[dict[str, str]]) -> list[dict[str, str]]:
    """Tags after adding ``new`` (a key given again takes its new value); at most 50."""
    tags = {t["Key"]: t["Value"] for t in current}
    for tag in new:
        tags[tag["Key"]] = tag["Value"]
    if len(tags) > MAX_TAGS:
        raise invalid_parameters(
            f"The number of tags on a resource cannot exceed {MAX_TAGS}: "
            f"the request would make {len(tags)}"
        )
    return [{"Key": k, "Value": v} for k, v in tags.items()]


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

    def install(self, engine: Engine) -> None:
        engine.add_table_hook(_on_table)
