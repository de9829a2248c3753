"""Contributor Insights: DescribeContributorInsights, UpdateContributorInsights and
ListContributorInsights (in process and over HTTP), and the top keys the engine counts.

Sources: the DynamoDB API reference for UpdateContributorInsights (ContributorInsightsAction
ENABLE | DISABLE, ContributorInsightsMode ACCESSED_AND_THROTTLED_KEYS | THROTTLED_KEYS; the answer
is ENABLING / DISABLING), DescribeContributorInsights (status, LastUpdateDateTime, rule list)
and ListContributorInsights; the developer guide's "Using CloudWatch Contributor Insights for
DynamoDB" (the most accessed and most throttled partition keys and items; rule names
``DynamoDBContributorInsights-PKC-<table>-<ms>``, PKC/PKT, and SKC/SKT with a sort key).
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import bind, dummy_client
from firstwrite.engine.clock import Clock

NO_RETRIES = Config(retries={"max_attempts": 0})  # each throttled call reaches the engine once


def make_table(ddb: Any, name: str, *, sort: bool = False) -> None:
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if sort:
        definitions.append({"AttributeName": "sk", "AttributeType": "S"})
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=definitions,
        KeySchema=schema,
        BillingMode="PAY_PER_REQUEST",
    )


def test_state_is_kept_and_described(ddb: Any, table_name: str) -> None:
    make_table(ddb, table_name, sort=True)
    described = ddb.describe_contributor_insights(TableName=table_name)
    assert described["ContributorInsightsStatus"] == "DISABLED"
    assert "ContributorInsightsRuleList" not in described
    answer = ddb.update_contributor_insights(
        TableName=table_name, ContributorInsightsAction="ENABLE"
    )
    assert answer["ContributorInsightsStatus"] == "ENABLING"
    assert answer["ContributorInsightsMode"] == "ACCESSED_AND_THROTTLED_KEYS"
    described = ddb.describe_contributor_insights(TableName=table_name)
    assert described["ContributorInsightsStatus"] == "ENABLED"
    rules = described["ContributorInsightsRuleList"]
    assert [r.split("-")[1] for r in rules] == ["PKC", "SKC", "PKT", "SKT"]
    assert all(r.startswith("DynamoDBContributorInsights-") and table_name in r for r in rules)
    assert "LastUpdateDateTime" in described
    listed = ddb.list_contributor_insights(TableName=table_name)["ContributorInsightsSummaries"]
    assert listed == [
        {
            "TableName": table_name,
            "ContributorInsightsStatus": "ENABLED",
            "ContributorInsightsMode": "ACCESSED_AND_THROTTLED_KEYS",
        }
    ]
    answer = ddb.update_contributor_insights(
        TableName=table_name,
        ContributorInsightsAction="DISABLE",
    )
    assert answer["ContributorInsightsStatus"] == "DISABLING"
    assert (
        ddb.describe_contributor_insights(TableName=table_name)["ContributorInsightsStatus"]
        == "DISABLED"
    )


def test_refusals(ddb: Any, table_name: str) -> None:
    with pytest.raises(ClientError) as info:
        ddb.describe_contributor_insights(TableName=table_name)
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
    make_table(ddb, table_name)
    with pytest.raises(ClientError) as info:
        ddb.update_contributor_insights(
            TableName=table_name, IndexName="nope-index", ContributorInsightsAction="ENABLE"
        )
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as info:
        ddb.update_contributor_insights(TableName=table_name, ContributorInsightsAction="ON")
    assert info.value.response["Error"]["Code"] == "ValidationException"


def test_top_keys_come_from_consumed_capacity_and_throttles(tmp_path: Any) -> None:
    clock = Clock()
    clock.freeze(1_700_000_000.0)  # no bucket refills during the test
    with Engine(tmp_path / "i.db", clock=clock) as engine:
        ddb = bind(dummy_client("dynamodb", "us-east-1", config=NO_RETRIES), engine)
        make_table(ddb, "hot")
        make_table(ddb, "cold")
        for n in range(3):
            ddb.put_item(TableName="cold", Item={"pk": {"S": f"c{n}"}})
        assert engine.insights.top_keys("hot") == []
        assert not engine.hooks.interceptors  # nothing enabled: the fast path is kept
        ddb.update_contributor_insights(TableName="hot", ContributorInsightsAction="ENABLE")
        assert engine.hooks.interceptors
        big = "x" * 3000  # 3 write units a put
        for _ in range(4):
            ddb.put_item(TableName="hot", Item={"pk": {"S": "a"}, "blob": {"S": big}})
        ddb.put_item(TableName="hot", Item={"pk": {"S": "b"}})
        got = ddb.get_item(TableName="hot", Key={"pk": {"S": "b"}})
        assert "ConsumedCapacity" not in got  # counted, not shown to a caller who did not ask
        ddb.put_item(TableName="cold", Item={"pk": {"S": "c9"}})  # not followed
        top = engine.insights.top_keys("hot")
        assert [(k.key, k.consumed_units) for k in top] == [("S:a", 12.0), ("S:b", 1.5)]
        # Throttles, from the engine's own buckets: a hot-key ceiling on "b".
        engine.faults.hot_key("b", units=1, table="hot")
        throttled = 0
        for _ in range(5):
            try:
                ddb.get_item(TableName="hot", Key={"pk": {"S": "b"}})
            except ClientError:
                throttled += 1
        assert throttled > 0
        counts = {k.key: k.throttled for k in engine.insights.top_keys("hot")}
        assert counts["S:b"] == throttled and counts["S:a"] == 0
        ddb.update_contributor_insights(TableName="hot", ContributorInsightsAction="DISABLE")
        assert engine.insights.top_keys("hot") == []
    with Engine(tmp_path / "i.db", clock=clock) as engine:
        ddb = bind(dummy_client("dynamodb", "us-east-1", config=NO_RETRIES), engine)
        ddb.update_contributor_insights(
            TableName="cold",
            ContributorInsightsAction="ENABLE",
            ContributorInsightsMode="THROTTLED_KEYS",
        )
    with Engine(tmp_path / "i.db", clock=clock) as engine:  # the state survives a restart
        assert engine.hooks.interceptors
        ddb = bind(dummy_client("dynamodb", "us-east-1", config=NO_RETRIES), engine)
        described = ddb.describe_contributor_insights(TableName="cold")
        assert (described["ContributorInsightsStatus"], described["ContributorInsightsMode"]) == (
            "ENABLED",
            "THROTTLED_KEYS",
        )
        engine.faults.hot_key("c1", units=1, table="cold")
        for _ in range(4):
            try:
                ddb.get_item(TableName="cold", Key={"pk": {"S": "c1"}})
            except ClientError:
                pass
        # THROTTLED_KEYS: throttles only, no units.
        assert [(k.key, k.consumed_units) for k in engine.insights.top_keys("cold")] == [
            ("S:c1", 0.0)
        ]
        assert engine.insights.top_keys("cold")[0].throttled > 0
