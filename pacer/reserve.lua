-- reserve.lua: grant up to n slots of the cluster-wide schedule (GCRA).
--
-- KEYS[1] -> the pacer hash: sluice:{name}:pacer
-- ARGV[1] -> configured rate, slots per second (> 0): the provider's cap
-- ARGV[2] -> configured burst, slots (>= 1)
-- ARGV[3] -> n, the most slots wanted (>= 1)
-- ARGV[4] -> horizon, microseconds: no slot is granted further ahead of now
-- ARGV[5] -> poll, microseconds: how long a paused caller waits before asking again
-- ARGV[6] -> headroom, a fraction in [0, 0.5): the schedule runs at rate × (1 − headroom)
-- ARGV[7] -> lead, microseconds: grant no slot earlier than now + lead (the
--            caller's reply takes about that long to reach it)
-- ARGV[8] -> hint, microseconds since the epoch: the latest slot the caller
--            holds (0 for none); the schedule never restarts behind it
-- ARGV[9] -> "1" when the provider's answers steer the rate (adapt.lua):
--            while an episode is open the schedule runs at its eff_rate
--
-- With tenant limits (pacer.tenants), two more keys and arguments:
-- KEYS[2] -> the tenants' schedules: sluice:{name}:tenants (tenant -> tat)
-- KEYS[3] -> the operator's tenant rates: sluice:{name}:tenant_rates
-- ARGV[10] -> m, how many tenants follow
-- ARGV[11..] -> m triples: tenant, configured rate (0: none), slots its waiting jobs need
--
-- Returns an array of strings:
--   [1] granted slots (0 when paused, when the schedule is full to the
--       horizon, or when no slot within the horizon is at least lead ahead)
--   [2] time of the first granted slot, Redis clock, microseconds since the epoch
--   [3] interval between slots, microseconds
--   [4] now, Redis clock, microseconds since the epoch
--   [5] retry after, microseconds (when nothing was granted)
--   [6] effective cap, slots per second: the override when one is set, and
--       lower while the provider pushes back (adapt.lua)
--   [7] "paused" or ""
-- and, with tenants:
--   [8] each tenant's rate, comma-separated in the order given (0: unlimited)
--   [9] for each granted slot, the 1-based index of the tenant it is
--       granted to, comma-separated (0: no tenant)
--
-- Hash fields: tat (the theoretical arrival time of the next free slot), last_now
-- (the Redis time of the previous call, to detect a clock that went back),
-- rate and burst (as configured by the last caller, for status), rate_override
-- and burst_override (set by an operator), paused; eff_rate and the a_*
-- fields belong to adapt.lua.
--
-- When the hash has no tat (the first call ever, or the state was lost: the
-- key deleted or evicted, Redis restarted empty or failed over to a replica
-- that had not seen it), the schedule starts one horizon after now: replicas
-- may still hold slots granted up to one horizon ahead, and a restart at now
-- would grant those moments twice.
--
-- Time comes from Redis TIME only, so replicas' clocks cannot bend the rate.
--
-- A limited tenant has its own GCRA schedule at rate × (1 − headroom), with
-- no burst, and is granted only slots of the global schedule granted in the
-- same call: each granted slot goes to at most one waiting tenant (the one
-- longest due) whose tat is not after it, and moves that tenant's tat one
-- tenant interval past it. A tenant's requests therefore leave on global
-- slots at least one tenant interval apart, and the global schedule is the
-- same whether tenants are given or not.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local horizon = tonumber(ARGV[4])
local poll = tonumber(ARGV[5])
local headroom = tonumber(ARGV[6])
local lead = tonumber(ARGV[7])
local hint = tonumber(ARGV[8])

local h = redis.call('HMGET', KEYS[1], 'tat', 'last_now', 'rate_override', 'burst_override', 'paused', 'eff_rate', 'a_episode')
local ro = tonumber(h[3])
if ro and ro > 0 then rate = ro end
local eff = tonumber(h[6])
if ARGV[9] == '1' and h[7] == '1' and eff and eff > 0 and eff < rate then rate = eff end
local bo = tonumber(h[4])
if bo and bo >= 1 then burst = bo end
local interval = 1000000 / (rate * (1 - headroom))
local f = function(x) return string.format('%.3f', x) end

-- Tenants: their rates (the operator's override, else the configured one).
local m = tonumber(ARGV[10] or '0')
local tname, trate, twant, ttat = {}, {}, {}, {}
local rates = {}
if m > 0 then
  local names = {}
  for j = 1, m do names[j] = ARGV[8 + 3 * j] end
  local ov = redis.call('HMGET', KEYS[3], unpack(names))
  local tats = redis.call('HMGET', KEYS[2], unpack(names))
  for j = 1, m do
    tname[j] = names[j]
    local r = tonumber(ov[j]) or tonumber(ARGV[9 + 3 * j]) or 0
    if r < 0 then r = 0 end
    trate[j] = r
    twant[j] = tonumber(ARGV[10 + 3 * j]) or 0
    ttat[j] = tonumber(tats[j]) or 0
    rates[j] = f(r)
  end
end
local function reply(granted, first, retry, paused, assigned)
  local out = {tostring(granted), f(first), f(interval), f(now), f(retry), f(rate), paused}
  if m > 0 then
    out[8] = table.concat(rates, ',')
    out[9] = table.concat(assigned or {}, ',')
  end
  return out
end

if h[5] == '1' then
  return reply(0, now, poll, 'paused')
end

local tat = tonumber(h[1])
if tat == nil then
  tat = now + horizon
else
  local last = tonumber(h[2]) or now
  if now < last then
    -- The Redis clock went back: keep the schedule where it was relative to
    -- now, so that slots already granted are not granted again.
    tat = tat - (last - now)
  end
  -- An idle schedule lets at most burst slots go at once.
  local floor = now - (burst - 1) * interval
  if tat < floor then tat = floor end
end
-- Never behind a slot the caller holds (the state was rolled back). A held
-- slot is at most one horizon ahead of now; a hint further ahead means the
-- Redis clock went back, which the last_now check above handles. A held
-- slot more than one horizon after the state's last call proves that the
-- call which granted it is missing (the state was rolled back): the other
-- replicas may then hold slots up to one horizon ahead of now as well, and
-- the schedule restarts after them, as after a loss.
local last_now = tonumber(h[2])
if hint > 0 and hint <= now + horizon then
  if last_now ~= nil and hint > last_now + horizon then
    tat = math.max(tat, hint + interval, now + horizon)
  elseif tat < hint + interval then
    tat = hint + interval
  end
end

local limit = now + horizon
local function refuse(first, retry)
  redis.call('HSET', KEYS[1], 'last_now', f(now), 'tat', f(tat), 'rate', ARGV[1], 'burst', ARGV[2])
  return reply(0, first, retry, '')
end
local first = tat
if lead > 0 and first < now + lead then
  if tat > now then
    -- Others are drawing on the schedule: the next slots are too close
    -- for this caller's reply to arrive in time; leave them to the others
    -- and come back when the schedule has moved on.
    local retry = now + lead - tat
    if retry < interval then retry = interval end
    if retry > horizon then retry = horizon end
    return refuse(tat, retry)
  end
  -- Idle: nobody holds the next moments; skip to where this caller can use them.
  first = now + lead
end
if first > limit then
  -- Full to the horizon (or nothing far enough ahead for this caller): come
  -- back when n slots (or at least one) fit.
  local retry = first - limit + (want - 1) * interval
  if retry > horizon then retry = first - limit end
  return refuse(first, retry)
end

local n = math.floor((limit - first) / interval) + 1
if n > want then n = want end
tat = first + n * interval
redis.call('HSET', KEYS[1], 'tat', f(tat), 'last_now', f(now), 'rate', ARGV[1], 'burst', ARGV[2])
if m == 0 then
  return reply(n, first, 0, '')
end

-- Each granted slot to the waiting tenant longest due, if any is due by it.
local assigned, written, ttl = {}, {}, 0
for i = 0, n - 1 do
  local s = first + i * interval
  if s < now then s = now end
  local best = 0
  for j = 1, m do
    if trate[j] > 0 and twant[j] > 0 and ttat[j] <= s and (best == 0 or ttat[j] < ttat[best]) then best = j end
  end
  assigned[i + 1] = tostring(best)
  if best > 0 then
    ttat[best] = s + 1000000 / (trate[best] * (1 - headroom))
    twant[best] = twant[best] - 1
    written[best] = true
  end
end
local args = {}
for j = 1, m do
  if written[j] then
    args[#args + 1] = tname[j]
    args[#args + 1] = f(ttat[j])
    local left = math.ceil((ttat[j] - now) / 1000)
    if left > ttl then ttl = left end
  end
end
if #args > 0 then
  redis.call('HSET', KEYS[2], unpack(args))
  -- Idle tenants' tats are in the past and mean nothing: let the hash go
  -- once every tat in it has passed.
  local keep = redis.call('PTTL', KEYS[2])
  if keep < ttl + 1000 then redis.call('PEXPIRE', KEYS[2], ttl + 1000) end
end
return reply(n, first, 0, '', assigned)
