-- pause.lua: make every caller of the budget wait at least ARGV[1] ms from now,
-- and optionally bring buckets the provider says are exhausted back in line.
-- A pause only ever grows: a shorter pause than the one set changes nothing.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset (unused)
-- ARGV[1]  pause in ms (integer > 0)
-- ARGV[2]  optional: which buckets to lower, four characters for rpm, tpm, rpd,
--          tpd, '1' to lower ('0100' lowers tpm). Absent or '0000': pause only.
-- ARGV[3]  the call's cost in tokens (integer >= 0), with ARGV[2]
-- ARGV[4..15] bucket arguments (see prelude.lua), with ARGV[2]
--
-- A 429 means the budget believed in room the provider did not have. Pausing
-- alone leaves it as far ahead when the pause ends, with the pause's refill
-- banked on top. So each bucket named is lowered to at most what the call
-- needs (its cost, or 1 request) minus the refill over the pause: when the
-- pause ends the bucket holds just that call's share, as the provider's
-- retry delay says. A level never goes below minus one full bucket.
--
-- Returns {remaining_ms, now_ms}: the pause in force after this call.

local state = KEYS[1]
local ms = tonumber(ARGV[1])
local lower = ARGV[2] or '0000'
local now = now_ms()

if lower == '0000' then
  local h = redis.call('HMGET', state, 'pause', 'xp')
  local pause = tonumber(h[1]) or 0
  if now + ms > pause then
    pause = now + ms
    set(state, {xp = tonumber(h[2]) or 0}, now, 'pause', pause)
  end
  return {pause - now, now}
end

local cost = tonumber(ARGV[3])
local b, x = load(state, 4, now, {'pause'})
local pause = math.max(x.pause or 0, now + ms)
for i = 1, 4 do
  local bk = b[i]
  if bk and string.sub(lower, i, i) == '1' then
    local need = 1
    if IS_TOKEN[i] then need = cost end
    local target = math.min(need, bk.cap) - (pause - now) * bk.rate
    if target < -bk.cap then target = -bk.cap end
    if bk.level > target then bk.level = target end
  end
end
store(state, b, now, x, {'pause', int(pause)}, pause)
return {pause - now, now}
