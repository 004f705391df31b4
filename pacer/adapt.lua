-- adapt.lua: the provider's answers steer the schedule's effective rate.
--
-- KEYS[1] -> the pacer hash: sluice:{name}:pacer
-- ARGV[1] -> configured rate, slots per second: the ceiling (unless an
--            operator's rate_override is set, which then is)
-- ARGV[2] -> answers that were not throttling, since the caller's last report
-- ARGV[3] -> throttling answers (429, 503), since the caller's last report
-- ARGV[4] -> the longest Retry-After among them, microseconds (0: none)
-- ARGV[5] -> reaction window, microseconds
-- ARGV[6] -> tolerance: a throttled share the rate does not react to
-- ARGV[7] -> increase: a fraction of the ceiling added after the first clean
--            window, one more such step after each further clean window
-- ARGV[8] -> floor: the lowest effective rate, a fraction of the ceiling
-- ARGV[9] -> max hold, microseconds: the longest Retry-After honoured
-- ARGV[10] -> headroom, as in reserve.lua
--
-- Every replica reports its answers every few tens of milliseconds; the
-- script sums them into one window for the whole cluster and judges each
-- window once, at the first report after it ends, so that the rate moves
-- at most once per window however many replicas saw the answers:
--
--   share s = throttled / answers; the window is over the tolerance when
--   s > base + max(tolerance, 3 standard errors of base), where base is the
--   share the provider throttles whatever the rate (learnt below).
--
--   over: cut. The rate falls to what the provider accepted: eff × (1 − s)
--   when the cluster sent at the schedule's pace (which runs the headroom
--   under it), the accepted rate when it sent less; never by more than
--   half, never under the floor.
--
--   the window right after a cut is not judged (a provider counting over
--   a sliding window still remembers the old pace in it); the one after
--   that is judged against the cut: a share at least a fifth lower means
--   the cut helped, and the rate stays (or is cut again if the share is
--   still over the tolerance); a share over the tolerance and not a fifth
--   lower means the cut did not help, so the throttling is not about the
--   rate (a provider that refuses a steady share of requests whatever the
--   pace): the cut is undone and the share becomes base.
--
--   clean: the rate climbs toward the ceiling by one step, two steps, three
--   steps... (one more after each clean window in a row), and base decays
--   toward the share seen when that is lower (it never grows here).
--
-- Retry-After is honoured once per episode: the first throttling answer
-- that carries one, when no episode is open, holds the whole schedule until
-- now + min(Retry-After, max hold) and opens an episode; answers reported
-- during the hold are not judged. An episode closes when the rate is back
-- at the ceiling and a judged window held no throttling answer at all.
--
-- Returns an array of strings:
--   [1] effective rate, slots per second
--   [2] ceiling, slots per second
--   [3] event this call caused: "cut", "undo", "raise", "hold" or ""
--   [4] effective rate before this call
--   [5] share judged ("" when no window was judged)
--   [6] held until, Redis microseconds (0 when never)
--   [7] cuts so far (cluster)
--   [8] holds so far (cluster)
--   [9] "1" while an episode is open, else "0"
--   [10] last cut, Redis microseconds (0 when never)
--   [11] base: the share tolerated as not about the rate

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local okd = tonumber(ARGV[2])
local thrd = tonumber(ARGV[3])
local ra = tonumber(ARGV[4])
local window = tonumber(ARGV[5])
local tol = tonumber(ARGV[6])
local inc = tonumber(ARGV[7])
local floorf = tonumber(ARGV[8])
local maxHold = tonumber(ARGV[9])
local headroom = tonumber(ARGV[10])
local minSamples = 20

local f = function(x) return string.format('%.3f', x) end
local h = redis.call('HMGET', KEYS[1], 'rate_override', 'eff_rate', 'a_start', 'a_ok', 'a_thr',
  'a_base', 'a_clean', 'a_cut_share', 'a_pre_cut', 'a_episode', 'a_cuts', 'a_holds',
  'a_last_cut', 'throttle_until', 'tat')
local ceiling = rate
local ro = tonumber(h[1])
if ro and ro > 0 then ceiling = ro end
local episode = h[10] == '1'
-- Outside an episode the rate is the ceiling: the effective rate only
-- lives while the provider pushes back.
local eff = tonumber(h[2]) or ceiling
if eff > ceiling or not episode then eff = ceiling end
local lowest = ceiling * floorf
if eff < lowest then eff = lowest end
local start = tonumber(h[3]) or now
local ok = tonumber(h[4]) or 0
local thr = tonumber(h[5]) or 0
local base = tonumber(h[6]) or 0
local clean = tonumber(h[7]) or 0
local cutShare = tonumber(h[8]) or 0
local preCut = tonumber(h[9]) or eff
local cuts = tonumber(h[11]) or 0
local holds = tonumber(h[12]) or 0
local lastCut = tonumber(h[13]) or 0
local heldUntil = tonumber(h[14]) or 0
local tat = tonumber(h[15])

