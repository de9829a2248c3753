"""The DynamoDB Streams API: ListStreams, DescribeStream, GetShardIterator, GetRecords.

The records are written by the streams feature (``engine/features/streams.py``) inside each item's write
transaction; these operations only read them. Shard iterators are opaque tokens naming a
position in the shard, valid for 15 minutes of engine clock (ExpiredIteratorException).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, resource_not_found, validation
from ..storage import Reader, StreamRow, unpack
from ..validation import F, check

if TYPE_CHECKING:
    from ..context import Context

# How long a stream record (and a closed stream) is kept.
RETENTION_S = 24 * 3600.0

ITERATOR_LIFETIME_S = 15 * 60.0
MAX_RECORDS = 1000
MAX_RESPONSE_BYTES = 1024 * 1024
# Sequence numbers are SEQ_BASE + the storage counter: 21 decimal digits like DynamoDB's, so
# they compare the same as strings and as integers.
SEQ_BASE = 10**20
_STREAM_ARN = re.compile(
    r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[a-zA-Z0-9_.-]{3,255}/stream/"
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\Z"
)

# --- sequence numbers and iterators ------------------------------------------------------------


def sequence_number(seq: int) -> str:
    return str(SEQ_BASE + seq)


def _parse_sequence_number(text: str) -> int:
    if not text.isdecimal() or len(text) > 40:
        raise validation(f"Invalid SequenceNumber: {text}")
    return int(text) - SEQ_BASE


def _encode_iterator(stream: StreamRow, after: int, issued: float) -> str:
    # Opaque to callers; a random nonce keeps two iterators at one position distinct.
    payload = json.dumps([stream.arn, stream.shard_id, after, issued, uuid.uuid4().hex[:8]])
    return base64.urlsafe_b64encode(payload.encode()).decode("ascii")


def _decode_iterator(token: str) -> tuple[str, str, int, float]:
    try:
        arn, shard_id, after, issued, _nonce = json.loads(base64.urlsafe_b64decode(token))
        if not (
            isinstance(arn, str)
            and isinstance(shard_id, str)
            and isinstance(after, int)
            and isinstance(issued, (int, float))
        ):
            raise ValueError(token)
    except (ValueError, TypeError, binascii.Error):
        raise validation("Invalid ShardIterator") from None
    return arn, shard_id, after, float(issued)


# --- the operations ---------------------------------------------------------------------------

_ARN_FIELD = F("StreamArn", required=True, min_len=37, max_len=1024)
_LIST = (
    F("TableName", min_len=3, max_len=255, pattern="[a-zA-Z0-9_.-]+"),
    F("Limit", kind="int", min=1, max=100),
    F("ExclusiveStartStreamArn", min_len=37, max_len=1024),
)
_DESCRIBE = (
    _ARN_FIELD,
    F("Limit", kind="int", min=1, max=100),
    F("ExclusiveStartShardId", min_len=28, max_len=65),
    F(
        "ShardFilter",
        kind="struct",
        # Both members are needed, though the model marks neither required: DynamoDB refuses
        # a filter without one (ScyllaDB's test_stream_shard_filtering_missing_type and
        # _missing_shard_id, which pass on DynamoDB).
        members=(
            F("Type", required=True, enum=("CHILD_SHARDS",)),
            F("ShardId", required=True, min_len=28, max_len=65),
        ),
    ),
)
_ITERATOR = (
    _ARN_FIELD,
    F("ShardId", required=True, min_len=28, max_len=65),
    F(
        "ShardIteratorType",
        required=True,
        enum=("TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"),
    ),
    F("SequenceNumber", min_len=21, max_len=40),
)
_RECORDS = (
    F("ShardIterator", required=True, min_len=1, max_len=2048),
    F("Limit", kind="int", min=1, max=MAX_RECORDS),
)


def _expired(stream: StreamRow, now: float) -> bool:
    return stream.closed_at is not None and stream.closed_at < now - RETENTION_S


def _require_stream(ctx: Context, r: Reader, arn: str) -> StreamRow:
    if not _STREAM_ARN.match(arn):
        raise validation(f"Invalid StreamArn: {arn}")
    stream = r.stream(arn)
    if stream is None or stream.region != ctx.region or _expired(stream, ctx.now()):
        raise resource_not_found(f"Requested resource not found: Stream: {arn} not found")
    return stream


def _require_shard(stream: StreamRow, shard_id: str) -> None:
    if shard_id != stream.shard_id:
        raise resource_not_found(
            f"Requested resource not found: Shard does not exist: {shard_id} in {stream.arn}"
        )


def _horizon(r: Reader, stream: StreamRow, now: float) -> int:
    """The position (``seq`` read so far) of TRIM_HORIZON: everything older is trimmed."""
    trimmed = r.stream_last_seq(stream.id, before=now - RETENTION_S) or 0
    return max(stream.trimmed_through, trimmed, stream.start_seq - 1)


def _end(r: Reader, stream: StreamRow) -> int:
    """The last sequence number the shard holds so far (or start - 1 when empty)."""
    if stream.end_seq is not None:
        return stream.end_seq
    last = r.stream_last_seq(stream.id)
    return stream.start_seq - 1 if last is None else last


def list_streams(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _LIST)
    limit = int(params.get("Limit") or 100)
    start = params.get("ExclusiveStartStreamArn")
    if start is not None and not _STREAM_ARN.match(start):
        raise validation(f"Invalid ExclusiveStartStreamArn: {start}")
    table = params.get("TableName")
    now = ctx.now()
    streams = [
        s
        for s in ctx.storage.read(lambda r: r.streams_of(ctx.region))
        if not _expired(s, now)
        and (table is None or s.table_name == table)
        and (start is None or s.arn > start)
    ]
    page = streams[:limit]
    out: dict[str, Any] = {
        "Streams": [
            {"StreamArn": s.arn, "TableName": s.table_name, "StreamLabel": s.label} for s in page
        ]
    }
    if len(streams) > limit:
        out["LastEvaluatedStreamArn"] = page[-1].arn
    return out


def describe_stream(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _DESCRIBE)

    def read(r: Reader) -> dict[str, Any]:
        stream = _require_stream(ctx, r, params["StreamArn"])
        shard_range: dict[str, str] = {"StartingSequenceNumber": sequence_number(stream.start_seq)}
        if stream.end_seq is not None:
            shard_range["EndingSequenceNumber"] = sequence_number(
                max(stream.end_seq, stream.start_seq)
            )
        shards = [{"ShardId": stream.shard_id, "SequenceNumberRange": shard_range}]
        start = params.get("ExclusiveStartShardId")
        if start is not None:
            shards = [s for s in shards if s["ShardId"] > start]
        shard_filter = params.get("ShardFilter")
        if shard_filter is not None:
            shards = []  # one shard per stream: no shard ever has children
        return {
            "StreamDescription": {
                "StreamArn": stream.arn,
                "StreamLabel": stream.label,
                "StreamStatus": "ENABLED" if stream.closed_at is None else "DISABLED",
                "StreamViewType": stream.view_type,
                "CreationRequestDateTime": stream.created_at,
                "TableName": stream.table_name,
                "KeySchema": stream.key_schema,
                "Shards": shards,
            }
        }

    return ctx.storage.snapshot(read)


def get_shard_iterator(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _ITERATOR)
    kind = params["ShardIteratorType"]
    text = params.get("SequenceNumber")
    if kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
        if text is None:
            raise validation(f"Must specify a SequenceNumber for ShardIteratorType {kind}")
        seq = _parse_sequence_number(text)
    elif text is not None:
        raise validation(f"Must not specify a SequenceNumber for ShardIteratorType {kind}")
    now = ctx.now()

    def read(r: Reader) -> str:
        stream = _require_stream(ctx, r, params["StreamArn"])
        _require_shard(stream, params["ShardId"])
        horizon = _horizon(r, stream, now)
        if kind == "TRIM_HORIZON":
            after = horizon
        elif kind == "LATEST":
            after = _end(r, stream)
        else:
            after = seq - 1 if kind == "AT_SEQUENCE_NUMBER" else seq
            last = stream.end_seq if stream.end_seq is not None else r.stream_next_seq() - 1
            if seq < stream.start_seq or seq > max(last, stream.start_seq):
                raise validation(
                    f"Invalid SequenceNumber {text} for shard {stream.shard_id}: not in the "
                    "shard's sequence number range"
                )
            if after < horizon:
                raise DynamoDBError(
                    "TrimmedDataAccessException",
                    f"The sequence number {text} is beyond the trim horizon of the shard: its "
                    "record is older than the 24-hour retention period",
                )
        return _encode_iterator(stream, after, now)

    return {"ShardIterator": ctx.storage.snapshot(read)}


def get_records(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _RECORDS)
    limit = int(params.get("Limit") or MAX_RECORDS)
    arn, shard_id, after, issued = _decode_iterator(params["ShardIterator"])
    now = ctx.now()
    if now - issued > ITERATOR_LIFETIME_S:
        raise DynamoDBError(
            "ExpiredIteratorException", "The provided iterator exceeds the maximum age allowed."
        )

    def read(r: Reader) -> tuple[StreamRow, list[tuple[int, float, bytes]], int]:
        stream = _require_stream(ctx, r, arn)
        _require_shard(stream, shard_id)
        if after < _horizon(r, stream, now):
            raise DynamoDBError(
                "TrimmedDataAccessException",
                "The operation attempted to read past the oldest stream record in a shard: "
                "records older than the 24-hour retention period have been trimmed",
            )
        return stream, r.stream_records(stream.id, after, limit), _end(r, stream)

    stream, rows, end = ctx.storage.snapshot(read)
    records: list[dict[str, Any]] = []
    position = after
    total = 0
    for seq, _created, body in rows:
        record = unpack(body)
        size = int(record["dynamodb"]["SizeBytes"])
        if records and total + size > MAX_RESPONSE_BYTES:
            break
        total += size
        record["dynamodb"]["SequenceNumber"] = sequence_number(seq)
        records.append(record)
        position = seq
    out: dict[str, Any] = {"Records": records}
    if stream.end_seq is None or position < end:
        out["NextShardIterator"] = _encode_iterator(stream, position, now)
    return out
