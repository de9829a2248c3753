"""Reading a DynamoDB stream with the Streams API, for the layer's long-running consumers.

The TTL audit and the cross-region reconciler use it when they run as pollers, not Lambdas.

:func:`read_stream` reads every shard once and hands each GetRecords page's ``Records`` to
``process`` in stream order: a shard it has no position for from ``TRIM_HORIZON``, and a child
shard only once its parent (when the stream still lists it) is drained, as DynamoDB asks of
consumers that keep a key's changes in order. It returns the position to continue from:
``{shard id: next iterator}``, where ``""`` marks a closed shard read to its end, so a later
call never reads it again (DynamoDB lists a closed shard for 24 hours). The position given is
updated page by page as well: when ``process`` raises, it holds what was processed.

:func:`follow_stream` calls it again and again until ``stop`` is set: the long-running poller.
A failed round (DynamoDB unreachable, an iterator expired, ``process`` raising) is logged and
retried from the last position after ``interval``. A shard whose iterator expired (iterators
last 15 minutes) or whose records were trimmed is read again from ``TRIM_HORIZON``: its records
come again, and the consumers count each once only with their guard. :class:`StreamPolling`
gives a consumer with a ``process(records)`` method both, as ``poll`` and ``run``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["DRAINED", "StreamPolling", "follow_stream", "read_stream"]

log = logging.getLogger("firstwrite.idempotency.streams")

DRAINED = ""
"""The position of a closed shard read to its end."""


def _shards(streams_client: Any, stream_arn: str) -> list[Mapping[str, Any]]:
    """Every shard DescribeStream lists, page after page."""
    shards: list[Mapping[str, Any]] = []
    params: dict[str, Any] = {"StreamArn": stream_arn}
    while True:
        desc = streams_client.describe_stream(**params)["StreamDescription"]
        shards.extend(desc.get("Shards", []))
        last = desc.get("LastEvaluatedShardId")
        if not last:
            return shards
        params["ExclusiveStartShardId"] = last


def _depth(shard_id: str, parents: Mapping[str, str | None]) -> int:
    """How many of the shard's ancestors the stream still lists (a parent is read first)."""
    depth, seen = 0, {shard_id}
    parent = parents.get(shard_id)
    while parent is not None and parent in parents and parent not in seen:
        depth, seen = depth + 1, seen | {parent}
        parent = parents.get(parent)
    return depth


def read_stream(
    streams_client: Any,
    stream_arn: str,
    process: Callable[[Sequence[Mapping[str, Any]]], object],
    iterators: dict[str, str] | None = None,
) -> dict[str, str]:
    """Read every shard of ``stream_arn`` once (module docstring); returns the next position."""
    position = iterators if iterators is not None else {}
    shards = _shards(streams_client, stream_arn)
    listed = {s["ShardId"]: s.get("ParentShardId") for s in shards}
    for shard in sorted(shards, key=lambda s: _depth(s["ShardId"], listed)):
        shard_id = shard["ShardId"]
        parent = shard.get("ParentShardId")
        if position.get(shard_id) == DRAINED:
            continue
        if parent is not None and parent in listed and position.get(parent) != DRAINED:
            continue  # its parent is read first (a later call, or later in this one)
        if shard_id not in position:
            position[shard_id] = streams_client.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
        _drain(streams_client, shard_id, position, process)
    return dict(position)


def _drain(
    streams_client: Any,
    shard_id: str,
    position: dict[str, str],
    process: Callable[[Sequence[Mapping[str, Any]]], object],
) -> None:
    """Read one shard until a page comes back empty or the shard ends."""
    while True:
        try:
            response = streams_client.get_records(ShardIterator=position[shard_id], Limit=1000)
        except Exception as exc:
            if _expired(exc):
                del position[shard_id]  # the next round reads it again from TRIM_HORIZON
            raise
        records = response.get("Records", [])
        process(records)
        nxt = response.get("NextShardIterator")
        position[shard_id] = nxt if nxt else DRAINED
        if not records or not nxt:
            return


def _expired(exc: BaseException) -> bool:
    error = getattr(exc, "response", None)
    code = error.get("Error", {}).get("Code") if isinstance(error, Mapping) else None
    return code in ("ExpiredIteratorException", "TrimmedDataAccessException")


def follow_stream(
    streams_client: Any,
    stream_arn: str,
    process: Callable[[Sequence[Mapping[str, Any]]], object],
    stop: threading.Event,
    *,
    interval: float = 1.0,
    iterators: dict[str, str] | None = None,
) -> dict[str, str]:
    """Read ``stream_arn`` until ``stop`` is set, waiting ``interval`` seconds between rounds
    (module docstring); returns the position reached, to resume from."""
    position = iterators if iterators is not None else {}
    while not stop.is_set():
        try:
            read_stream(streams_client, stream_arn, process, position)
        except Exception as exc:  # a long-running poller logs a failed round and goes on
            log.warning(
                "reading stream %s failed (%s: %s); retrying in %.1f s",
                stream_arn,
                type(exc).__name__,
                exc,
                interval,
            )
        stop.wait(interval)
    return dict(position)


class StreamPolling:
    """``poll`` and ``run`` for a stream consumer whose ``process(records)`` judges one page of
    stream records (the TTL audit, the cross-region reconciler)."""

    def process(self, records: Sequence[Mapping[str, Any]]) -> object:
        raise NotImplementedError

    def poll(
        self, streams_client: Any, stream_arn: str, iterators: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Read every shard of ``stream_arn`` once and process its records: from TRIM_HORIZON,
        or from the position a previous poll returned (updated in place as pages are read).
        Returns the position to continue from (:func:`read_stream`)."""
        return read_stream(streams_client, stream_arn, self.process, iterators)

    def run(
        self,
        streams_client: Any,
        stream_arn: str,
        stop: threading.Event,
        *,
        interval: float = 1.0,
        iterators: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """The long-running poller: :meth:`poll` every ``interval`` seconds until ``stop`` is
        set, a failed round logged and retried (:func:`follow_stream`). Returns the position."""
        return follow_stream(
            streams_client, stream_arn, self.process, stop, interval=interval, iterators=iterators
        )
