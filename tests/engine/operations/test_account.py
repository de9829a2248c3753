"""DescribeLimits and DescribeEndpoints through boto3, in process and over HTTP."""

from __future__ import annotations

from typing import Any


def test_describe_limits_gives_dynamodbs_default_quotas(ddb: Any) -> None:
    limits = ddb.describe_limits()
    limits.pop("ResponseMetadata")
    assert limits == {
        "AccountMaxReadCapacityUnits": 80000,
        "AccountMaxWriteCapacityUnits": 80000,
        "TableMaxReadCapacityUnits": 40000,
        "TableMaxWriteCapacityUnits": 40000,
    }


def test_describe_endpoints_names_the_regional_endpoint(make_ddb: Any) -> None:
    for transport in ("inprocess", "http"):
        for region in ("us-east-1", "eu-west-1"):
            client = make_ddb(transport, region_name=region)
            assert client.describe_endpoints()["Endpoints"] == [
                {"Address": f"dynamodb.{region}.amazonaws.com", "CachePeriodInMinutes": 1440}
            ]
