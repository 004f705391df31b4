-- release.lua gives a delivery's entry back to the lane at once, unsent:
-- it stays pending but looks idle for the whole visibility timeout, so the
-- next fetch of any consumer claims it, and its delivery count is lowered
-- by one so that the claim does not count as an attempt.
--
-- KEYS[1] -> the lane stream
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3] -> the entry id
-- ARGV[4] -> the delivery count when fetched
-- ARGV[5] -> the visibility timeout, milliseconds
-- Returns 1 when released, 0 when the delivery was no longer this consumer's.
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if not ok or #p == 0 or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then
  return 0
end
local retry = tonumber(ARGV[4]) - 1
if retry < 0 then retry = 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'IDLE', ARGV[5], 'RETRYCOUNT', retry, 'JUSTID')
return 1
