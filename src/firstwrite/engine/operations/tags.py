"""Tagging: TagResource, UntagResource, ListTagsOfResource (tables, by ARN).

Tags live in the table definition (``_tags``, private: DescribeTable does not show them); the
rules they follow are here; CreateTable's ``Tags`` are the tags feature's (``features/tags.py``).
Unlike DynamoDB since 2024, tag changes are synchronous: ListTagsOfResource sees them at once.
"""

from __future__ import annotations

import copy
import re
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, invalid_parameters, validation
from ..storage import Reader, TableRow, Writer
from ..validation import F, check

if TYPE_CHECKING:
    from ..context import Context

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


# Tags per ListTagsOfResource page. DynamoDB returns all of a table's (at most 50) tags in one
# page in practice; NextToken paging still works if this is lowered.
PAGE_SIZE = 50

_TABLE_ARN = re.compile(
    r"arn:aws[a-z-]*:dynamodb:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"table/(?P<table>[a-zA-Z0-9_.-]{3,255})\Z"
)
_ARN = F("ResourceArn", required=True, min_len=1, max_len=1283)
_TAG = F(
    "Tags",
    kind="list",
    required=True,
    members=(
        F("Key", required=True, min_len=1, max_len=128),
        F("Value", required=True, min_len=0, max_len=256),
    ),
)
_TAG_RESOURCE = (_ARN, _TAG)
_UNTAG_RESOURCE = (_ARN, F("TagKeys", kind="list", required=True, element="str"))
_LIST = (_ARN, F("NextToken", kind="str"))


def _checked(params: Mapping[str, Any], members: tuple[F, ...]) -> re.Match[str]:
    """The request's checks in DynamoDB's order (dynalite's validations/*Resource.js and their
    tests, recorded against DynamoDB): no ResourceArn at all, the members' constraints, then
    the ARN's form; the table ARN's parts."""
    if params.get("ResourceArn") is None:
        raise validation("Invalid TableArn")
    check(params, members)
    arn = params["ResourceArn"]
    if not arn.startswith("arn:"):
        # DynamoDB's answer since about 2023 (older ones were an AccessDeniedException, as
        # dynalite recorded): tests/engine/features/test_tags.py names the sources.
        raise invalid_parameters(f"ARNs must start with 'arn:': {arn}")
    match = _TABLE_ARN.match(arn)
    if match is None:
        raise validation(f"Invalid TableArn: Invalid ResourceArn provided as input {arn}")
    return match


def _require_table(ctx: Context, reader: Reader, arn: str) -> TableRow:
    match = _TABLE_ARN.match(arn)
    assert match is not None  # _checked
    row = None
    if match["region"] == ctx.region and match["account"] == ctx.engine.account_id:
        row = reader.table(ctx.region, match["table"])
    if row is None:
        raise DynamoDBError(
            "ResourceNotFoundException",
            f"Requested resource not found: ResourcArn: {arn} not found",
        )
    return row


def tag_resource(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    _checked(params, _TAG_RESOURCE)
    tags = [{"Key": t["Key"], "Value": t["Value"]} for t in params["Tags"]]
    if not tags:
        raise validation("Atleast one Tag needs to be provided as Input.")
    check_tags(tags)

    def write(w: Writer) -> None:
        row = _require_table(ctx, w, params["ResourceArn"])
        definition = copy.deepcopy(row.definition)
        definition["_tags"] = merge_tags(definition.get("_tags") or [], tags)
        w.update_table(row, definition)

    ctx.storage.write(write)
    return {}


def untag_resource(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    _checked(params, _UNTAG_RESOURCE)
    keys = set(params["TagKeys"])
    if not keys:
        raise validation("Atleast one Tag Key needs to be provided as Input.")
    for key in keys:
        if not 1 <= len(key) <= 128:
            raise invalid_parameters(f"Tag key length must be between 1 and 128: {key}")

    def write(w: Writer) -> None:
        row = _require_table(ctx, w, params["ResourceArn"])
        current = row.definition.get("_tags") or []
        kept = [t for t in current if t["Key"] not in keys]
        if len(kept) != len(current):  # removing absent keys is legal and changes nothing
            definition = copy.deepcopy(row.definition)
            definition["_tags"] = kept
            w.update_table(row, definition)

    ctx.storage.write(write)
    return {}


def list_tags_of_resource(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    _checked(params, _LIST)
    token = params.get("NextToken")
    row = ctx.storage.read(lambda r: _require_table(ctx, r, params["ResourceArn"]))
    # Key order makes NextToken (the last key returned) stable across tag changes.
    tags = sorted(row.definition.get("_tags") or [], key=lambda t: t["Key"])
    if token is not None:
        tags = [t for t in tags if t["Key"] > token]
    page = tags[:PAGE_SIZE]
    out: dict[str, Any] = {"Tags": copy.deepcopy(page)}
    if len(tags) > PAGE_SIZE:
        out["NextToken"] = page[-1]["Key"]
    return out
