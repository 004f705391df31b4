-- enqueue.lua stores a batch of jobs. Each job is stored atomically with its
-- idempotency key: a job whose key is already held within the dedup window is
-- not stored, and the id first stored under the key is returned instead. A
-- job due later (not_before after Redis' TIME) goes to its lane's due-later
-- sorted set, scored by its due time in ms; any other job is appended to its
-- lane's stream.
--
-- KEYS[1..L]      -> the lane streams, in lane order
-- KEYS[L+1..2L]   -> the lanes' due-later sorted sets, in lane order
-- KEYS[2L+1..]    -> the dedup keys of the jobs that have an idempotency key
-- ARGV[1]         -> L, the number of lanes
-- ARGV[2]         -> the dedup window in ms
-- ARGV[3..]       -> 6 values per job: lane index (1..L), index in KEYS of its
--                    dedup key (0: no key), not_before in Unix ms (0: none),
--                    job id, a unique token, the job as JSON
-- Returns a flat array with 2 values per job, in order: 1 if it was a
-- duplicate else 0, then the id stored (for a duplicate, the original id).
local L = tonumber(ARGV[1])
local window = ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local out = {}
for i = 3, #ARGV, 6 do
  local lane, dk, nb = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local id, token, job = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local dup = 0
  if dk > 0 and not redis.call('SET', KEYS[dk], id, 'NX', 'PX', window) then
    dup = 1
    id = redis.call('GET', KEYS[dk])
  end
  if dup == 0 then
    if nb > now then
      local member = token .. ':0:' .. #id .. ':' .. id .. job
      redis.call('ZADD', KEYS[L + lane], ARGV[i + 2], member)
    else
      -- The same entry as Queue.plain writes for a job that needs no script.
      redis.call('XADD', KEYS[lane], '*', 'a', 0, 'id', id, 'j', job)
    end
  end
  out[#out + 1] = dup
  out[#out + 1] = id
end
return out
