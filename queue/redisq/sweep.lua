-- sweep.lua removes from the group of every lane the consumers that hold no
-- pending entry and have been idle (XINFO CONSUMERS' idle: time since they
-- last read, claimed or extended) for at least the limit: the consumers of
-- replicas that died. Their pending entries are claimed by the others'
-- fetches after the visibility timeout, after which they hold none. The
-- check and the removal are one script, so a consumer that has just taken
-- an entry is never removed; the caller's own consumer is never removed.
--
-- KEYS[1..] -> the lane streams
-- ARGV[1]   -> the consumer group
-- ARGV[2]   -> the caller's consumer, kept whatever its state
-- ARGV[3]   -> the idle limit in ms
-- Returns {lane index (1-based), consumer, ...}: one pair per consumer
-- removed. A lane without a stream or group is skipped.
local group, own, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
for i, stream in ipairs(KEYS) do
  local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', stream, group)
  if ok then
    for _, c in ipairs(consumers) do
      local name, pending, idle
      for k = 1, #c, 2 do
        if c[k] == 'name' then name = c[k + 1]
        elseif c[k] == 'pending' then pending = tonumber(c[k + 1])
        elseif c[k] == 'idle' then idle = tonumber(c[k + 1])
        end
      end
      if name and name ~= own and pending == 0 and idle and idle >= limit then
        redis.call('XGROUP', 'DELCONSUMER', stream, group, name)
        out[#out + 1] = i
        out[#out + 1] = name
      end
    end
  end
end
return out