local before = eff
local event = ''
local judged = ''

if thrd > 0 and ra > 0 and not episode then
  local hold = ra
  if hold > maxHold then hold = maxHold end
  local untilT = now + hold
  if untilT > heldUntil then heldUntil = untilT end
  if tat == nil or tat < heldUntil then tat = heldUntil end
  holds = holds + 1
  event = 'hold'
  episode = true
  -- The hold's time is not judged: the window starts when it ends.
  start, ok, thr = heldUntil, 0, 0
  okd, thrd = 0, 0
end
if thrd > 0 then episode = true end

if now >= start then
  ok = ok + okd
  thr = thr + thrd
  local span = now - start
  local n = ok + thr
  if span >= window and (n >= minSamples or span >= 10 * window) then
    if n > 0 then
      local s = thr / n
      judged = string.format('%.4f', s)
      local theta = base + math.max(tol, 3 * math.sqrt(base * (1 - base) / n))
      local helped = cutShare > 0 and s < 0.8 * cutShare
      if helped and s <= theta then
        -- The first window judged after a cut, and the cut helped: the
        -- rate stays; it climbs from the next clean window on.
        cutShare = 0
      elseif s > theta and thr >= 2 then
        if cutShare > 0 and not helped then
          -- The cut did not lower the share: the provider refuses a share
          -- of requests whatever the rate. Undo it and tolerate the share.
          base = s
          eff = preCut
          clean = 0
          cutShare = 0
          event = 'undo'
        else
          local sent = n / (span / 1000000)
          local pace = eff * (1 - headroom)
          local target
          if sent >= 0.8 * pace then
            target = eff * (1 - s)
          else
            target = sent * (1 - s) / (1 - headroom)
          end
          if target > eff then target = eff end
          if target < eff * 0.5 then target = eff * 0.5 end
          if target < lowest then target = lowest end
          preCut = eff
          eff = target
          cutShare = s
          clean = 0
          cuts = cuts + 1
          lastCut = now
          event = 'cut'
        end
      else
        cutShare = 0
        -- base only decays here, toward a lower share seen: it grows only
        -- by an undo, the evidence that a share is not about the rate. A
        -- clean window's share is under base + tolerance, and letting base
        -- follow it up would raise the bar each time, until the rate sat
        -- where the provider throttles base + tolerance of it.
        if s < base then base = 0.8 * base + 0.2 * s end
        if base < 0.0001 then base = 0 end
        if eff < ceiling then
          clean = clean + 1
          eff = eff + clean * inc * ceiling
          if eff > ceiling then eff = ceiling end
          if event == '' then event = 'raise' end
        elseif thr == 0 then
          episode = false
          clean = 0
        end
      end
    end
    start, ok, thr = now, 0, 0
    if event == 'cut' then
      -- The window right after a cut is not judged: a provider that counts
      -- over a sliding window still remembers the old pace in it, and the
      -- share it shows would make a cut that helps look like one that did
      -- not.
      start = now + window
    end
  end
end

local fields = {'eff_rate', f(eff), 'a_start', f(start), 'a_ok', tostring(ok), 'a_thr', tostring(thr),
  'a_base', string.format('%.5f', base), 'a_clean', tostring(clean), 'a_cut_share', string.format('%.5f', cutShare),
  'a_pre_cut', f(preCut), 'a_episode', episode and '1' or '0', 'a_cuts', tostring(cuts),
  'a_holds', tostring(holds), 'a_last_cut', f(lastCut)}
if event == 'hold' then
  table.insert(fields, 'throttle_until')
  table.insert(fields, f(heldUntil))
  table.insert(fields, 'tat')
  table.insert(fields, f(tat))
  table.insert(fields, 'a_last_hold')
  table.insert(fields, f(now))
  -- Gaps of the schedule (reserve.lua) may lie inside the hold: drop them.
  table.insert(fields, 'gtat')
  table.insert(fields, '')
end
redis.call('HSET', KEYS[1], unpack(fields))
return {f(eff), f(ceiling), event, f(before), judged, f(heldUntil), tostring(cuts), tostring(holds),
  episode and '1' or '0', f(lastCut), string.format('%.5f', base)}
