"""Reading a DynamoDB stream with the Streams API, for the layer's long-running consumers.

The TTL audit and the cross-region reconciler use it when they run as pollers, not Lambdas.

:func:`read_stream` reads every shard once, from ``TRIM_HORIZON`` for a shard it has no
iterator for, and hands each GetRecords page's ``Records`` to ``process`` in stream order. It
returns the iterators to continue from; a closed shard that is drained is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["read_stream"]


def read_stream(
    streams_client: Any,
    stream_arn: str,
    process: Callable[[Sequence[Mapping[str, Any]]], object],
    iterators: dict[str, str] | None = None,
) -> dict[str, str]:
    """Read every shard of ``stream_arn`` once (module docstring); returns the next iterators."""
    iterators = dict(iterators or {})
    desc = streams_client.describe_stream(StreamArn=stream_arn)["StreamDescription"]
    for shard in desc.get("Shards", []):
        shard_id = shard["ShardId"]
        if shard_id not in iterators:
            iterators[shard_id] = streams_client.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
    for shard_id, iterator in list(iterators.items()):
        while iterator:
            response = streams_client.get_records(ShardIterator=iterator, Limit=1000)
            records = response.get("Records", [])
            process(records)
            nxt = response.get("NextShardIterator")
            iterator = nxt
            if not records or nxt is None:
                break
        if iterator:
            iterators[shard_id] = iterator
        else:
            iterators.pop(shard_id, None)
    return iterators
