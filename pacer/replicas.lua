-- replicas.lua: announce a replica, and list the live ones.
--
-- KEYS[1] -> the replicas hash: sluice:{name}:replicas
-- ARGV[1] -> replica id, or "" to only list
-- ARGV[2] -> what the replica reports (free text, e.g. "in_flight=12")
-- ARGV[3] -> window, microseconds: replicas not heard from within it are
--            left out of the answer and removed from the hash
--
-- Returns a flat array of strings: now (microseconds since the epoch, Redis
-- clock), then for each live replica: id, last seen (microseconds), report.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[3])
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', now) .. '|' .. ARGV[2])
end
local out = {string.format('%.0f', now)}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local sep = string.find(all[i + 1], '|', 1, true)
  local seen = tonumber(string.sub(all[i + 1], 1, (sep or 0) - 1)) or 0
  if now - seen > window then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = string.format('%.0f', seen)
    out[#out + 1] = sep and string.sub(all[i + 1], sep + 1) or ''
  end
end
return out
