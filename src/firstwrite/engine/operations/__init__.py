"""The operation table: every DynamoDB (and DynamoDB Streams) operation the engine serves.

Each operation is a function ``(ctx: Context) -> dict`` in the module of its family, one module
per family, the same shape each: its request checks (a declarative table for
:func:`~firstwrite.engine.validation.check`), then the work, reading and writing only through
``ctx.storage``. The HTTP server, the boto3 binding and the direct client all call
:meth:`Engine.execute <firstwrite.engine.api.Engine.execute>`, which looks the operation up
here, so there is exactly one code path per operation.
"""

from __future__ import annotations

from ..context import Operation
from . import (
    account,
    backups,
    batch,
    exports,
    imports,
    insights,
    items,
    partiql,
    pitr,
    policies,
    query,
    streams,
    tables,
    tags,
    transactions,
    ttl,
)

__all__ = ["DYNAMODB", "STREAMS", "Operation"]

DYNAMODB: dict[str, Operation] = {
    # control plane
    "CreateTable": tables.create_table,
    "DescribeTable": tables.describe_table,
    "ListTables": tables.list_tables,
    "UpdateTable": tables.update_table,
    "DeleteTable": tables.delete_table,
    "UpdateTimeToLive": ttl.update_time_to_live,
    "DescribeTimeToLive": ttl.describe_time_to_live,
    "TagResource": tags.tag_resource,
    "UntagResource": tags.untag_resource,
    "ListTagsOfResource": tags.list_tags_of_resource,
    "DescribeLimits": account.describe_limits,
    "DescribeEndpoints": account.describe_endpoints,
    "CreateBackup": backups.create_backup,
    "DescribeBackup": backups.describe_backup,
    "ListBackups": backups.list_backups,
    "DeleteBackup": backups.delete_backup,
    "RestoreTableFromBackup": backups.restore_table_from_backup,
    "UpdateContinuousBackups": pitr.update_continuous_backups,
    "DescribeContinuousBackups": pitr.describe_continuous_backups,
    "RestoreTableToPointInTime": pitr.restore_table_to_point_in_time,
    "PutResourcePolicy": policies.put_resource_policy,
    "GetResourcePolicy": policies.get_resource_policy,
    "DeleteResourcePolicy": policies.delete_resource_policy,
    "DescribeContributorInsights": insights.describe_contributor_insights,
    "UpdateContributorInsights": insights.update_contributor_insights,
    "ListContributorInsights": insights.list_contributor_insights,
    "ExportTableToPointInTime": exports.export_table_to_point_in_time,
    "DescribeExport": exports.describe_export,
    "ListExports": exports.list_exports,
    "ImportTable": imports.import_table,
    "DescribeImport": imports.describe_import,
    "ListImports": imports.list_imports,
    # items
    "PutItem": items.put_item,
    "GetItem": items.get_item,
    "UpdateItem": items.update_item,
    "DeleteItem": items.delete_item,
    "Query": query.query,
    "Scan": query.scan,
    "BatchGetItem": batch.batch_get_item,
    "BatchWriteItem": batch.batch_write_item,
    "TransactGetItems": transactions.transact_get_items,
    "TransactWriteItems": transactions.transact_write_items,
    "ExecuteStatement": partiql.execute_statement,
    "BatchExecuteStatement": partiql.batch_execute_statement,
    "ExecuteTransaction": partiql.execute_transaction,
}

STREAMS: dict[str, Operation] = {
    "ListStreams": streams.list_streams,
    "DescribeStream": streams.describe_stream,
    "GetShardIterator": streams.get_shard_iterator,
    "GetRecords": streams.get_records,
}
