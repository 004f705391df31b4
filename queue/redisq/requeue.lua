-- requeue.lua puts dead letters back into their lanes, due now, with their
-- attempts reset, and removes them from the dead-letter store. A dead letter
-- whose lane is not among the given lanes goes to the last (lowest) one, or,
-- with 'keep', stays where it is and is reported.
--
-- KEYS[1]     -> the dead-letter stream
-- KEYS[2]     -> the dead-letter index hash (job id -> dead-letter entry id)
-- KEYS[3..]   -> the lane streams, in lane order (L of them)
-- ARGV[1]     -> the mode: 'ids' (requeue the given job ids) or 'oldest'
--                (requeue the oldest dead letters)
-- ARGV[2]     -> a dead letter of a lane not given: 'last' (into the last
--                lane) or 'keep' (leave it, and report it)
-- ARGV[3..L+2]-> the lane names, in lane order
-- ARGV[L+3..] -> mode 'ids': the job ids; mode 'oldest': how many dead
--                letters to look at, at most, then the entry id to start
--                after ('-': from the oldest)
-- Returns {requeued, the last dead-letter entry looked at (mode 'oldest';
-- '' when none), then pairs: a job id and '' for an id with no dead letter
-- (mode 'ids'), a job id and its lane for a dead letter left ('keep')}.
local dead, index = KEYS[1], KEYS[2]
local L = #KEYS - 2
local keep = ARGV[2] == 'keep'

local function laneKey(name)
  for i = 1, L do
    if ARGV[i + 2] == name then return KEYS[i + 2] end
  end
  if keep then return nil end
  return KEYS[L + 2]
end

local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return ''
end

-- requeue moves one dead letter into its lane; it returns false, leaving
-- the dead letter, when its lane is not given and keep is set.
local function requeue(did, f)
  local id, lane = field(f, 'id'), field(f, 'l')
  local key = laneKey(lane)
  if not key then return false end
  redis.call('XADD', key, '*', 'a', 0, 'id', id, 'j', field(f, 'j'))
  redis.call('XDEL', dead, did)
  if redis.call('HGET', index, id) == did then
    redis.call('HDEL', index, id)
  end
  return true
end

local out = {0, ''}
if ARGV[1] == 'oldest' then
  local n, after = tonumber(ARGV[L + 3]), ARGV[L + 4]
  local entries
  if after == '-' then
    entries = redis.call('XRANGE', dead, '-', '+', 'COUNT', n)
  else -- from after, which may still be there: skip it
    entries = redis.call('XRANGE', dead, after, '+', 'COUNT', n + 1)
    if #entries > 0 and entries[1][1] == after then
      table.remove(entries, 1)
    elseif #entries > n then
      table.remove(entries)
    end
  end
  for _, e in ipairs(entries) do
    if requeue(e[1], e[2]) then
      out[1] = out[1] + 1
    else
      out[#out + 1] = field(e[2], 'id')
      out[#out + 1] = field(e[2], 'l')
    end
    out[2] = e[1]
  end
  return out
end
for i = L + 3, #ARGV do
  local did = redis.call('HGET', index, ARGV[i])
  local e = did and redis.call('XRANGE', dead, did, did) or {}
  if #e ~= 1 then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = ''
  elseif requeue(e[1][1], e[1][2]) then
    out[1] = out[1] + 1
  else
    out[#out + 1] = ARGV[i]
    out[#out + 1] = field(e[1][2], 'l')
  end
end
return out
