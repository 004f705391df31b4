-- throttle.lua: hold the whole schedule back, as a provider's Retry-After asks.
--
-- KEYS[1] -> the pacer hash: sluice:{name}:pacer
-- ARGV[1] -> d, microseconds: no slot is granted before now + d
--
-- Returns the Redis time (microseconds since the epoch, as a string) until
-- which the schedule is held. A shorter throttle never shortens a longer one.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local untilT = now + tonumber(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'tat', 'throttle_until')
local tat = tonumber(h[1]) or now
local prev = tonumber(h[2]) or 0
if prev > untilT then untilT = prev end
if tat < untilT then tat = untilT end
-- gtat '' drops the schedule's gaps (reserve.lua): they may lie inside
-- the hold.
redis.call('HSET', KEYS[1], 'tat', string.format('%.3f', tat),
  'throttle_until', string.format('%.3f', untilT), 'last_now', string.format('%.3f', now), 'gtat', '')
return string.format('%.3f', untilT)
