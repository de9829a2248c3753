"""Imports from S3: ImportTable, DescribeImport, ListImports.

ImportTable creates the table TableCreationParameters describe (CreateTable's checks and
messages, indexes included), then reads every object under ``S3BucketSource``'s bucket and
key prefix (gzip-compressed or not, as InputCompressionType says) in the InputFormat given:
DynamoDB JSON and Ion as exports write them, or CSV (:mod:`._itemformats`). The items are
written as BatchWriteItem writes them (indexes, streams and point-in-time history follow); a
line that is not an item of the table (unreadable, or without its key attributes of their
types) is counted in ErrorCount and skipped, as DynamoDB skips it. The S3 endpoint and
credentials are the AWS SDK's (``AWS_ENDPOINT_URL_S3``: see :mod:`.exports`).

Unlike DynamoDB, the import runs within the call and answers ``COMPLETED`` (``FAILED`` when S3
refuses, or for ZSTD input, which this engine cannot read); a ClientToken repeats the import it
names for 8 hours, and with other parameters is an ImportConflictException.
"""

from __future__ import annotations

import csv
import gzip
import io
import secrets
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError
from ..validation import F, check
from ..values import Item, parse_item
from ._itemformats import csv_items, ion_item, json_item
from .exports import TOKEN_WINDOW_S, _page, s3_client

if TYPE_CHECKING:
    from ..context import Context

BATCH = 25
_IMPORT = (
    F("ClientToken", kind="str"),
    F(
        "S3BucketSource",
        kind="struct",
        required=True,
        members=(
            F("S3BucketOwner", kind="str"),
            F("S3Bucket", required=True, max_len=255),
            F("S3KeyPrefix", max_len=1024),
        ),
    ),
    F("InputFormat", required=True, enum=("DYNAMODB_JSON", "ION", "CSV")),
    F("InputFormatOptions", kind="map"),
    F("InputCompressionType", enum=("GZIP", "ZSTD", "NONE")),
    F("TableCreationParameters", kind="map", required=True),
)
_DESCRIBE = (F("ImportArn", required=True, min_len=37, max_len=1024),)
_LIST = (
    F("TableArn", min_len=1, max_len=1024),
    F("PageSize", kind="int", min=1, max=25),
    F("NextToken", kind="str"),
)


def import_table(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _IMPORT)
    now = ctx.now()
    token = params.get("ClientToken")
    same = _repeated(ctx, token, now)
    if same is not None:
        return {"ImportTableDescription": same}
    creation = dict(params["TableCreationParameters"])
    created = ctx.engine.execute("CreateTable", creation, region=ctx.region)["TableDescription"]
    table_arn = created["TableArn"]
    import_arn = f"{table_arn}/import/{int(now * 1000):014d}-{secrets.token_hex(4)}"
    description: dict[str, Any] = {
        "ImportArn": import_arn,
        "ImportStatus": "COMPLETED",
        "TableArn": table_arn,
        "TableId": created.get("TableId"),
        "S3BucketSource": dict(params["S3BucketSource"]),
        "InputFormat": params["InputFormat"],
        "InputCompressionType": params.get("InputCompressionType") or "NONE",
        "TableCreationParameters": creation,
        "StartTime": now,
        "ErrorCount": 0,
        "ProcessedSizeBytes": 0,
        "ProcessedItemCount": 0,
        "ImportedItemCount": 0,
    }
    for member in ("ClientToken", "InputFormatOptions"):
        if params.get(member) is not None:
            description[member] = params[member]
    try:
        _load(ctx, created, description)
    except Exception as error:  # S3 refused, or input this engine cannot read
        code = getattr(error, "response", {}).get("Error", {}).get("Code") or type(error).__name__
        description.update(ImportStatus="FAILED", FailureCode=code, FailureMessage=str(error))
    description["EndTime"] = ctx.now()

    def record(w: Any) -> None:
        w.transfer_put(import_arn, "import", ctx.region, table_arn, token, now, description)

    ctx.storage.write(record)
    return {"ImportTableDescription": description}


