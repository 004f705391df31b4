-- tenant_admin.lua: an operator's tenant rates.
--
-- KEYS[1] -> the operator's tenant rates: sluice:{name}:tenant_rates
-- ARGV[1] -> "set" (ARGV[2] tenant, ARGV[3] rate), "clear" (ARGV[2]
--            tenant; none: every tenant) or "list"
--
-- Returns, for "list", a flat array tenant, rate, ...; else the number of
-- tenants written or removed.

if ARGV[1] == 'set' then
  return redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
elseif ARGV[1] == 'clear' then
  if ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[2]) end
  return redis.call('DEL', KEYS[1])
elseif ARGV[1] == 'list' then
  return redis.call('HGETALL', KEYS[1])
end
return redis.error_reply('pacer: unknown tenant admin op: ' .. tostring(ARGV[1]))
