"""The sample Lambda events the tests and docs use: shipped in the package
(:mod:`firstwrite.testing.events`), re-exported here for the tests' existing imports."""

from firstwrite.testing.events import (
    BODY_ENCODINGS,
    HTTP_SHAPES,
    FakeContext,
    fifo_event,
    http_event,
    kinesis_event,
    sqs_event,
)

__all__ = [
    "BODY_ENCODINGS",
    "HTTP_SHAPES",
    "FakeContext",
    "fifo_event",
    "http_event",
    "kinesis_event",
    "sqs_event",
]
