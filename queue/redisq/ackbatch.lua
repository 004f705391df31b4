-- ackbatch.lua settles many deliveries of one lane as delivered, as ack.lua
-- does for one: each entry that is still pending for this consumer with
-- the delivery count it had when fetched is acknowledged and deleted.
--
-- KEYS[1] -> the lane stream
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3], ARGV[4], ... -> pairs: entry id, delivery count when fetched
-- Returns an array with, per pair in order, 1 when acked, 0 when the
-- delivery was no longer this consumer's.
local out, ids = {}, {}
for i = 3, #ARGV, 2 do
  local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if ok and #p > 0 and tonumber(p[1][4]) == tonumber(ARGV[i + 1]) then
    out[#out + 1] = 1
    ids[#ids + 1] = ARGV[i]
  else
    out[#out + 1] = 0
  end
end
if #ids > 0 then
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
  redis.call('XDEL', KEYS[1], unpack(ids))
end
return out
