-- extend.lua restarts a delivery's visibility timeout: the entry is claimed
-- again by the same consumer with JUSTID, which resets its idle time without
-- counting a delivery. RETRYCOUNT pins the count to what it was, which is
-- what JUSTID alone does on Redis; an in-memory server that counts the claim
-- (miniredis, which the demo runs on) would otherwise fail the ack after it. The delivery must still be this consumer's, as in
-- ack.lua; a plain XCLAIM would take the entry from another consumer.
--
-- KEYS[1] -> the lane stream
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3] -> the entry id
-- ARGV[4] -> the delivery count when fetched
-- Returns 1 when extended, 0 when the delivery was no longer this consumer's.
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if not ok or #p == 0 or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'RETRYCOUNT', p[1][4], 'JUSTID')
return 1
