-- admin.lua: an operator's change to the schedule's settings.
--
-- KEYS[1] -> the pacer hash: sluice:{name}:pacer
-- ARGV[1] -> "set" or "clear"
-- ARGV[2..] -> with "set": field, value pairs; with "clear": fields
--              (fields: rate_override, burst_override, paused)
--
-- Returns the number of fields written or removed.

local allowed = {rate_override = true, burst_override = true, paused = true}
local n = 0
if ARGV[1] == 'set' then
  for i = 2, #ARGV, 2 do
    if not allowed[ARGV[i]] then return redis.error_reply('pacer: field not allowed: ' .. ARGV[i]) end
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    n = n + 1
  end
elseif ARGV[1] == 'clear' then
  for i = 2, #ARGV do
    if not allowed[ARGV[i]] then return redis.error_reply('pacer: field not allowed: ' .. ARGV[i]) end
    n = n + redis.call('HDEL', KEYS[1], ARGV[i])
  end
else
  return redis.error_reply('pacer: unknown admin op: ' .. tostring(ARGV[1]))
end
return n
