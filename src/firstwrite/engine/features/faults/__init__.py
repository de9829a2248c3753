"""Fault injection and provisioned throughput.

``injector``: throttling, latency, stale reads, injected errors, crash points; ``throughput``:
DynamoDB's token buckets."""
