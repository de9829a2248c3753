"""Account-level operations: DescribeLimits and DescribeEndpoints.

Both answer what DynamoDB answers for an account with default quotas. DescribeEndpoints gives
the address the caller reached the endpoint at, as DynamoDB gives its regional one
(``dynamodb.<region>.amazonaws.com``, which is what its callers reach): over HTTP the request's
``Host`` (:data:`SERVED_ADDRESS`, set by the server), so a client that discovers its endpoint
calls this engine again; in process, DynamoDB's regional name (nothing is reached there).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..context import Context

# DynamoDB's default quotas per account and region (DescribeLimits; the same figures appear in
# the AWS-verified ack-api-quirks finding DDB-TABLE-170).
ACCOUNT_MAX_CAPACITY_UNITS = 80_000
TABLE_MAX_CAPACITY_UNITS = 40_000
# How long an SDK may cache a discovered endpoint (DynamoDB answers one day).
ENDPOINT_CACHE_MINUTES = 1440
# The ``host[:port]`` the caller reached the engine at, for the call being answered (the HTTP
# server sets it around a DescribeEndpoints call); None in process.
SERVED_ADDRESS: ContextVar[str | None] = ContextVar("served_address", default=None)


def describe_limits(ctx: Context) -> dict[str, Any]:
    return {
        "AccountMaxReadCapacityUnits": ACCOUNT_MAX_CAPACITY_UNITS,
        "AccountMaxWriteCapacityUnits": ACCOUNT_MAX_CAPACITY_UNITS,
        "TableMaxReadCapacityUnits": TABLE_MAX_CAPACITY_UNITS,
        "TableMaxWriteCapacityUnits": TABLE_MAX_CAPACITY_UNITS,
    }


def describe_endpoints(ctx: Context) -> dict[str, Any]:
    return {
        "Endpoints": [
            {
                "Address": SERVED_ADDRESS.get() or f"dynamodb.{ctx.region}.amazonaws.com",
                "CachePeriodInMinutes": ENDPOINT_CACHE_MINUTES,
            }
        ]
    }
