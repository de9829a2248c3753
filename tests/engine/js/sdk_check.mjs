// Drives firstwrite's HTTP engine with the AWS SDK for JavaScript v3 and prints what it saw as
// one JSON object; tests/engine/test_js_sdk.py asserts on it. Usage: node sdk_check.mjs URL
import {
  BatchGetItemCommand,
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
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

await client.send(new DeleteTableCommand({ TableName }));
seen.tablesAfter = (await client.send(new ListTablesCommand({}))).TableNames;

process.stdout.write(JSON.stringify(seen));
