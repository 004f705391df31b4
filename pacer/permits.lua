-- permits.lua: the cluster's permits to have a request open to the provider.
--
-- KEYS[1] -> the permits: sluice:{name}:permits, a sorted set of permit ->
--            lease expiry (Redis time, milliseconds)
-- ARGV[1] -> "acquire", "renew" or "release"
-- ARGV[2] -> the cap: the most permits held at once (acquire)
-- ARGV[3] -> the lease, milliseconds (acquire, renew)
-- ARGV[4..] -> permit names: with acquire, candidates to grant in order;
--              with renew, the permits held; with release, those given back
--
-- Expired permits (their holder died or lost Redis for a lease) are removed
-- first. Returns, for acquire, the names granted (as many as fit under the
-- cap); for renew, the names no longer held (expired meanwhile); for
-- release, the number removed.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
if op == 'release' then
  local n = 0
  for i = 4, #ARGV do n = n + redis.call('ZREM', KEYS[1], ARGV[i]) end
  return n
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local expiry = now + tonumber(ARGV[3])
if op == 'acquire' then
  local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])
  local out = {}
  for i = 4, #ARGV do
    if #out >= free then break end
    redis.call('ZADD', KEYS[1], expiry, ARGV[i])
    out[#out + 1] = ARGV[i]
  end
  if #out > 0 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2) end
  return out
elseif op == 'renew' then
  local lost = {}
  for i = 4, #ARGV do
    if redis.call('ZADD', KEYS[1], 'XX', 'CH', expiry, ARGV[i]) == 0 and not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
      lost[#lost + 1] = ARGV[i]
    end
  end
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
  return lost
end
return redis.error_reply('pacer: unknown permits op: ' .. tostring(op))
