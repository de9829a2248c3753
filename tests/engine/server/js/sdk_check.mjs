// Drives firstwrite's HTTP engine with the AWS SDK for JavaScript v3 and prints what it saw as
// one JSON object; tests/engine/server/test_js_sdk.py asserts on it. Usage: node sdk_check.mjs URL
import {
  BatchGetItemCommand,
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
  QueryCommand,
  DescribeTableCommand,
  ScanCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  UpdateTableCommand,
  paginateQuery,
} from "@aws-sdk/client-dynamodb";

const client = new DynamoDBClient({
  endpoint: process.argv[2],
  region: "us-east-1",
  credentials: { accessKeyId: "AKIDJS", secretAccessKey: "js-secret" },
  maxAttempts: 1,
});
const TableName = "js-orders";
const seen = {};

// The error as the SDK surfaces it: modeled class name, message, status, modeled members.
async function failure(command) {
  try {
    await client.send(command);
    return null;
  } catch (err) {
    return {
      name: err.name,
      message: err.message,
      status: err.$metadata?.httpStatusCode,
      fault: err.$fault,
      item: err.Item ?? null,
      reasons: err.CancellationReasons ?? null,
    };
  }
}

await client.send(
  new CreateTableCommand({
    TableName,
    AttributeDefinitions: [
      { AttributeName: "pk", AttributeType: "S" },
      { AttributeName: "sk", AttributeType: "N" },
    ],
    KeySchema: [
      { AttributeName: "pk", KeyType: "HASH" },
      { AttributeName: "sk", KeyType: "RANGE" },
    ],
    BillingMode: "PAY_PER_REQUEST",
  }),
);
seen.tables = (await client.send(new ListTablesCommand({}))).TableNames;

const item = {
  pk: { S: "order-1" },
  sk: { N: "1" },
  blob: { B: Uint8Array.from([0, 1, 2, 253, 254, 255]) },
  big: { N: "12345678901234567890123456789012345678" },
  tags: { NS: ["10", "9", "1.50"] },
};
const absent = { ConditionExpression: "attribute_not_exists(pk)" };
await client.send(new PutItemCommand({ TableName, Item: item, ...absent }));
seen.duplicate = await failure(
  new PutItemCommand({
    TableName,
    Item: item,
    ...absent,
    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
  }),
);
if (seen.duplicate?.item?.blob) seen.duplicate.item.blob = Array.from(seen.duplicate.item.blob.B);

const got = await client.send(
  new GetItemCommand({ TableName, Key: { pk: item.pk, sk: item.sk }, ConsistentRead: true }),
);
seen.get = {
  blob: Array.from(got.Item.blob.B),
  big: got.Item.big.N,
  tags: [...got.Item.tags.NS].sort(),
};

const updated = await client.send(
  new UpdateItemCommand({
    TableName,
    Key: { pk: item.pk, sk: item.sk },
    UpdateExpression: "SET #s = :s ADD visits :one",
    ExpressionAttributeNames: { "#s": "status" },
    ExpressionAttributeValues: { ":s": { S: "PAID" }, ":one": { N: "1" } },
    ReturnValues: "UPDATED_NEW",
  }),
);
seen.updated = updated.Attributes;

for (let sk = 2; sk <= 10; sk++) {
  await client.send(new PutItemCommand({ TableName, Item: { pk: item.pk, sk: { N: String(sk) } } }));
}
const pages = [];
for await (const page of paginateQuery(
  { client, pageSize: 4 },
  {
    TableName,
    KeyConditionExpression: "pk = :p",
    ExpressionAttributeValues: { ":p": item.pk },
    ScanIndexForward: false,
  },
)) {
  pages.push(page.Items.map((i) => Number(i.sk.N)));
}
seen.pages = pages;
const counted = await client.send(
  new QueryCommand({
    TableName,
    KeyConditionExpression: "pk = :p AND sk BETWEEN :lo AND :hi",
    ExpressionAttributeValues: { ":p": item.pk, ":lo": { N: "3" }, ":hi": { N: "7" } },
    Select: "COUNT",
  }),
);
seen.count = counted.Count;

const batch = await client.send(
  new BatchGetItemCommand({
    RequestItems: {
      [TableName]: {
        Keys: [
          { pk: item.pk, sk: { N: "2" } },
          { pk: item.pk, sk: { N: "99" } },
        ],
      },
    },
  }),
);
seen.batch = batch.Responses[TableName].map((i) => Number(i.sk.N));

seen.cancelled = await failure(
  new TransactWriteItemsCommand({
    TransactItems: [
      { Put: { TableName, Item: { pk: { S: "new" }, sk: { N: "1" } } } },
      {
        ConditionCheck: {
          TableName,
          Key: { pk: item.pk, sk: item.sk },
          ConditionExpression: "#s = :s",
          ExpressionAttributeNames: { "#s": "status" },
          ExpressionAttributeValues: { ":s": { S: "REFUNDED" } },
        },
      },
    ],
  }),
);
const afterCancel = await client.send(
  new GetItemCommand({ TableName, Key: { pk: { S: "new" }, sk: { N: "1" } } }),
);
seen.cancelledWrote = afterCancel.Item !== undefined;

seen.invalid = await failure(
  new PutItemCommand({ TableName, Item: item, ConditionExpression: "attribute_not_exists(" }),
);
seen.missing = await failure(new GetItemCommand({ TableName: "nope", Key: { pk: { S: "x" } } }));

