"""Account-level operations: DescribeLimits and DescribeEndpoints.

Both answer what DynamoDB answers for an account with default quotas. DescribeEndpoints gives
DynamoDB's own regional address: SDKs only use it for endpoint discovery, which botocore (and
the other SDKs) skip when a client is given an endpoint URL, as every client of a served engine
is; an in-process client is answered before any address is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..context import Context

# DynamoDB's default quotas per account and region (DescribeLimits; the same figures appear in
# the AWS-verified ack-api-quirks finding DDB-TABLE-170).
ACCOUNT_MAX_CAPACITY_UNITS = 80_000
TABLE_MAX_CAPACITY_UNITS = 40_000
# How long an SDK may cache a discovered endpoint (DynamoDB answers one day).
ENDPOINT_CACHE_MINUTES = 1440


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
                "Address": f"dynamodb.{ctx.region}.amazonaws.com",
                "CachePeriodInMinutes": ENDPOINT_CACHE_MINUTES,
            }
        ]
    }
