// Runs PartiQL statements (ExecuteStatement, BatchExecuteStatement, ExecuteTransaction) with the
// AWS SDK for JavaScript v3 against firstwrite's HTTP engine, and prints what it saw as one
// JSON object; tests/engine/server/test_js_sdk.py asserts on it. Usage: node partiql_check.mjs URL
import {
  BatchExecuteStatementCommand,
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  ExecuteStatementCommand,
  ExecuteTransactionCommand,
} from "@aws-sdk/client-dynamodb";

const url = process.argv[2];
const client = new DynamoDBClient({
  endpoint: url,
  region: "us-east-1",
  credentials: { accessKeyId: "AKIDJS", secretAccessKey: "js-secret" },
  maxAttempts: 1,
});
const TableName = "js-songs";
const seen = {};

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
      reasons: err.CancellationReasons ?? null,
    };
  }
}

await client.send(
  new CreateTableCommand({
    TableName,
    AttributeDefinitions: [
      { AttributeName: "artist", AttributeType: "S" },
      { AttributeName: "n", AttributeType: "N" },
    ],
    KeySchema: [
      { AttributeName: "artist", KeyType: "HASH" },
      { AttributeName: "n", KeyType: "RANGE" },
    ],
    BillingMode: "PAY_PER_REQUEST",
  }),
);

// ExecuteStatement: INSERT and SELECT with parameters, then the same INSERT again.
const insert = `INSERT INTO "${TableName}" VALUE {'artist': ?, 'n': ?, 'title': ?, 'cover': ?}`;
const parameters = [{ S: "acme" }, { N: "1" }, { S: "first" }, { B: new Uint8Array([0, 255]) }];
seen.inserted = (await client.send(new ExecuteStatementCommand({ Statement: insert, Parameters: parameters })))
  .Items ?? null;
const selected = await client.send(
  new ExecuteStatementCommand({
    Statement: `SELECT title, cover FROM "${TableName}" WHERE artist = ? AND n = ?`,
    Parameters: [{ S: "acme" }, { N: "1" }],
  }),
);
seen.selected = selected.Items.map((i) => ({ title: i.title.S, cover: Array.from(i.cover.B) }));
seen.duplicate = await failure(new ExecuteStatementCommand({ Statement: insert, Parameters: parameters }));

// BatchExecuteStatement: three writes, the second an INSERT of an existing key.
const batch = await client.send(
  new BatchExecuteStatementCommand({
    Statements: [
      { Statement: `INSERT INTO "${TableName}" VALUE {'artist': 'acme', 'n': 2}` },
      { Statement: `INSERT INTO "${TableName}" VALUE {'artist': 'acme', 'n': 1}` },
      { Statement: `UPDATE "${TableName}" SET plays = 7 WHERE artist = ? AND n = ?`, Parameters: [{ S: "acme" }, { N: "1" }] },
    ],
  }),
);
seen.batch = batch.Responses.map((r) => r.Error ?? null);
const query = await client.send(
  new ExecuteStatementCommand({
    Statement: `SELECT n, plays FROM "${TableName}" WHERE artist = 'acme' ORDER BY n`,
  }),
);
seen.afterBatch = query.Items.map((i) => [Number(i.n.N), i.plays ? Number(i.plays.N) : null]);

// ExecuteTransaction: an INSERT that succeeds and one that fails cancel each other.
seen.cancelled = await failure(
  new ExecuteTransactionCommand({
    TransactStatements: [
      { Statement: `INSERT INTO "${TableName}" VALUE {'artist': 'acme', 'n': 3}` },
      { Statement: `UPDATE "${TableName}" SET plays = 8 WHERE artist = 'acme' AND n = 2` },
      { Statement: `INSERT INTO "${TableName}" VALUE {'artist': 'acme', 'n': 1}` },
    ],
  }),
);
const count = await client.send(
  new ExecuteStatementCommand({ Statement: `SELECT n FROM "${TableName}" WHERE artist = 'acme'` }),
);
seen.afterTransaction = count.Items.map((i) => Number(i.n.N)).sort();
await client.send(new DeleteTableCommand({ TableName }));
process.stdout.write(JSON.stringify(seen));