// Secondary indexes: created with the table and later, queried and paged by the SDK.
const Indexed = "js-indexed";
const keyOf = (name, type) => ({ AttributeName: name, KeyType: type });
const created = await client.send(
  new CreateTableCommand({
    TableName: Indexed,
    AttributeDefinitions: [
      { AttributeName: "pk", AttributeType: "S" },
      { AttributeName: "sk", AttributeType: "N" },
      { AttributeName: "tenant", AttributeType: "S" },
      { AttributeName: "rank", AttributeType: "N" },
    ],
    KeySchema: [keyOf("pk", "HASH"), keyOf("sk", "RANGE")],
    GlobalSecondaryIndexes: [
      {
        IndexName: "by-tenant",
        KeySchema: [keyOf("tenant", "HASH"), keyOf("sk", "RANGE")],
        Projection: { ProjectionType: "KEYS_ONLY" },
      },
      {
        // A multi-attribute key: two HASH and two RANGE attributes.
        IndexName: "multi",
        KeySchema: [
          keyOf("tenant", "HASH"),
          keyOf("pk", "HASH"),
          keyOf("rank", "RANGE"),
          keyOf("sk", "RANGE"),
        ],
        Projection: { ProjectionType: "KEYS_ONLY" },
      },
    ],
    LocalSecondaryIndexes: [
      {
        IndexName: "by-rank",
        KeySchema: [keyOf("pk", "HASH"), keyOf("rank", "RANGE")],
        Projection: { ProjectionType: "ALL" },
      },
    ],
    BillingMode: "PAY_PER_REQUEST",
  }),
);
seen.indexCreated = {
  gsi: created.TableDescription.GlobalSecondaryIndexes.map((i) => [i.IndexName, i.IndexStatus]),
  multiKey: created.TableDescription.GlobalSecondaryIndexes[1].KeySchema.map(
    (k) => `${k.AttributeName}:${k.KeyType}`,
  ),
  lsi: created.TableDescription.LocalSecondaryIndexes.map((i) => i.IndexName),
};
for (let n = 1; n <= 5; n++) {
  await client.send(
    new PutItemCommand({
      TableName: Indexed,
      Item: {
        pk: { S: `p${n % 2}` },
        sk: { N: String(n) },
        tenant: { S: "acme" },
        rank: { N: String(10 - n) },
        city: { S: n % 2 ? "Oslo" : "Lima" },
      },
    }),
  );
}
const indexPages = [];
for await (const page of paginateQuery(
  { client, pageSize: 2 },
  {
    TableName: Indexed,
    IndexName: "by-tenant",
    KeyConditionExpression: "tenant = :t",
    ExpressionAttributeValues: { ":t": { S: "acme" } },
  },
)) {
  indexPages.push({
    sks: page.Items.map((i) => Number(i.sk.N)),
    attributes: page.Items.length ? Object.keys(page.Items[0]).sort() : [],
    last: page.LastEvaluatedKey ? Object.keys(page.LastEvaluatedKey).sort() : null,
  });
}
seen.indexPages = indexPages;
const multiPages = [];
for await (const page of paginateQuery(
  { client, pageSize: 1 },
  {
    TableName: Indexed,
    IndexName: "multi",
    KeyConditionExpression: "tenant = :t AND pk = :p AND #rank > :r",
    ExpressionAttributeNames: { "#rank": "rank" }, // a reserved word
    ExpressionAttributeValues: { ":t": { S: "acme" }, ":p": { S: "p1" }, ":r": { N: "5" } },
  },
)) {
  multiPages.push({
    sks: page.Items.map((i) => Number(i.sk.N)),
    last: page.LastEvaluatedKey ? Object.keys(page.LastEvaluatedKey).sort() : null,
  });
}
seen.multiPages = multiPages;
seen.multiSkip = await failure(
  new QueryCommand({
    TableName: Indexed,
    IndexName: "multi",
    KeyConditionExpression: "tenant = :t AND pk = :p AND sk = :s",
    ExpressionAttributeValues: { ":t": { S: "acme" }, ":p": { S: "p1" }, ":s": { N: "1" } },
  }),
);
const local = await client.send(
  new QueryCommand({
    TableName: Indexed,
    IndexName: "by-rank",
    KeyConditionExpression: "pk = :p",
    ExpressionAttributeValues: { ":p": { S: "p1" } },
    ConsistentRead: true,
  }),
);
seen.localRanks = local.Items.map((i) => Number(i.rank.N));
seen.consistentGsi = await failure(
  new QueryCommand({
    TableName: Indexed,
    IndexName: "by-tenant",
    KeyConditionExpression: "tenant = :t",
    ExpressionAttributeValues: { ":t": { S: "acme" } },
    ConsistentRead: true,
  }),
);
const added = await client.send(
  new UpdateTableCommand({
    TableName: Indexed,
    AttributeDefinitions: [{ AttributeName: "city", AttributeType: "S" }],
    GlobalSecondaryIndexUpdates: [
      {
        Create: {
          IndexName: "by-city",
          KeySchema: [keyOf("city", "HASH")],
          Projection: { ProjectionType: "ALL" },
        },
      },
    ],
  }),
);
seen.addedStatus = added.TableDescription.GlobalSecondaryIndexes.map((i) => i.IndexStatus);
for (let tries = 0; ; tries++) {
  const table = (await client.send(new DescribeTableCommand({ TableName: Indexed }))).Table;
  if (table.GlobalSecondaryIndexes.every((i) => i.IndexStatus === "ACTIVE")) break;
  if (tries > 500) throw new Error("by-city never became ACTIVE");
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const oslo = await client.send(
  new ScanCommand({ TableName: Indexed, IndexName: "by-city", Select: "COUNT" }),
);
seen.cityCount = oslo.Count;
await client.send(new DeleteTableCommand({ TableName: Indexed }));

await client.send(new DeleteTableCommand({ TableName }));
seen.tablesAfter = (await client.send(new ListTablesCommand({}))).TableNames;

process.stdout.write(JSON.stringify(seen));
