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
-- ARGV[10] -> stride, microseconds: the least time between two slots granted
--            in this call (0: as close as the schedule allows; see Gaps below)
-- ARGV[11] -> seq, the highest sequence number the caller has seen in a
--            reply (0 for none); a state behind it was rolled back
-- ARGV[12] -> from, microseconds since the epoch: grant no slot before it
--            (0: none); a caller topping up slots it holds asks from its
--            latest one plus a stride
-- ARGV[13] -> "1" for a ride (see Rides below): grant only while the
--            schedule is idle
-- KEYS[2] -> the schedule's gaps: sluice:{name}:gaps (see Gaps below)
--
-- With tenant limits (pacer.tenants), two more keys and arguments:
-- KEYS[3] -> the tenants' schedules: sluice:{name}:tenants (tenant -> tat)
-- KEYS[4] -> the operator's tenant rates: sluice:{name}:tenant_rates
-- ARGV[14] -> m, how many tenants follow
-- ARGV[15..] -> m triples: tenant, configured rate (0: none), slots its waiting jobs need
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
--   [8] with tenants, each tenant's rate, comma-separated in the order
--       given (0: unlimited); "" without
--   [9] with tenants, for each granted slot, the 1-based index of the
--       tenant it is granted to, comma-separated (0: no tenant); "" without
--   [10] when the granted slots are not one interval apart, each slot's
--       time, comma-separated; "" when they are
--   [11] the state's sequence number after this call
--   [12] lapsed slots: how many slots of the schedule passed before this
--       call with no call asking for them (beyond the burst an idle
--       schedule lets go at once), "" for none. Each such slot is counted by
--       the one call that moves tat past it: the schedule's unused capacity,
--       and, while jobs wait, moments when no replica asked in time
--
-- Hash fields: tat (the theoretical arrival time of the next free slot), last_now
-- (the Redis time of the previous call, to detect a clock that went back),
-- rate and burst (as configured by the last caller, for status), rate_override
-- and burst_override (set by an operator), paused; seq (counts the calls
-- that granted slots); gtat and giv (the tat and interval the gaps were
-- left at); eff_rate and the a_* fields belong to adapt.lua.
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
--
-- Gaps. Every slot is a point of one grid: tat, tat + interval, ... A
-- caller that uses a slot only every few intervals (a replica with steady,
-- light demand) asks with a stride, and is granted slots at least a stride
-- apart; the grid points its grant passes over become gaps, kept in a
-- sorted set (score and member: the point's time), and every later call
-- takes the earliest gaps at or after its first usable moment before new
-- points. So a point is granted at most once, whether from tat or as a gap,
-- and the schedule's rate is unchanged: gaps only let one call hold slots
-- spread over the horizon. Gaps are valid only while tat is where the last
-- call that kept them left it (gtat) and the interval is the same (giv):
-- any other move of tat (a detected rollback, a clock that went back) or
-- of the rate drops them all, which wastes those points and never grants
-- one twice; the scripts that hold the schedule (throttle.lua, resume.lua,
-- adapt.lua's hold) clear gtat, so that no gap inside a hold is granted.
-- Dropped gaps are deleted when a walk next finds them stale. Gaps before
-- now are dropped on every call that walks.
--
-- seq. Gaps granted in a call that a failover lost would not move tat, so
-- the hint cannot tell that state was rolled back. Each call that grants
-- slots counts seq up and returns it; a caller that has seen a seq the
-- state has not reached proves the rollback, and the schedule restarts one
-- horizon after now, with no gaps, as after a loss.
--
-- Rides. A replica waiting in a blocking read of the queue sends a call
-- right behind it on the same connection (pacer.Ride), which Redis runs
-- the moment the read returns: the slot comes with the job instead of one
-- round trip after it. The read may also end with no job, so a ride takes
-- only a moment nobody else wants: it is granted only when the schedule is
-- idle (no slot of it is held after now: tat, past the burst's floor, is
-- not ahead of now), at the caller's first usable moment. Otherwise it is
-- refused and writes nothing, as if it had not run.

-- Lead. A caller asks for no slot before now + lead, the time its reply
-- takes to reach it. When the schedule is idle, the moments before that are
-- skipped. When others hold the schedule's next moments (tat is ahead of
-- now but not of now + lead) and the moments between tat and now + lead are
-- a few points, the call is refused and the caller comes back when the
-- schedule has moved past its lead: those points are left to the others.
-- When they are skip_min points or more (a rate far above what the
-- replicas use: at the default 2ms lateness, a lead of 1ms holds 64 points
-- from 64,000 slots/s), they are skipped as on an idle schedule: refusing
-- there cost the caller a round trip and a wait for nothing, again and
-- again while the others drew on the schedule (a third of the calls at an
-- uncapped schedule were refused). Skipped points are never granted, so
-- the cap is the same; a schedule whose tat is within a lead of now is not
-- full, so no one waiting is refused for them.
local skip_min = 64 -- pacer.fastPoints

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
local stride = tonumber(ARGV[10])
local cseq = tonumber(ARGV[11])
local from = tonumber(ARGV[12])

local h = redis.call('HMGET', KEYS[1], 'tat', 'last_now', 'rate_override', 'burst_override', 'paused', 'eff_rate', 'a_episode',
  'seq', 'gtat', 'giv')
local ro = tonumber(h[3])
if ro and ro > 0 then rate = ro end
local eff = tonumber(h[6])
if ARGV[9] == '1' and h[7] == '1' and eff and eff > 0 and eff < rate then rate = eff end
local bo = tonumber(h[4])
if bo and bo >= 1 then burst = bo end
local interval = 1000000 / (rate * (1 - headroom))
local f = function(x) return string.format('%.3f', x) end

-- Tenants: their rates (the operator's override, else the configured one).
local m = tonumber(ARGV[14] or '0')
local tname, trate, twant, ttat = {}, {}, {}, {}
local rates = {}
if m > 0 then
  local names = {}
  for j = 1, m do names[j] = ARGV[12 + 3 * j] end
  local ov = redis.call('HMGET', KEYS[4], unpack(names))
  local tats = redis.call('HMGET', KEYS[3], unpack(names))
  for j = 1, m do
    tname[j] = names[j]
    local r = tonumber(ov[j]) or tonumber(ARGV[13 + 3 * j]) or 0
    if r < 0 then r = 0 end
    trate[j] = r
    twant[j] = tonumber(ARGV[14 + 3 * j]) or 0
    ttat[j] = tonumber(tats[j]) or 0
    rates[j] = f(r)
  end
end
local seq = tonumber(h[8]) or 0
local lapsed = 0
local function reply(granted, first, retry, paused, assigned, stamps)
  local out = {tostring(granted), f(first), f(interval), f(now), f(retry), f(rate), paused, '', '', '', tostring(seq), ''}
  if lapsed > 0 then out[12] = f(lapsed) end
  if m > 0 then
    out[8] = table.concat(rates, ',')
    out[9] = table.concat(assigned or {}, ',')
  end
  if stamps then out[10] = table.concat(stamps, ',') end
  return out
end

if h[5] == '1' then
  return reply(0, now, poll, 'paused')
end

local tat = tonumber(h[1])
-- Gaps hold only while tat and the interval are where the last call that
-- kept them left them (see Gaps above).
local gaps = h[9] ~= false and h[9] == h[1] and h[10] == f(interval)
if tat == nil then
  tat = now + horizon
  if cseq > seq then seq = cseq end
else
  local last = tonumber(h[2]) or now
  if now < last then
    -- The Redis clock went back: keep the schedule where it was relative to
    -- now, so that slots already granted are not granted again.
    tat = tat - (last - now)
    gaps = false
  end
  -- An idle schedule lets at most burst slots go at once.
  local floor = now - (burst - 1) * interval
  if tat < floor then
    lapsed = (floor - tat) / interval
    tat = floor
  end
  -- A caller has seen a call this state has not: it was rolled back.
  if cseq > seq then
    tat = math.max(tat, now + horizon)
    seq = cseq
    gaps = false
  end
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
    gaps = false
  elseif tat < hint + interval then
    tat = hint + interval
    gaps = false
  end
end
-- A ride takes only an idle moment (see Rides above); refused, it leaves
-- the state as it found it.
if ARGV[13] == '1' and tat > now then
  return reply(0, tat, 0, '')
end
local limit = now + horizon
-- save writes the schedule's state (every call that gets this far ends in
-- it): tat, the caller's configuration, seq, and the gaps' marks: where
-- this call leaves them (gtat, giv) while they hold, or cleared when they
-- were found stale or dropped above, whatever the call does (a refusal may
-- leave tat where gtat says, and the next call would take them for valid).
local function save()
  local fields = {'tat', f(tat), 'last_now', f(now), 'rate', ARGV[1], 'burst', ARGV[2], 'seq', tostring(seq)}
  if gaps then
    for _, v in ipairs({'gtat', f(tat), 'giv', f(interval)}) do fields[#fields + 1] = v end
  elseif h[9] ~= false and h[9] ~= '' then
    fields[#fields + 1] = 'gtat'
    fields[#fields + 1] = ''
  end
  redis.call('HSET', KEYS[1], unpack(fields))
end
local function refuse(first, retry)
  save()
  return reply(0, first, retry, '')
end

local n, first, stamps = 0, tat, nil
if stride <= interval and from <= 0 and not gaps then
  -- Every slot one interval after the last, from tat.
  if lead > 0 and first < now + lead then
    if tat > now and now + lead - tat < skip_min * interval then
      -- Others are drawing on the schedule: the next slots are too close
      -- for this caller's reply to arrive in time; leave them to the others
      -- and come back when the schedule has moved on.
      local retry = now + lead - tat
      if retry < interval then retry = interval end
      if retry > horizon then retry = horizon end
      return refuse(tat, retry)
    end
    -- Idle, or the moments this caller cannot reach hold skip_min points
    -- or more: skip to where it can use them (see Lead above).
    first = now + lead
  end
  if first > limit then
    -- Full to the horizon (or nothing far enough ahead for this caller): come
    -- back when n slots (or at least one) fit.
    local retry = first - limit + (want - 1) * interval
    if retry > horizon then retry = first - limit end
    return refuse(first, retry)
  end
  n = math.floor((limit - first) / interval) + 1
  if n > want then n = want end
  tat = first + n * interval
  seq = seq + 1
  save()
else
  -- The walk: each slot the earliest gap or grid point at or after the
  -- cursor, which starts where this caller can use a slot (and at from)
  -- and moves a stride (at least an interval) past each slot granted.
  if gaps then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. f(now))
  else
    redis.call('DEL', KEYS[2]) -- stale gaps: never let them count again
  end
  local step = math.max(stride, interval)
  local cursor = now + lead
  if lead <= 0 and tat < cursor then cursor = tat end
  if from > cursor then cursor = from end
  local gbuf, gi, gdone = {}, 1, not gaps
  -- The index in gbuf of the earliest gap at or after c, or nil.
  -- A gap's score is its member read as a number, and c goes to Redis
  -- in full (%.17g), so that what Redis returns is never before c.
  local function gapAt(c)
    while true do
      while gi <= #gbuf and tonumber(gbuf[gi]) < c do gi = gi + 1 end
      if gi <= #gbuf then return gi end
      if gdone then return nil end
      gbuf = redis.call('ZRANGEBYSCORE', KEYS[2], string.format('%.17g', c), f(limit), 'LIMIT', 0, 64)
      gi = 1
      if #gbuf < 64 then gdone = true end
    end
  end
  local taken, left = {}, {}
  local maxLeft = 64 * want -- a walk leaves at most this many gaps
  stamps = {}
  local pt = tat
  while #stamps < want do
    -- The first grid point at or after the cursor.
    pt = tat
    if pt < cursor then pt = tat + math.ceil((cursor - tat) / interval) * interval end
    local gix = gapAt(cursor)
    local s
    if gix and tonumber(gbuf[gix]) <= pt then
      s = tonumber(gbuf[gix])
      taken[#taken + 1] = gbuf[gix]
      gi = gix + 1
    else
      if pt > limit then break end
      -- The points passed over, from now on, become gaps.
      local k0 = 0
      if tat < now then k0 = math.ceil((now - tat) / interval) end
      local k1 = math.floor((pt - tat) / interval + 0.5) - 1
      if k1 - k0 >= maxLeft then k0 = k1 - maxLeft + 1 end
      for k = k0, k1 do
        local q = f(tat + k * interval)
        left[#left + 1] = q -- score
        left[#left + 1] = q -- member
      end
      s = pt
      tat = pt + interval
    end
    stamps[#stamps + 1] = s
    cursor = s + step
  end
  n = #stamps
  if #taken > 0 then
    for i = 1, #taken, 1000 do redis.call('ZREM', KEYS[2], unpack(taken, i, math.min(i + 999, #taken))) end
  end
  if #left > 0 then
    for i = 1, #left, 1000 do redis.call('ZADD', KEYS[2], unpack(left, i, math.min(i + 999, #left))) end
    redis.call('PEXPIRE', KEYS[2], math.ceil(horizon / 1000) + 1000)
    gaps = true
  end
  if n == 0 then
    -- Nothing at or after the cursor within the horizon: come back when
    -- the schedule has moved on.
    local retry = pt - limit
    if retry < interval then retry = interval end
    if retry > horizon then retry = horizon end
    return refuse(pt, retry)
  end
  first = stamps[1]
  seq = seq + 1
  save()
  local contiguous = true
  for i = 2, n do
    if math.abs(stamps[i] - stamps[i - 1] - interval) > 0.01 then contiguous = false end
  end
  if contiguous then
    stamps = nil
  else
    for i = 1, n do stamps[i] = f(stamps[i]) end
  end
end
if m == 0 then
  return reply(n, first, 0, '', nil, stamps)
end

-- Each granted slot to the waiting tenant longest due, if any is due by it.
local assigned, written, ttl = {}, {}, 0
for i = 0, n - 1 do
  local s = first + i * interval
  if stamps then s = tonumber(stamps[i + 1]) end
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
  redis.call('HSET', KEYS[3], unpack(args))
  -- Idle tenants' tats are in the past and mean nothing (a missing tat
  -- reads as 0, the same). Traffic keeps the hash alive, so a sample of
  -- it, more fields than this call wrote, loses those whose tat has passed:
  -- the hash stays near twice the tenants with a tat ahead, however many
  -- users come and go.
  local sample = redis.call('HRANDFIELD', KEYS[3], #args + 16, 'WITHVALUES')
  local gone = {}
  for i = 1, #sample, 2 do
    local v = tonumber(sample[i + 1])
    if not v or v < now then gone[#gone + 1] = sample[i] end
  end
  if #gone > 0 then redis.call('HDEL', KEYS[3], unpack(gone)) end
  -- And let the hash go once every tat in it has passed.
  local keep = redis.call('PTTL', KEYS[3])
  if keep < ttl + 1000 then redis.call('PEXPIRE', KEYS[3], ttl + 1000) end
end
return reply(n, first, 0, '', assigned, stamps)
