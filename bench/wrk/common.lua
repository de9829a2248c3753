-- Shared by put_fresh.lua and put_existing.lua: DynamoDB JSON 1.0 request headers with a
-- dummy SigV4 Authorization header (the servers under test accept any credentials), and a
-- done() hook printing one JSON line the harness parses.
local M = {}

M.headers = {
  ["Content-Type"] = "application/x-amz-json-1.0",
  ["X-Amz-Target"] = "DynamoDB_20120810.PutItem",
  ["X-Amz-Date"] = "20240101T000000Z",
  ["Authorization"] = "AWS4-HMAC-SHA256 Credential=AKIDBENCH/20240101/us-east-1/dynamodb/aws4_request, "
    .. "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
    .. "Signature=0000000000000000000000000000000000000000000000000000000000000000",
}

function M.body(key)
  return '{"TableName":"bench","Item":{"pk":{"S":"' .. key .. '"},"payload":{"S":"'
    .. string.rep("x", 100) .. '"},"n":{"N":"42"}},'
    .. '"ConditionExpression":"attribute_not_exists(pk)"}'
end

function M.done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,'
      .. '"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(99)))
end

return M
