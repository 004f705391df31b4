-- ackbatch.lua settles many deliveries of one lane as delivered, as ack.lua
-- does for one: each entry that is still pending for this consumer with
-- the delivery count it had when fetched is acknowledged and deleted.
--
-- KEYS[1] -> the lane stream
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3] -> the lowest entry id of the pairs
-- ARGV[4] -> the highest entry id of the pairs
-- ARGV[5] -> how many of the consumer's pending entries to read between them
-- ARGV[6], ARGV[7], ... -> pairs: entry id, delivery count when fetched
-- Returns an array with, per pair in order, 1 when acked, 0 when the
-- delivery was no longer this consumer's.
--
-- One XPENDING reads the consumer's pending entries from the lowest id to
-- the highest (its own pending list, not the group's), rather than one per
-- entry: a pair it did not bring is looked up alone when the read was cut
-- at its count (other entries of the consumer lay between), and is no
-- longer this consumer's when the read was whole.
local count = tonumber(ARGV[5])
local pending, whole = {}, false
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[4], count, ARGV[2])
if ok then
  for _, e in ipairs(p) do pending[e[1]] = e[4] end
  whole = #p < count
end
local out, ids = {}, {}
for i = 6, #ARGV, 2 do
  local n = pending[ARGV[i]]
  if n == nil and ok and not whole then
    local ok1, q = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
    if ok1 and #q > 0 then n = q[1][4] end
  end
  if n ~= nil and tonumber(n) == tonumber(ARGV[i + 1]) then
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
