-- stop.lua: stop a budget, or resume it. While stopped, acquire.lua refuses
-- every call (a pending lease's claim included) and names the stop's kind,
-- except one call per probe interval that fits the budget now: the probe,
-- whose success shows the provider serves again (the caller then resumes).
-- Meant for an exhausted quota, which a pause cannot wait out: retrying
-- spends nothing but every process's time, and the first success anywhere
-- should open the budget for all.
--
-- KEYS[1]  state hash (KEYS[2] and KEYS[3] as for every script: their TTL is
--          kept with the hash's, see cover)
-- ARGV[1]  stop in ms from now (integer >= 0); 0 resumes: the stop ends now
--          (with ARGV[3] 'quota', only a quota stop: a probe's success
--          never lifts an operator's stop)
-- ARGV[2]  probe interval in ms (integer >= 0): the first probe is due one
--          interval from now; 0 lets no probe through
-- ARGV[3]  kind: 'quota' (the provider's quota is exhausted) or 'stop' (an
--          operator's stop); acquire.lua replies it as its reason
--
-- A stop only grows: the later end of the one set and the one asked for
-- is kept; the probe interval and kind are the new ones, and the next probe
-- is due one interval from now (a failed probe stops the budget again).
-- But an operator's stop in force stays one: a quota stop asked for
-- meanwhile only extends it, and lets no probe through.
--
-- The stop is one state hash field, qs: "<end ms> <next probe ms>
-- <interval ms> <kind>".
--
-- Returns {remaining_ms, now_us}: the stop in force after this call (0
-- after a resume; an operator's stop's remaining time when a probe's
-- resume, ARGV[3] 'quota', leaves it).

local state = KEYS[1]
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)
local h = redis.call('HMGET', state, 'qs', 'xp')
local u, kind
if h[1] then u, kind = string.match(h[1], '^(%d+) %d+ %d+ (%a+)$') end
local operator = u and u + 0 > now and kind == 'stop'
if ARGV[1] == '0' then
  -- An operator's stop outlives a probe's resume: its remaining time.
  if operator and ARGV[3] == 'quota' then return {u - now, us} end
  redis.call('HDEL', state, 'qs')
  return {0, us}
end
local stop, every, kind = now + ARGV[1], ARGV[2] + 0, ARGV[3]
if u and u + 0 > stop then stop = u + 0 end
if operator then every, kind = 0, 'stop' end
cover(now, (h[2] or 0) + 0, stop, {'qs', fmt('%d %d %d %s', stop, now + every, every, kind)}, 2)
return {stop - now, us}
