-- state.lua: read the schedule's state with the Redis time it was read at.
--
-- KEYS[1] -> the pacer hash: sluice:{name}:pacer
--
-- Returns an array of strings: now (microseconds since the epoch), tat, rate,
-- burst, rate_override, burst_override, paused, throttle_until, and
-- adapt.lua's eff_rate, a_episode, a_cuts, a_holds, a_last_cut, a_base;
-- missing fields are empty strings.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', KEYS[1], 'tat', 'rate', 'burst', 'rate_override', 'burst_override', 'paused', 'throttle_until',
  'eff_rate', 'a_episode', 'a_cuts', 'a_holds', 'a_last_cut', 'a_base')
local out = {string.format('%.3f', now)}
for i = 1, 13 do
  out[i + 1] = h[i] or ''
end
return out
