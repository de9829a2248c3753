-- Success workload: a fresh key per request (every conditional put writes).
-- Keys are unique across wrk threads (thread id) and runs (args[1], a run id).
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local common = require("common")

local threads = {}
local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("tid", next_id)
  table.insert(threads, thread)
end

local run, counter = "run", 0

function init(args)
  run = args[1] or "run"
end

function request()
  counter = counter + 1
  return wrk.format("POST", "/", common.headers,
    common.body(run .. "-" .. tostring(tid) .. "-" .. counter))
end

done = common.done