def _repeated(ctx: Context, token: str | None, now: float) -> dict[str, Any] | None:
    if token is None:
        return None
    found: list[dict[str, Any]] = ctx.storage.read(
        lambda r: r.transfers("import", ctx.region, client_token=token)
    )
    for earlier in reversed(found):
        if now - float(earlier["StartTime"]) > TOKEN_WINDOW_S:
            continue
        params = ctx.params
        if (
            earlier["S3BucketSource"] != params["S3BucketSource"]
            or earlier["InputFormat"] != params["InputFormat"]
            or earlier["TableCreationParameters"] != params["TableCreationParameters"]
        ):
            raise DynamoDBError(
                "ImportConflictException",
                f"There was a conflict when importing from the specified S3 source: "
                f"ClientToken {token} was used with other parameters",
            )
        return dict(earlier)
    return None


def _load(ctx: Context, table: Mapping[str, Any], description: dict[str, Any]) -> None:
    """Read every object of the source and write its items: the counts into ``description``."""
    if description["InputCompressionType"] == "ZSTD":
        raise ValueError("ZSTD-compressed input is not read by this engine: use GZIP or NONE")
    source = description["S3BucketSource"]
    s3 = s3_client(ctx.region)
    keys = {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]}
    key_names = [k["AttributeName"] for k in table["KeySchema"]]
    pending: list[Item] = []
    for key in _object_keys(s3, source):
        body = s3.get_object(Bucket=source["S3Bucket"], Key=key)["Body"].read()
        description["ProcessedSizeBytes"] += len(body)
        if description["InputCompressionType"] == "GZIP" or key.endswith(".gz"):
            body = gzip.decompress(body)
        for found in _items(description, body.decode("utf-8"), keys):
            description["ProcessedItemCount"] += 1
            if isinstance(found, ValueError) or any(k not in found for k in key_names):
                description["ErrorCount"] += 1
                continue
            pending.append(found)
            if len(pending) == BATCH:
                _write(ctx, table["TableName"], pending, description)
                pending = []
    if pending:
        _write(ctx, table["TableName"], pending, description)


def _object_keys(s3: Any, source: Mapping[str, Any]) -> Iterator[str]:
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=source["S3Bucket"], Prefix=source.get("S3KeyPrefix", "")):
        for entry in page.get("Contents", ()):
            if not entry["Key"].endswith("/"):
                yield entry["Key"]


def _items(
    description: Mapping[str, Any], text: str, key_types: Mapping[str, str]
) -> Iterator[Item | ValueError]:
    fmt = description["InputFormat"]
    if fmt == "CSV":
        options = (description.get("InputFormatOptions") or {}).get("Csv") or {}
        rows = csv.reader(io.StringIO(text), delimiter=options.get("Delimiter") or ",")
        yield from csv_items(rows, options.get("HeaderList"), key_types)
        return
    if fmt == "ION":
        try:
            yield from ion_item(text)
        except ValueError as error:
            yield error
        return
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            yield parse_item(json_item(line), wire=True)
        except (ValueError, DynamoDBError) as error:
            yield ValueError(str(error))


def _write(ctx: Context, table: str, items: list[Item], description: dict[str, Any]) -> None:
    """Write a batch; a batch DynamoDB refuses whole (a key twice, a bad item) item by item."""
    try:
        ctx.engine.execute(
            "BatchWriteItem",
            {"RequestItems": {table: [{"PutRequest": {"Item": i}} for i in items]}},
            region=ctx.region,
        )
        description["ImportedItemCount"] += len(items)
        return
    except DynamoDBError:
        pass
    for item in items:
        try:
            ctx.engine.execute("PutItem", {"TableName": table, "Item": item}, region=ctx.region)
            description["ImportedItemCount"] += 1
        except DynamoDBError:
            description["ErrorCount"] += 1


def describe_import(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _DESCRIBE)
    arn = params["ImportArn"]
    found = ctx.storage.read(lambda r: r.transfer(arn))
    if found is None or "ImportStatus" not in found:
        raise DynamoDBError("ImportNotFoundException", f"Import not found: {arn}")
    return {"ImportTableDescription": found}


def list_imports(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _LIST)
    table = params.get("TableArn")
    found = ctx.storage.read(lambda r: r.transfers("import", ctx.region, table_arn=table))
    summaries = []
    for entry in found:
        summary: dict[str, Any] = {
            k: entry[k]
            for k in (
                "ImportArn",
                "ImportStatus",
                "TableArn",
                "S3BucketSource",
                "InputFormat",
                "StartTime",
                "EndTime",
            )
            if k in entry
        }
        summaries.append(summary)
    return _page(
        summaries, params.get("NextToken"), int(params.get("PageSize") or 25), "ImportSummaryList"
    )
