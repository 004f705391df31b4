-- retry.lua settles a delivery as failed for now: the entry is acknowledged
-- and deleted, and the job goes back into its lane, due after a delay (into
-- the due-later sorted set, scored by Redis' TIME plus the delay) or at once
-- (appended to the stream) when the delay is not positive. The delivery must
-- still be this consumer's, as in ack.lua.
--
-- KEYS[1] -> the lane stream
-- KEYS[2] -> the lane's due-later sorted set
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3] -> the entry id
-- ARGV[4] -> the delivery count when fetched
-- ARGV[5] -> the delay in ms
-- ARGV[6] -> the attempts made so far (the delivered attempt)
-- ARGV[7] -> the job id
-- ARGV[8] -> a unique token
-- ARGV[9] -> the job as JSON, with its last error
-- Returns 1 when retried, 0 when the delivery was no longer this consumer's.
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if not ok or #p == 0 or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
local delay = tonumber(ARGV[5])
if delay > 0 then
  local t = redis.call('TIME')
  local due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + delay
  local member = ARGV[8] .. ':' .. ARGV[6] .. ':' .. #ARGV[7] .. ':' .. ARGV[7] .. ARGV[9]
  redis.call('ZADD', KEYS[2], due, member)
else
  redis.call('XADD', KEYS[1], '*', 'a', ARGV[6], 'id', ARGV[7], 'j', ARGV[9])
end
return 1
