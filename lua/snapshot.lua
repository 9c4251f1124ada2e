-- snapshot.lua: read a budget without changing it.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset
-- KEYS[3]  slot queue (not read)
-- ARGV[1..] the configured buckets' fields
--
-- Returns {now_us, pause_remaining_ms, slots_held, tats...}: slots_held
-- counts the leases holding a slot (not pending leases); one
-- TAT (µs) per field, in the order sent, as a string, '' when none is
-- stored (the bucket is full).

local state, leases = KEYS[1], KEYS[2]
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)
local h = redis.call('HMGET', state, 'pause', unpack(ARGV))
local pause = 0
if h[1] and h[1] - now > 0 then pause = h[1] - now end
local out = {us, pause, redis.call('ZCOUNT', leases, '(' .. fmt('%d', now), LIVE)}
for k = 1, #ARGV do out[3 + k] = h[1 + k] or '' end
return out
