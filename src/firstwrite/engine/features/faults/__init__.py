"""Fault injection and provisioned throughput.

``injector``: throttling, hot keys, latency, stale reads, injected errors, crash points;
``throughput``: DynamoDB's token buckets, per table and per partition; ``partitions``: what a
request names (tables, partition keys)."""
