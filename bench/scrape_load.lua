-- wrk script for bench/scrape_load.sh: GET /metrics, optionally paced, counting non-2xx answers.
--   wrk ... -s scrape_load.lua URL -- INTERVAL_MS
-- INTERVAL_MS > 0: each connection waits that long before each request (a scraper's interval);
-- 0: back to back, as fast as the server answers. done() prints one "key value" per line.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  interval_ms = tonumber(args[1] or "0")
  non2xx = 0
end

function delay()
  return interval_ms
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("non2xx")
  end
  local e = summary.errors
  io.write(string.format("requests %d\nduration_s %.3f\np50_ms %.3f\np99_ms %.3f\nmax_ms %.3f\n",
                         summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3,
                         latency:percentile(99) / 1e3, latency.max / 1e3))
  io.write(string.format("errors_connect %d\nerrors_read %d\nerrors_write %d\nerrors_timeout %d\nnon2xx %d\n",
                         e.connect, e.read, e.write, e.timeout, bad))
end
