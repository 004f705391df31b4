-- ack.lua settles a delivery as delivered: the entry is acknowledged and
-- deleted from the stream, so the stream does not grow with settled jobs.
-- The delivery must still be this consumer's: pending for it with the same
-- delivery count as when it was fetched (else the visibility timeout passed
-- and the entry was claimed again, or it was already settled).
--
-- KEYS[1] -> the lane stream
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3] -> the entry id
-- ARGV[4] -> the delivery count when fetched
-- Returns 1 when acked, 0 when the delivery was no longer this consumer's.
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if not ok or #p == 0 or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
return 1
