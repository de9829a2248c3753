// Backs a table up and restores it (from the backup, and to a point in time) with the AWS SDK
// for JavaScript v3 against firstwrite's HTTP engine, and prints what it saw as one JSON
// object; tests/engine/server/test_js_sdk.py asserts on it. Usage: node backup_check.mjs URL
import {
  CreateBackupCommand,
  CreateTableCommand,
  DeleteBackupCommand,
  DeleteTableCommand,
  DescribeBackupCommand,
  DescribeContinuousBackupsCommand,
  DynamoDBClient,
  ListBackupsCommand,
  PutItemCommand,
  QueryCommand,
  RestoreTableFromBackupCommand,
  RestoreTableToPointInTimeCommand,
  ScanCommand,
  UpdateContinuousBackupsCommand,
} from "@aws-sdk/client-dynamodb";

const url = process.argv[2];
const client = new DynamoDBClient({
  endpoint: url,
  region: "us-east-1",
  credentials: { accessKeyId: "AKIDJS", secretAccessKey: "js-secret" },
  maxAttempts: 1,
});
const TableName = "js-ledger";
const seen = {};

async function clock(body) {
  const answer = await fetch(`${url}/_firstwrite/clock`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return (await answer.json()).now;
}

async function failure(command) {
  try {
    await client.send(command);
    return null;
  } catch (err) {
    return { name: err.name, message: err.message, status: err.$metadata?.httpStatusCode };
  }
}

const base = Math.floor(await clock({ freeze: true })) - 3600;
await clock({ freeze: true, set: base });
await client.send(
  new CreateTableCommand({
    TableName,
    AttributeDefinitions: [
      { AttributeName: "pk", AttributeType: "S" },
      { AttributeName: "owner", AttributeType: "S" },
    ],
    KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
    GlobalSecondaryIndexes: [
      {
        IndexName: "by-owner",
        KeySchema: [{ AttributeName: "owner", KeyType: "HASH" }],
        Projection: { ProjectionType: "ALL" },
      },
    ],
    BillingMode: "PAY_PER_REQUEST",
  }),
);
await client.send(
  new UpdateContinuousBackupsCommand({
    TableName,
    PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
  }),
);
for (const [pk, owner] of [["a", "ann"], ["b", "bob"], ["c", "ann"]]) {
  await client.send(new PutItemCommand({ TableName, Item: { pk: { S: pk }, owner: { S: owner } } }));
}
const backup = (await client.send(new CreateBackupCommand({ TableName, BackupName: "js-backup" })))
  .BackupDetails;
seen.backup = {
  status: backup.BackupStatus,
  type: backup.BackupType,
  created: backup.BackupCreationDateTime instanceof Date,
  createdAt: backup.BackupCreationDateTime.getTime() / 1000,
};
await clock({ advance: 10 });
await client.send(new PutItemCommand({ TableName, Item: { pk: { S: "d" }, owner: { S: "ann" } } }));

const restored = (
  await client.send(
    new RestoreTableFromBackupCommand({ TargetTableName: "js-restored", BackupArn: backup.BackupArn }),
  )
).TableDescription;
seen.restored = {
  itemCount: restored.ItemCount,
  sourceBackupArn: restored.RestoreSummary.SourceBackupArn === backup.BackupArn,
  restoreDateTime: restored.RestoreSummary.RestoreDateTime.getTime() / 1000,
  inProgress: restored.RestoreSummary.RestoreInProgress,
};
const anns = await client.send(
  new QueryCommand({
    TableName: "js-restored",
    IndexName: "by-owner",
    KeyConditionExpression: "#o = :o",
    ExpressionAttributeNames: { "#o": "owner" },
    ExpressionAttributeValues: { ":o": { S: "ann" } },
  }),
);
seen.restoredAnns = anns.Items.map((i) => i.pk.S).sort();
seen.listed = (await client.send(new ListBackupsCommand({ TableName }))).BackupSummaries.map(
  (b) => b.BackupName,
);
const described = (await client.send(new DescribeBackupCommand({ BackupArn: backup.BackupArn })))
  .BackupDescription;
seen.sourceItemCount = described.SourceTableDetails.ItemCount;

await clock({ advance: 600 });
const window = (await client.send(new DescribeContinuousBackupsCommand({ TableName })))
  .ContinuousBackupsDescription.PointInTimeRecoveryDescription;
seen.window = {
  status: window.PointInTimeRecoveryStatus,
  earliest: window.EarliestRestorableDateTime.getTime() / 1000,
  latest: window.LatestRestorableDateTime.getTime() / 1000,
};
await client.send(
  new RestoreTableToPointInTimeCommand({
    SourceTableName: TableName,
    TargetTableName: "js-point",
    RestoreDateTime: new Date((base + 5) * 1000),
  }),
);
seen.pointItems = (await client.send(new ScanCommand({ TableName: "js-point" }))).Items.map(
  (i) => i.pk.S,
).sort();
seen.tooEarly = await failure(
  new RestoreTableToPointInTimeCommand({
    SourceTableName: TableName,
    TargetTableName: "js-early",
    RestoreDateTime: new Date((base - 60) * 1000),
  }),
);
seen.exists = await failure(
  new RestoreTableFromBackupCommand({ TargetTableName: "js-point", BackupArn: backup.BackupArn }),
);
await client.send(new DeleteBackupCommand({ BackupArn: backup.BackupArn }));
seen.gone = await failure(new DescribeBackupCommand({ BackupArn: backup.BackupArn }));
for (const name of [TableName, "js-restored", "js-point"]) {
  await client.send(new DeleteTableCommand({ TableName: name }));
}
await clock({ reset: true });
process.stdout.write(JSON.stringify(seen));
