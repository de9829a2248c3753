"""Fault injection (``injector``: throttling, latency, stale reads, injected errors, crash
points) and provisioned throughput (``throughput``: DynamoDB's token buckets)."""
