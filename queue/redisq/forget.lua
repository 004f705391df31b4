-- forget.lua removes a consumer from the group of every lane where it holds
-- no pending entry, so that closed replicas do not pile up in the groups. A
-- consumer that still holds entries is kept: its entries are claimed by
-- others after the visibility timeout, and the empty consumer stays in the
-- group (as does the consumer of a replica that died).
--
-- KEYS[1..]  -> the lane streams
-- ARGV[1]    -> the consumer group
-- ARGV[2]    -> the consumer
-- Returns the number of lanes whose group forgot the consumer.
local n = 0
for _, stream in ipairs(KEYS) do
  local ok, p = pcall(redis.call, 'XPENDING', stream, ARGV[1], '-', '+', 1, ARGV[2])
  if ok and #p == 0 then
    redis.call('XGROUP', 'DELCONSUMER', stream, ARGV[1], ARGV[2])
    n = n + 1
  end
end
return n
