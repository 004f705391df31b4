-- cancel.lua removes one job that is waiting in a lane stream or dead, so
-- that it is never sent. A stream entry that a consumer holds (pending in
-- the group) is left alone: it may be on its way to the provider.
--
-- KEYS[1] -> mode 'entry': the lane stream; mode 'dead': the dead-letter stream
-- KEYS[2] -> mode 'dead': the dead-letter index hash (job id -> entry id)
-- ARGV[1] -> the mode: 'entry' or 'dead'
-- ARGV[2] -> the entry id
-- ARGV[3] -> the job id the entry must hold
-- ARGV[4] -> mode 'entry': the consumer group
-- Returns 1 when removed, 0 when the entry is gone or holds another job,
-- 2 when the entry is pending (in flight).
local stream, mode, eid, id = KEYS[1], ARGV[1], ARGV[2], ARGV[3]

local e = redis.call('XRANGE', stream, eid, eid)
if #e == 0 then return 0 end
local f, held = e[1][2], nil
for i = 1, #f, 2 do
  if f[i] == 'id' then held = f[i + 1] end
end
if held ~= id then return 0 end

if mode == 'entry' then
  local ok, p = pcall(redis.call, 'XPENDING', stream, ARGV[4], eid, eid, 1)
  if ok and #p > 0 then return 2 end
  redis.call('XDEL', stream, eid)
  return 1
end
redis.call('XDEL', stream, eid)
if redis.call('HGET', KEYS[2], id) == eid then
  redis.call('HDEL', KEYS[2], id)
end
return 1
