-- requeue.lua puts dead letters back into their lanes, due now, with their
-- attempts reset, and removes them from the dead-letter store. A dead letter
-- whose lane is not among the given lanes goes to the last (lowest) one.
--
-- KEYS[1]     -> the dead-letter stream
-- KEYS[2]     -> the dead-letter index hash (job id -> dead-letter entry id)
-- KEYS[3..]   -> the lane streams, in lane order (L of them)
-- ARGV[1]     -> the mode: 'ids' (requeue the given job ids) or 'oldest'
--                (requeue the oldest dead letters)
-- ARGV[2..L+1]-> the lane names, in lane order
-- ARGV[L+2..] -> mode 'ids': the job ids; mode 'oldest': how many at most
-- Returns {requeued, then the ids not found (mode 'ids')}.
local dead, index = KEYS[1], KEYS[2]
local L = #KEYS - 2

local function laneKey(name)
  for i = 1, L do
    if ARGV[i + 1] == name then return KEYS[i + 2] end
  end
  return KEYS[L + 2]
end

local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return ''
end

local function requeue(did, f)
  local id = field(f, 'id')
  redis.call('XADD', laneKey(field(f, 'l')), '*', 'a', 0, 'id', id, 'j', field(f, 'j'))
  redis.call('XDEL', dead, did)
  if redis.call('HGET', index, id) == did then
    redis.call('HDEL', index, id)
  end
end

local out = {0}
if ARGV[1] == 'oldest' then
  for _, e in ipairs(redis.call('XRANGE', dead, '-', '+', 'COUNT', tonumber(ARGV[L + 2]))) do
    requeue(e[1], e[2])
    out[1] = out[1] + 1
  end
  return out
end
for i = L + 2, #ARGV do
  local did = redis.call('HGET', index, ARGV[i])
  local e = did and redis.call('XRANGE', dead, did, did) or {}
  if #e == 1 then
    requeue(e[1][1], e[1][2])
    out[1] = out[1] + 1
  else
    out[#out + 1] = ARGV[i]
  end
end
return out
