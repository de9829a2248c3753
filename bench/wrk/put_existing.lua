-- Failing workload: the same existing key on every request (every put fails its condition
-- with a 400 ConditionalCheckFailedException). One precomputed request: no per-request Lua.
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local common = require("common")

wrk.method = "POST"
wrk.path = "/"
wrk.headers = common.headers
wrk.body = common.body("existing-key")

done = common.done
