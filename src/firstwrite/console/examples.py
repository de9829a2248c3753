"""Example requests for every operation the engine serves, for the raw request editor.

They work on a fresh database: reads and item writes use the console's examples table, table
changes use ``console-scratch`` (run CreateTable first). ARNs, stream and shard ids are looked
up on the engine when the page is drawn.
"""

from __future__ import annotations

import json
from typing import Any

from firstwrite.engine import DynamoDBError, Engine

from .records import pretty
from .seed import EXAMPLES_TABLE

SCRATCH = "console-scratch"
STREAMS_OPERATIONS = frozenset({"DescribeStream", "GetRecords", "GetShardIterator", "ListStreams"})


def _key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}}


def examples(engine: Engine, region: str) -> dict[str, str]:
    """Operation name -> example request body (pretty JSON), in the editor's menu order."""
    arn = f"arn:aws:dynamodb:{region}:{engine.account_id}:table/{EXAMPLES_TABLE}"
    stream_arn, shard_id = _stream(engine, region)
    bodies: dict[str, dict[str, Any]] = {
        "PutItem": {
            "TableName": EXAMPLES_TABLE,
            "Item": {**_key("my-item"), "note": {"S": "run me twice"}, "count": {"N": "1"}},
            "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
        "GetItem": {"TableName": EXAMPLES_TABLE, "Key": _key("my-item"), "ConsistentRead": True},
        "UpdateItem": {
            "TableName": EXAMPLES_TABLE,
            "Key": _key("my-item"),
            "UpdateExpression": "SET #c = if_not_exists(#c, :zero) + :one",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeNames": {"#c": "count"},
            "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}},
            "ReturnValues": "ALL_NEW",
        },
        "DeleteItem": {
            "TableName": EXAMPLES_TABLE,
            "Key": _key("my-item"),
            "ReturnValues": "ALL_OLD",
        },
        "Query": {
            "TableName": EXAMPLES_TABLE,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": "my-item"}},
        },
        "Scan": {"TableName": EXAMPLES_TABLE, "Limit": 3},
        "BatchWriteItem": {
            "RequestItems": {
                EXAMPLES_TABLE: [
                    {"PutRequest": {"Item": {**_key("batch-1"), "n": {"N": "1"}}}},
                    {"PutRequest": {"Item": {**_key("batch-2"), "n": {"N": "2"}}}},
                ]
            }
        },
        "BatchGetItem": {
            "RequestItems": {EXAMPLES_TABLE: {"Keys": [_key("batch-1"), _key("batch-2")]}}
        },
        "TransactWriteItems": {
            "TransactItems": [
                {
                    "Put": {
                        "TableName": EXAMPLES_TABLE,
                        "Item": {**_key("transfer-1"), "amount": {"N": "1"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Update": {
                        "TableName": EXAMPLES_TABLE,
                        "Key": _key("batch-1"),
                        "UpdateExpression": "SET n = n - :amt",
                        "ConditionExpression": "n >= :amt",
                        "ExpressionAttributeValues": {":amt": {"N": "1"}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        },
        "TransactGetItems": {
            "TransactItems": [
                {"Get": {"TableName": EXAMPLES_TABLE, "Key": _key("batch-1")}},
                {"Get": {"TableName": EXAMPLES_TABLE, "Key": _key("batch-2")}},
            ]
        },
        "ListTables": {"Limit": 10},
        "DescribeTable": {"TableName": EXAMPLES_TABLE},
        "CreateTable": {
            "TableName": SCRATCH,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
        "UpdateTable": {
            "TableName": SCRATCH,
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        },
        "DeleteTable": {"TableName": SCRATCH},
        "DescribeTimeToLive": {"TableName": EXAMPLES_TABLE},
        "DescribeLimits": {},
        "DescribeEndpoints": {},
        "UpdateTimeToLive": {
            "TableName": SCRATCH,
            "TimeToLiveSpecification": {"Enabled": True, "AttributeName": "expires_at"},
        },
        "TagResource": {"ResourceArn": arn, "Tags": [{"Key": "team", "Value": "payments"}]},
        "ListTagsOfResource": {"ResourceArn": arn},
        "UntagResource": {"ResourceArn": arn, "TagKeys": ["team"]},
        "ListStreams": {"TableName": EXAMPLES_TABLE},
        "DescribeStream": {"StreamArn": stream_arn},
        "GetShardIterator": {
            "StreamArn": stream_arn,
            "ShardId": shard_id,
            "ShardIteratorType": "TRIM_HORIZON",
        },
        "GetRecords": {
            "ShardIterator": "paste the ShardIterator GetShardIterator returned",
            "Limit": 10,
        },
        "ExecuteStatement": {
            "Statement": f'SELECT * FROM "{EXAMPLES_TABLE}" WHERE pk = ?',
            "Parameters": [{"S": "my-item"}],
        },
        "BatchExecuteStatement": {
            "Statements": [
                {"Statement": f"SELECT * FROM \"{EXAMPLES_TABLE}\" WHERE pk = 'batch-1'"},
                {"Statement": f"SELECT * FROM \"{EXAMPLES_TABLE}\" WHERE pk = 'batch-2'"},
            ]
        },
        "ExecuteTransaction": {
            "TransactStatements": [
                {
                    "Statement": f"INSERT INTO \"{EXAMPLES_TABLE}\" VALUE {{'pk': ?, 'n': 1}}",
                    "Parameters": [{"S": "partiql-1"}],
                }
            ]
        },
        "CreateBackup": {"TableName": EXAMPLES_TABLE, "BackupName": "before-the-change"},
        "ListBackups": {"TableName": EXAMPLES_TABLE},
        "DescribeBackup": {"BackupArn": "paste the BackupArn CreateBackup returned"},
        "DeleteBackup": {"BackupArn": "paste the BackupArn CreateBackup returned"},
        "RestoreTableFromBackup": {
            "TargetTableName": f"{EXAMPLES_TABLE}-restored",
            "BackupArn": "paste the BackupArn CreateBackup returned",
        },
        "UpdateContinuousBackups": {
            "TableName": EXAMPLES_TABLE,
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        },
        "DescribeContinuousBackups": {"TableName": EXAMPLES_TABLE},
        "RestoreTableToPointInTime": {
            "SourceTableName": EXAMPLES_TABLE,
            "TargetTableName": f"{EXAMPLES_TABLE}-as-of",
            "UseLatestRestorableTime": True,
        },
        "PutResourcePolicy": {
            "ResourceArn": arn,
            "Policy": json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Deny",
                            "Principal": {"AWS": f"arn:aws:iam::{engine.account_id}:user/GUEST"},
                            "Action": "dynamodb:DeleteItem",
                            "Resource": arn,
                        }
                    ],
                }
            ),
        },
        "UpdateContributorInsights": {
            "TableName": EXAMPLES_TABLE,
            "ContributorInsightsAction": "ENABLE",
        },
        "DescribeContributorInsights": {"TableName": EXAMPLES_TABLE},
        "ListContributorInsights": {},
        "ExportTableToPointInTime": {
            "TableArn": arn,
            "S3Bucket": "my-exports",
            "S3Prefix": "nightly",
            "ExportFormat": "DYNAMODB_JSON",
        },
        "DescribeExport": {"ExportArn": f"{arn}/export/01700000000000-a1b2c3d4"},
        "ListExports": {"TableArn": arn},
        "ImportTable": {
            "S3BucketSource": {"S3Bucket": "my-exports", "S3KeyPrefix": "nightly/"},
            "InputFormat": "DYNAMODB_JSON",
            "InputCompressionType": "GZIP",
            "TableCreationParameters": {
                "TableName": f"{EXAMPLES_TABLE}-imported",
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        },
        "DescribeImport": {"ImportArn": f"{arn}-imported/import/01700000000000-a1b2c3d4"},
        "ListImports": {},
        "GetResourcePolicy": {"ResourceArn": arn},
        "DeleteResourcePolicy": {"ResourceArn": arn},
    }
    return {op: pretty(body) for op, body in bodies.items()}


def _stream(engine: Engine, region: str) -> tuple[str, str]:
    """The examples table's stream ARN and first shard id (placeholders when there is none)."""
    arn, shard = "the LatestStreamArn DescribeTable returns", "the ShardId DescribeStream returns"
    try:
        table = engine.execute("DescribeTable", {"TableName": EXAMPLES_TABLE}, region=region)
        arn = table["Table"].get("LatestStreamArn") or arn
        stream = engine.execute(
            "DescribeStream", {"StreamArn": arn}, region=region, service="streams"
        )
        shards = stream["StreamDescription"].get("Shards") or []
        if shards:
            shard = shards[0]["ShardId"]
    except (DynamoDBError, KeyError):
        pass
    return arn, shard
