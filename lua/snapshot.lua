-- snapshot.lua: read a budget without changing it.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset
-- ARGV[1..8] capacity and rate per ms of rpm, tpm, rpd, tpd (see prelude.lua)
--
-- Returns {now_ms, pause_remaining_ms, leases_in_flight, hold_ms (string, '' if
-- unknown), rpm, tpm, rpd, tpd}: each level a string (float, may be negative),
-- '' for a limit that is not configured.

local state, leases = KEYS[1], KEYS[2]
local now = now_ms()
local b, x = load_buckets(state, 1, now)
local pause = 0
if x.pause > now then pause = x.pause - now end
local out = {now, pause, redis.call('ZCOUNT', leases, '(' .. now, '+inf'), tostring(x.hold or '')}
for i = 1, 4 do
  if b[i] then out[#out + 1] = tostring(b[i].level) else out[#out + 1] = '' end
end
return out
