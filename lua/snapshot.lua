-- snapshot.lua: read a budget without changing it.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset
-- ARGV[1..] bucket arguments (see prelude.lua)
--
-- Returns {now_ms, pause_remaining_ms, leases_in_flight, levels...}: one level
-- per bucket, in the order of the arguments, as a string (a float; it may be
-- negative).

local state, leases = KEYS[1], KEYS[2]
local now = now_ms()
local n, v, h = load(state, 1, now)
local pause = 0
if h[3] and h[3] - now > 0 then pause = h[3] - now end
local out = {now, pause, redis.call('ZCOUNT', leases, '(' .. fmt('%d', now), '+inf')}
for k = 1, n do out[3 + k] = tostring(v[3 * k]) end
return out
