-- deadletter.lua settles a delivery as failed for good: the entry is
-- acknowledged and deleted, and the job is appended to the dead-letter stream
-- with its reason; the index maps the job id to that dead-letter entry. The
-- delivery must still be this consumer's, as in ack.lua.
--
-- KEYS[1] -> the lane stream
-- KEYS[2] -> the dead-letter stream
-- KEYS[3] -> the dead-letter index hash (job id -> dead-letter entry id)
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3] -> the entry id
-- ARGV[4] -> the delivery count when fetched
-- ARGV[5] -> the job id
-- ARGV[6] -> the lane name
-- ARGV[7] -> the attempts made (the delivered attempt)
-- ARGV[8] -> the reason
-- ARGV[9] -> the job as JSON
-- Returns 1 when dead-lettered, 0 when the delivery was no longer this
-- consumer's.
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if not ok or #p == 0 or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
local did = redis.call('XADD', KEYS[2], '*', 'id', ARGV[5], 'l', ARGV[6], 'a', ARGV[7], 'r', ARGV[8], 'j', ARGV[9])
redis.call('HSET', KEYS[3], ARGV[5], did)
return 1
