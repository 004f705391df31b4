-- reserve.lua: grant up to n slots of the cluster-wide schedule (GCRA).
--
-- KEYS[1] -> the pacer hash: sluice:{name}:pacer
-- ARGV[1] -> configured rate, slots per second (> 0)
-- ARGV[2] -> configured burst, slots (>= 1)
-- ARGV[3] -> n, the most slots wanted (>= 1)
-- ARGV[4] -> horizon, microseconds: no slot is granted further ahead of now
-- ARGV[5] -> poll, microseconds: how long a paused caller waits before asking again
--
-- Returns an array of strings:
--   [1] granted slots (0 when paused or when the schedule is full to the horizon)
--   [2] time of the first granted slot, Redis clock, microseconds since the epoch
--   [3] interval between slots, microseconds
--   [4] now, Redis clock, microseconds since the epoch
--   [5] retry after, microseconds (when nothing was granted)
--   [6] effective rate, slots per second
--   [7] "paused" or ""
--
-- Hash fields: tat (the theoretical arrival time of the next free slot), last_now
-- (the Redis time of the previous call, to detect a clock that went back),
-- rate and burst (as configured by the last caller, for status), rate_override
-- and burst_override (set by an operator), paused.
--
-- Time comes from Redis TIME only, so replicas' clocks cannot bend the rate.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local horizon = tonumber(ARGV[4])
local poll = tonumber(ARGV[5])

local h = redis.call('HMGET', KEYS[1], 'tat', 'last_now', 'rate_override', 'burst_override', 'paused')
local ro = tonumber(h[3])
if ro and ro > 0 then rate = ro end
local bo = tonumber(h[4])
if bo and bo >= 1 then burst = bo end
local interval = 1000000 / rate
local f = function(x) return string.format('%.3f', x) end

if h[5] == '1' then
  return {'0', f(now), f(interval), f(now), f(poll), f(rate), 'paused'}
end

local tat = tonumber(h[1]) or (now - (burst - 1) * interval)
local last = tonumber(h[2]) or now
if now < last then
  -- The Redis clock went back: keep the schedule where it was relative to
  -- now, so that slots already granted are not granted again.
  tat = tat - (last - now)
end
-- An idle schedule lets at most burst slots go at once.
local floor = now - (burst - 1) * interval
if tat < floor then tat = floor end

local limit = now + horizon
if tat > limit then
  -- Full to the horizon: come back when n slots (or at least one) fit.
  local retry = tat - limit + (want - 1) * interval
  if retry > horizon then retry = tat - limit end
  redis.call('HSET', KEYS[1], 'last_now', f(now), 'tat', f(tat), 'rate', ARGV[1], 'burst', ARGV[2])
  return {'0', f(tat), f(interval), f(now), f(retry), f(rate), ''}
end

local n = math.floor((limit - tat) / interval) + 1
if n > want then n = want end
local first = tat
tat = tat + n * interval
redis.call('HSET', KEYS[1], 'tat', f(tat), 'last_now', f(now), 'rate', ARGV[1], 'burst', ARGV[2])
return {tostring(n), f(first), f(interval), f(now), '0', f(rate), ''}
