-- stats.lua counts each lane's jobs and the dead letters at one moment, by
-- Redis' TIME. Ready jobs are the stream entries not delivered yet plus the
-- due-later jobs already due (promoted at the next fetch); in-flight jobs are
-- the pending entries; delayed jobs are the due-later jobs not yet due.
--
-- KEYS[1..L]    -> the lane streams, in lane order
-- KEYS[L+1..2L] -> the lanes' due-later sorted sets, in lane order
-- KEYS[2L+1]    -> the dead-letter stream
-- ARGV[1]       -> the consumer group
-- Returns {dead letters, then 4 values per lane: ready, delayed, in flight,
-- age in ms of the oldest ready job (0: none)}.
local L = (#KEYS - 1) / 2
local group = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- lastDelivered returns the group's last delivered entry id, or nil.
local function lastDelivered(stream)
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream)
  if not ok then return nil end
  for _, g in ipairs(groups) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] end
      if g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    if name == group then return last end
  end
  return nil
end

local out = {redis.call('XLEN', KEYS[2 * L + 1])}
for i = 1, L do
  local stream, delayed = KEYS[i], KEYS[L + i]
  local pending = 0
  local ok, p = pcall(redis.call, 'XPENDING', stream, group)
  if ok then pending = tonumber(p[1]) end
  local due = redis.call('ZCOUNT', delayed, '-inf', now)
  local undelivered = redis.call('XLEN', stream) - pending
  local oldest = nil
  local last = lastDelivered(stream)
  if last then
    local e = redis.call('XRANGE', stream, '(' .. last, '+', 'COUNT', 1)
    if #e > 0 then oldest = tonumber(string.match(e[1][1], '^(%d+)')) end
  elseif undelivered > 0 then
    local e = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
    if #e > 0 then oldest = tonumber(string.match(e[1][1], '^(%d+)')) end
  end
  if due > 0 then
    local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
    local at = tonumber(first[2])
    if oldest == nil or at < oldest then oldest = at end
  end
  local age = 0
  if oldest then age = math.max(0, now - oldest) end
  out[#out + 1] = undelivered + due
  out[#out + 1] = redis.call('ZCARD', delayed) - due
  out[#out + 1] = pending
  out[#out + 1] = age
end
return out
