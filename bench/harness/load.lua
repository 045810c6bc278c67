-- The request generator of bench/harness/wrk.ts, for one wrk thread. Arguments after "--":
--   mode tokens-file method path body plants start seed
-- mode: "static" (the same request each time), "random" (the path's {id} is a random id of
-- 1..plants), "walk" ({id} is start+1, start+2, ... wrapping at plants: distinct ids for
-- DELETE) or "keyed" (the same request with an Idempotency-Key of its own: the second the
-- turn began, its seed and the request's number, so that no two turns share a key). Requests take the tokens of tokens-file in turn, one a request. Each request is
-- made from a template built once per token in init(), so it costs one concatenation at most.

local templates = {}
local mode, plants, start, keyPrefix
-- Global: done() reads it through thread:get, to tell the harness which ids were used.
-- It starts at -1 because wrk calls request() once before the run, to check that the
-- request parses (script_verify_request in wrk's src/script.c), and sends nothing of it.
counter = -1

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

-- The request's text split where its one placeholder ({id} or {key}) goes.
local function template(method, path, headers, body)
  local text = wrk.format(method, path, headers, body)
  for _, placeholder in ipairs({ "{id}", "{key}" }) do
    local at = text:find(placeholder, 1, true)
    if at ~= nil then return { text:sub(1, at - 1), text:sub(at + #placeholder) } end
  end
  return { text, "" }
end

function init(args)
  mode = args[1]
  local method, path, body = args[3], args[4], args[5]
  plants, start = tonumber(args[6]), tonumber(args[7])
  math.randomseed(tonumber(args[8]))
  keyPrefix = os.time() .. "-" .. args[8] .. "-"
  if body == "" then body = nil end
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  if mode == "keyed" then headers["Idempotency-Key"] = "{key}" end
  if body ~= nil then headers["Content-Type"] = "application/json" end
  for token in io.lines(args[2]) do
    headers["Authorization"] = "Bearer " .. token
    templates[#templates + 1] = template(method, path, headers, body)
  end
  if #templates == 0 then error("no tokens in " .. args[2]) end
end

function request()
  counter = counter + 1
  local t = templates[counter % #templates + 1]
  if mode == "random" then return t[1] .. math.random(plants) .. t[2] end
  if mode == "walk" then return t[1] .. ((start + counter - 1) % plants + 1) .. t[2] end
  if mode == "keyed" then return t[1] .. keyPrefix .. counter .. t[2] end
  return t[1]
end

-- One line the harness parses; wrk's own report comes before it. os.clock() is the CPU time
-- of the whole wrk process (all its threads) so far: the load generator's side of the check.
function done(summary, latency, requests)
  local sent = 0
  for _, thread in ipairs(threads) do sent = sent + thread:get("counter") end
  local e = summary.errors
  io.write(string.format(
    'BENCH-WRK {"seconds":%.6f,"requests":%d,"sent":%d,"p50us":%d,"p99us":%d,' ..
    '"meanUs":%.1f,"maxUs":%d,"connect":%d,"read":%d,"write":%d,"status":%d,' ..
    '"timeout":%d,"cpuSeconds":%.6f}\n',
    summary.duration / 1e6, summary.requests, sent, latency:percentile(50),
    latency:percentile(99), latency.mean, latency.max, e.connect, e.read, e.write,
    e.status, e.timeout, os.clock()))
end
