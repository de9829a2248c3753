"""DynamoDB Streams' statements: the streams (one shard each) and their records.

Written by the streams feature (``engine/features/streams.py``), read by
``operations/streams.py``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .base import Statements

__all__ = ["StreamReads", "StreamRow", "StreamWrites"]


@dataclass(frozen=True, slots=True)
class StreamRow:
    """A DynamoDB stream (engine/features/streams.py): one shard, open until ``closed_at``."""

    id: int
    arn: str
    region: str
    table_name: str
    label: str
    view_type: str
    shard_id: str
    key_schema: list[dict[str, str]]
    created_at: float
    start_seq: int
    closed_at: float | None
    end_seq: int | None
    trimmed_through: int


_STREAM_COLUMNS = (
    "id, arn, region, table_name, label, view_type, shard_id, key_schema, created_at, "
    "start_seq, closed_at, end_seq, trimmed_through"
)


def _stream_row(row: Any) -> StreamRow:
    return StreamRow(
        id=row[0],
        arn=row[1],
        region=row[2],
        table_name=row[3],
        label=row[4],
        view_type=row[5],
        shard_id=row[6],
        key_schema=json.loads(row[7]),
        created_at=row[8],
        start_seq=row[9],
        closed_at=row[10],
        end_seq=row[11],
        trimmed_through=row[12],
    )


class StreamReads(Statements):
    """Streams and their records, read."""

    def stream(self, arn: str) -> StreamRow | None:
        row = self._conn.execute(
            f"SELECT {_STREAM_COLUMNS} FROM streams WHERE arn = ?", (arn,)
        ).fetchone()
        return None if row is None else _stream_row(row)

    def streams_of(self, region: str) -> list[StreamRow]:
        rows = self._conn.execute(
            f"SELECT {_STREAM_COLUMNS} FROM streams WHERE region = ? ORDER BY arn", (region,)
        ).fetchall()
        return [_stream_row(r) for r in rows]

    def stream_records(
        self, stream_id: int, after: int, limit: int
    ) -> list[tuple[int, float, bytes]]:
        """Up to ``limit`` records (seq, created_at, body) of a stream with ``seq > after``."""
        rows = self._conn.execute(
            "SELECT seq, created_at, body FROM stream_records WHERE stream_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (stream_id, after, limit),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def stream_last_seq(self, stream_id: int, *, before: float | None = None) -> int | None:
        """The newest record's sequence number (only among those created before ``before``)."""
        if before is None:
            row = self._conn.execute(
                "SELECT max(seq) FROM stream_records WHERE stream_id = ?", (stream_id,)
            ).fetchone()
        else:
            row = self._conn.execute(
                "SELECT max(seq) FROM stream_records WHERE stream_id = ? AND created_at < ?",
                (stream_id, before),
            ).fetchone()
        return None if row[0] is None else int(row[0])

    def stream_next_seq(self) -> int:
        """The sequence number the next record will get (AUTOINCREMENT never goes back)."""
        row = self._conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'stream_records'"
        ).fetchone()
        return (0 if row is None else int(row[0])) + 1

    def stream_records_before(self, cutoff: float) -> bool:
        """Whether any record or closed stream is older than ``cutoff`` (cheap idle check)."""
        row = self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM stream_records WHERE created_at < ?) "
            "OR EXISTS (SELECT 1 FROM streams WHERE closed_at < ?)",
            (cutoff, cutoff),
        ).fetchone()
        return bool(row[0])


class StreamWrites(StreamReads):
    """Streams and their records, written."""

    def stream_create(
        self,
        *,
        arn: str,
        region: str,
        table_name: str,
        label: str,
        view_type: str,
        shard_id: str,
        key_schema: list[dict[str, str]],
        created_at: float,
    ) -> StreamRow:
        start = self.stream_next_seq()
        cursor = self._conn.execute(
            "INSERT INTO streams (arn, region, table_name, label, view_type, shard_id, "
            "key_schema, created_at, start_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                arn,
                region,
                table_name,
                label,
                view_type,
                shard_id,
                json.dumps(key_schema),
                created_at,
                start,
            ),
        )
        assert cursor.lastrowid is not None
        stream = self.stream(arn)
        assert stream is not None
        return stream

    def stream_close(self, stream_id: int, at: float) -> None:
        """Close the stream's shard at its last record (DescribeStream's EndingSequenceNumber)."""
        last = self.stream_last_seq(stream_id)
        self._conn.execute(
            "UPDATE streams SET closed_at = ?, end_seq = coalesce(?, start_seq - 1) "
            "WHERE id = ? AND closed_at IS NULL",
            (at, last, stream_id),
        )

    def stream_append(self, stream_id: int, created_at: float, body: bytes) -> int:
        """Add one record; returns its sequence number (allocated in this transaction)."""
        cursor = self._conn.execute(
            "INSERT INTO stream_records (stream_id, created_at, body) VALUES (?, ?, ?)",
            (stream_id, created_at, body),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def stream_purge(self, cutoff: float) -> None:
        """Drop records created before ``cutoff`` and streams closed before it (retention)."""
        self._conn.execute(
            "UPDATE streams SET trimmed_through = max(trimmed_through, coalesce(("
            "SELECT max(seq) FROM stream_records r WHERE r.stream_id = streams.id "
            "AND r.created_at < ?), 0))",
            (cutoff,),
        )
        self._conn.execute("DELETE FROM stream_records WHERE created_at < ?", (cutoff,))
        gone = [
            r[0]
            for r in self._conn.execute(
                "SELECT id FROM streams WHERE closed_at < ?", (cutoff,)
            ).fetchall()
        ]
        for stream_id in gone:
            self._conn.execute("DELETE FROM stream_records WHERE stream_id = ?", (stream_id,))
            self._conn.execute("DELETE FROM streams WHERE id = ?", (stream_id,))
