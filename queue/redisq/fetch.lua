-- fetch.lua takes up to n jobs of one lane for a consumer, in three steps:
--   1. promotes the lane's due-later jobs that are due (by Redis' TIME) into
--      the lane's stream, oldest due first;
--   2. claims entries whose delivery went unsettled for longer than the
--      visibility timeout (XAUTOCLAIM); an entry whose next attempt would
--      exceed max attempts is dead-lettered instead. XAUTOCLAIM scans at most
--      10n pending entries, so the scan goes on from a cursor kept in Redis
--      (and wraps at the end): an abandoned entry behind many live ones is
--      reached after a few calls instead of never. A pass that reaches the
--      end rests for ARGV[8] ms (KEYS[6] holds the rest's end, by Redis'
--      TIME in ms, and expires with it), so that fetches
--      do not scan the same live entries over and over: at the ceiling, a
--      scan on every fetch was an eighth of Redis' time;
--   3. reads new entries for the rest (XREADGROUP '>', not blocking).
-- A due-later member is "<token>:<attempts>:<len(id)>:<id><job JSON>".
--
-- KEYS[1] -> the lane stream
-- KEYS[2] -> the lane's due-later sorted set
-- KEYS[3] -> the dead-letter stream
-- KEYS[4] -> the dead-letter index hash (job id -> dead-letter entry id)
-- KEYS[5] -> the lane's claim cursor (string: the entry id to scan from)
-- KEYS[6] -> the lane's claim rest (string: when the rest ends, in ms; the
--            end is compared as well as expired, so that a server which does
--            not expire keys on its own clock, miniredis, still ends it)
-- ARGV[1] -> the consumer group
-- ARGV[2] -> the consumer
-- ARGV[3] -> n, the most entries to return
-- ARGV[4] -> the visibility timeout in ms
-- ARGV[5] -> max attempts
-- ARGV[6] -> the lane's name, recorded with dead letters
-- ARGV[7] -> the most due-later jobs to promote in this call
-- ARGV[8] -> how long, in ms, the scan for timed-out deliveries rests after
--            a pass reaches the end of the pending entries
-- Returns {next_due, then 4 values per entry: entry id, attempts before this
-- entry, delivery count, job JSON}. next_due is the time in ms until the
-- lane's next due-later job is due (0: some are due now, -1: none).
local stream, delayed, dead, index, cursor, resting = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local group, consumer, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local vis, max, lane, promote, rest = ARGV[4], tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7]), ARGV[8]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return ''
end

for _, m in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, promote)) do
  local p1 = string.find(m, ':', 1, true)
  local p2 = string.find(m, ':', p1 + 1, true)
  local p3 = string.find(m, ':', p2 + 1, true)
  local len = tonumber(string.sub(m, p2 + 1, p3 - 1))
  redis.call('XADD', stream, '*', 'a', string.sub(m, p1 + 1, p2 - 1),
    'id', string.sub(m, p3 + 1, p3 + len), 'j', string.sub(m, p3 + len + 1))
  redis.call('ZREM', delayed, m)
end

local out = {-1}
local claimed = {'', {}}
local ends = tonumber(redis.call('GET', resting) or '')
if not ends or ends <= now then
  claimed = redis.call('XAUTOCLAIM', stream, group, consumer, vis, redis.call('GET', cursor) or '0-0', 'COUNT', n)
  if claimed[1] == '0-0' then
    redis.call('DEL', cursor)
    redis.call('SET', resting, now + tonumber(rest), 'PX', rest)
  else
    redis.call('SET', cursor, claimed[1])
  end
end
for _, e in ipairs(claimed[2]) do
  if type(e) == 'table' then
    local eid, f = e[1], e[2]
    local a = tonumber(field(f, 'a')) or 0
    local p = redis.call('XPENDING', stream, group, eid, eid, 1)
    local deliveries = tonumber(p[1][4])
    if a + deliveries > max then
      local made = a + deliveries - 1
      local id = field(f, 'id')
      redis.call('XACK', stream, group, eid)
      redis.call('XDEL', stream, eid)
      local did = redis.call('XADD', dead, '*', 'id', id, 'l', lane, 'a', made,
        'r', 'visibility timeout expired on every attempt (' .. made .. ' attempts)', 'j', field(f, 'j'))
      redis.call('HSET', index, id, did)
    else
      out[#out + 1] = eid
      out[#out + 1] = a
      out[#out + 1] = deliveries
      out[#out + 1] = field(f, 'j')
    end
  end
end

local want = n - (#out - 1) / 4
if want > 0 then
  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', want, 'STREAMS', stream, '>')
  if r then
    for _, e in ipairs(r[1][2]) do
      out[#out + 1] = e[1]
      out[#out + 1] = tonumber(field(e[2], 'a')) or 0
      out[#out + 1] = 1
      out[#out + 1] = field(e[2], 'j')
    end
  end
end

local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
if #first > 0 then
  out[1] = math.max(0, tonumber(first[2]) - now)
end
return out
