"""Exports to S3: ExportTableToPointInTime, DescribeExport, ListExports.

A full export writes the table as it was at ``ExportTime`` (default: now), read from the
point-in-time history the engine keeps (``storage/backups.py``), to the S3 bucket named, laid
out as the developer guide's "DynamoDB table export output format" describes:
``<S3Prefix>/AWSDynamoDB/<ExportId>/`` holds ``_started``, ``data/<name>.json.gz`` (or
``.ion.gz``: gzip, one item a line, :mod:`._itemformats`), ``manifest-files.json`` (one JSON line
a data file: itemCount, md5Checksum, etag, dataFileS3Key), ``manifest-summary.json`` and a
``.checksum`` beside each manifest (its MD5, hex). The S3 endpoint is the AWS SDK's: the
environment's ``AWS_ENDPOINT_URL_S3`` (or ``AWS_ENDPOINT_URL``) names any S3-API server, and
its credentials are the SDK's usual ones.

Unlike DynamoDB, the export runs within the call: it answers ``COMPLETED`` (or ``FAILED``, with
FailureCode and FailureMessage, when S3 refuses), as backups and restores do here. A
ClientToken repeats the export it names for 8 hours; with other parameters it is an
ExportConflictException. Incremental exports are not made (a ValidationException says so).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import secrets
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, validation
from ..storage import Reader
from ..validation import F, check
from ._itemformats import ION_HEADER, ion_line, json_line
from .backups import instant_of

if TYPE_CHECKING:
    from ..context import Context
    from ..storage import TableRow

ITEMS_PER_FILE = 100_000
TOKEN_WINDOW_S = 8 * 3600
_EXPORT = (
    F("TableArn", required=True, min_len=1, max_len=1024),
    F("ExportTime", kind="any"),
    F("ClientToken", kind="str"),
    F("S3Bucket", required=True, max_len=255),
    F("S3BucketOwner", kind="str"),
    F("S3Prefix", max_len=1024),
    F("S3SseAlgorithm", enum=("AES256", "KMS")),
    F("S3SseKmsKeyId", min_len=1, max_len=2048),
    F("ExportFormat", enum=("DYNAMODB_JSON", "ION")),
    F("ExportType", enum=("FULL_EXPORT", "INCREMENTAL_EXPORT")),
    F("IncrementalExportSpecification", kind="map"),
)
_DESCRIBE = (F("ExportArn", required=True, min_len=37, max_len=1024),)
_LIST = (
    F("TableArn", min_len=1, max_len=1024),
    F("MaxResults", kind="int", min=1, max=25),
    F("NextToken", kind="str"),
)


def s3_client(region: str) -> Any:
    """An S3 client as the AWS SDK configures one (endpoint, credentials) in ``region``."""
    import boto3

    return boto3.client("s3", region_name=region)


def iso(instant: float) -> str:
    milliseconds = round(instant * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(instant)) + f".{milliseconds:03d}Z"


def _table(ctx: Context, reader: Reader, arn: str) -> TableRow:
    for row in reader.tables(ctx.region):
        if row.definition.get("TableArn") == arn:
            return row
    raise DynamoDBError("TableNotFoundException", f"Table not found: {arn}")


def export_table_to_point_in_time(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _EXPORT)
    if params.get("ExportType") == "INCREMENTAL_EXPORT":
        raise validation("This engine makes full exports only: ExportType FULL_EXPORT")
    now = ctx.now()
    token = params.get("ClientToken")
    same = _repeated(ctx, token, now)
    if same is not None:
        return {"ExportDescription": same}
    row = ctx.storage.read(lambda r: _table(ctx, r, params["TableArn"]))
    pitr = row.definition.get("_pitr")
    if pitr is None:
        raise DynamoDBError(
            "PointInTimeRecoveryUnavailableException",
            f"Point in time recovery is not enabled for table '{row.name}'",
        )
    earliest = max(float(pitr["since"]), now - pitr["days"] * 86400)
    instant = instant_of(params, "ExportTime")
    instant = now if instant is None else instant
    if not earliest <= instant <= now:
        raise DynamoDBError(
            "InvalidExportTimeException",
            f"Export time {iso(instant)} is not within the table's point-in-time recovery "
            f"window ({iso(earliest)} to {iso(now)})",
        )
    export_id = f"{int(now * 1000):014d}-{secrets.token_hex(4)}"
    arn = f"{row.definition['TableArn']}/export/{export_id}"
    fmt = params.get("ExportFormat") or "DYNAMODB_JSON"
    description: dict[str, Any] = {
        "ExportArn": arn,
        "ExportStatus": "COMPLETED",
        "StartTime": now,
        "TableArn": row.definition["TableArn"],
        "TableId": row.definition.get("TableId", str(row.id)),
        "ExportTime": instant,
        "S3Bucket": params["S3Bucket"],
        "S3SseAlgorithm": params.get("S3SseAlgorithm") or "AES256",
        "ExportFormat": fmt,
        "ExportType": "FULL_EXPORT",
    }
    for member in ("ClientToken", "S3BucketOwner", "S3Prefix", "S3SseKmsKeyId"):
        if params.get(member) is not None:
            description[member] = params[member]
    try:
        written = ctx.storage.read(lambda r: _write(ctx, r, row, instant, description))
        description.update(written)
    except Exception as error:  # S3 refused: the export FAILED, as DynamoDB reports it
        code = getattr(error, "response", {}).get("Error", {}).get("Code") or type(error).__name__
        description.update(
            ExportStatus="FAILED", FailureCode=f"S3{code}", FailureMessage=str(error)
        )
    description["EndTime"] = ctx.now()

    def record(w: Any) -> None:
        w.transfer_put(arn, "export", ctx.region, description["TableArn"], token, now, description)

    ctx.storage.write(record)
    return {"ExportDescription": description}


def _repeated(ctx: Context, token: str | None, now: float) -> dict[str, Any] | None:
    """The export an earlier call with this ClientToken made (within 8 hours), if the
    parameters are the same; ExportConflictException if they are not."""
    if token is None:
        return None
    found: list[dict[str, Any]] = ctx.storage.read(
        lambda r: r.transfers("export", ctx.region, client_token=token)
    )
    for earlier in reversed(found):
        if now - float(earlier["StartTime"]) > TOKEN_WINDOW_S:
            continue
        params = ctx.params
        same = all(
            earlier.get(member) == params.get(member)
            for member in ("TableArn", "S3Bucket", "S3Prefix", "S3BucketOwner", "S3SseKmsKeyId")
        ) and earlier["ExportFormat"] == (params.get("ExportFormat") or "DYNAMODB_JSON")
        if not same:
            raise DynamoDBError(
                "ExportConflictException",
                f"There was a conflict when attempting to export: ClientToken {token} was used "
                "with other parameters",
            )
        return dict(earlier)
    return None


def _write(
    ctx: Context, reader: Reader, row: TableRow, instant: float, description: dict[str, Any]
) -> dict[str, Any]:
    """Write the export's objects to S3 (inside one read snapshot): the ExportDescription's
    members that come from them."""
    s3 = s3_client(ctx.region)
    bucket = description["S3Bucket"]
    prefix = description.get("S3Prefix") or ""
    root = f"{prefix.rstrip('/')}/" if prefix else ""
    root += f"AWSDynamoDB/{description['ExportArn'].rsplit('/', 1)[-1]}/"
    s3.put_object(Bucket=bucket, Key=root + "_started", Body=b"")
    ion = description["ExportFormat"] == "ION"
    files: list[dict[str, Any]] = []
    count = size = 0
    for lines, items in _chunks(reader.pitr_items(row.id, instant), ion):
        body = gzip.compress(lines, compresslevel=6)
        digest = hashlib.md5(body)
        key = f"{root}data/{secrets.token_hex(12)}.{'ion' if ion else 'json'}.gz"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        files.append(
            {
                "itemCount": items,
                "md5Checksum": _b64(digest.digest()),
                "etag": digest.hexdigest(),
                "dataFileS3Key": key,
            }
        )
        count += items
        size += len(lines)
    manifest_files = "".join(_json(f) + "\n" for f in files).encode()
    _put_with_checksum(s3, bucket, root + "manifest-files", manifest_files)
    summary = {
        "version": "2020-06-30",
        "exportArn": description["ExportArn"],
        "startTime": iso(description["StartTime"]),
        "endTime": iso(ctx.now()),
        "tableArn": description["TableArn"],
        "tableId": description["TableId"],
        "exportTime": iso(instant),
        "s3Bucket": bucket,
        "s3Prefix": description.get("S3Prefix"),
        "s3SseAlgorithm": description["S3SseAlgorithm"],
        "s3SseKmsKeyId": description.get("S3SseKmsKeyId"),
        "manifestFilesS3Key": root + "manifest-files.json",
        "billedSizeBytes": size,
        "itemCount": count,
        "outputFormat": description["ExportFormat"],
        "exportType": "FULL_EXPORT",
    }
    _put_with_checksum(s3, bucket, root + "manifest-summary", _json(summary).encode())
    return {
        "ExportManifest": root + "manifest-summary.json",
        "ItemCount": count,
        "BilledSizeBytes": size,
    }


def _chunks(items: Iterator[Any], ion: bool) -> Iterator[tuple[bytes, int]]:
    """The data files' contents: up to :data:`ITEMS_PER_FILE` lines each (an empty table
    still gets one, empty, file)."""
    buffer = io.StringIO()
    count = files = 0
    encode = ion_line if ion else json_line
    if ion:
        buffer.write(ION_HEADER + "\n")
    for item in items:
        buffer.write(encode(item))
        buffer.write("\n")
        count += 1
        if count == ITEMS_PER_FILE:
            yield buffer.getvalue().encode("utf-8"), count
            files += 1
            buffer = io.StringIO()
            if ion:
                buffer.write(ION_HEADER + "\n")
            count = 0
    if count or not files:
        yield buffer.getvalue().encode("utf-8"), count


def _put_with_checksum(s3: Any, bucket: str, stem: str, body: bytes) -> None:
    s3.put_object(Bucket=bucket, Key=stem + ".json", Body=body)
    checksum = hashlib.md5(body).hexdigest().encode()
    s3.put_object(Bucket=bucket, Key=stem + ".checksum", Body=checksum)


def _b64(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode("ascii")


def _json(value: Mapping[str, Any]) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def describe_export(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _DESCRIBE)
    arn = params["ExportArn"]
    found = ctx.storage.read(lambda r: r.transfer(arn))
    if found is None or "ExportStatus" not in found:
        raise DynamoDBError("ExportNotFoundException", f"Export not found: {arn}")
    return {"ExportDescription": found}


def list_exports(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _LIST)
    table = params.get("TableArn")
    found = ctx.storage.read(lambda r: r.transfers("export", ctx.region, table_arn=table))
    return _page(
        [
            {
                "ExportArn": e["ExportArn"],
                "ExportStatus": e["ExportStatus"],
                "ExportType": e["ExportType"],
            }
            for e in found
        ],
        params.get("NextToken"),
        int(params.get("MaxResults") or 25),
        "ExportSummaries",
    )


def _page(
    entries: list[dict[str, Any]], token: str | None, size: int, member: str
) -> dict[str, Any]:
    """One page of a List* answer: NextToken is the number of entries already listed."""
    start = int(token) if token is not None and str(token).isdigit() else 0
    out: dict[str, Any] = {member: entries[start : start + size]}
    if start + size < len(entries):
        out["NextToken"] = str(start + size)
    return out
