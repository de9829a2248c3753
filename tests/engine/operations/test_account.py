"""DescribeLimits and DescribeEndpoints through boto3, in process and over HTTP."""

from __future__ import annotations

from typing import Any

from firstwrite.engine.binding.sync import dummy_client


def test_describe_limits_gives_dynamodbs_default_quotas(ddb: Any) -> None:
    limits = ddb.describe_limits()
    limits.pop("ResponseMetadata")
    assert limits == {
        "AccountMaxReadCapacityUnits": 80000,
        "AccountMaxWriteCapacityUnits": 80000,
        "TableMaxReadCapacityUnits": 40000,
        "TableMaxWriteCapacityUnits": 40000,
    }


def test_describe_endpoints_names_the_address_the_caller_reached(make_ddb: Any) -> None:
    """DynamoDB answers the regional address its callers reach, cached a day (the API
    reference's example: ``dynamodb.us-west-2.amazonaws.com``, 1440 minutes). Over HTTP that
    is the host the request named, so a client discovering its endpoint comes back here (as
    ScyllaDB's test_describe_endpoints.py checks, on DynamoDB and on Alternator); in process
    nothing is reached, and the answer is DynamoDB's regional name."""
    for region in ("us-east-1", "eu-west-1"):
        client = make_ddb("inprocess", region_name=region)
        assert client.describe_endpoints()["Endpoints"] == [
            {"Address": f"dynamodb.{region}.amazonaws.com", "CachePeriodInMinutes": 1440}
        ]
    client = make_ddb("http")
    url = client.meta.endpoint_url
    endpoints = client.describe_endpoints()["Endpoints"]
    assert endpoints == [{"Address": url.removeprefix("http://"), "CachePeriodInMinutes": 1440}]
    again = dummy_client("dynamodb", "us-east-1", endpoint_url="http://" + endpoints[0]["Address"])
    assert again.describe_endpoints()["Endpoints"] == endpoints
    by_name = dummy_client(
        "dynamodb", "us-east-1", endpoint_url=url.replace("127.0.0.1", "localhost")
    )
    assert by_name.describe_endpoints()["Endpoints"][0]["Address"].startswith("localhost:")
