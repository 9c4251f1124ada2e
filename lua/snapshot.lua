-- snapshot.lua: read a budget without changing it.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset
-- ARGV[1..12] bucket arguments (see prelude.lua)
--
-- Returns {now_ms, pause_remaining_ms, leases_in_flight, hold_ms, rpm, tpm,
-- rpd, tpd}: hold_ms and the levels are strings (floats; a level may be
-- negative), '' when unknown or when the limit is not configured.

local state, leases = KEYS[1], KEYS[2]
local now = now_ms()
local b, x = load(state, 1, now, {'pause', 'hold'})
local pause = 0
if x.pause and x.pause > now then pause = x.pause - now end
local out = {now, pause, redis.call('ZCOUNT', leases, '(' .. int(now), '+inf'), tostring(x.hold or '')}
for i = 1, 4 do
  if b[i] then out[#out + 1] = tostring(b[i].level) else out[#out + 1] = '' end
end
return out
