-- resume.lua: hold the schedule back while replicas leave degraded mode.
--
-- KEYS[1] -> the pacer hash: sluice:{name}:pacer
-- ARGV[1] -> d, microseconds: no slot of the schedule is granted before now + d
--
-- A replica that paced itself locally while Redis was away runs this when
-- Redis answers again, before it draws on the schedule: the other replicas
-- may still hold local slots until they hear Redis too, and no slot of the
-- schedule may fall among them. It moves tat forward only (never back) and
-- grants nothing. Unlike throttle.lua it leaves throttle_until alone: this
-- is no answer from the provider.
--
-- Returns an array of strings: now and the new tat, Redis clock,
-- microseconds since the epoch.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local hold = now + tonumber(ARGV[1])
local tat = tonumber(redis.call('HGET', KEYS[1], 'tat')) or hold
if tat < hold then tat = hold end
-- gtat '' drops the schedule's gaps (reserve.lua): they may lie inside
-- the hold.
redis.call('HSET', KEYS[1], 'tat', string.format('%.3f', tat), 'last_now', string.format('%.3f', now), 'gtat', '')
return {string.format('%.3f', now), string.format('%.3f', tat)}
