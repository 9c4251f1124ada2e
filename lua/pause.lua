-- pause.lua: make every caller of the budget wait at least ARGV[1] ms from now,
-- and optionally bring buckets the provider says are exhausted back in line.
-- A pause only ever grows: a shorter pause than the one set changes nothing.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset (unused)
-- ARGV[1]  pause in ms (integer > 0)
-- ARGV[2]  optional: the call's cost in tokens (integer >= 0); with it,
-- ARGV[3..] the bucket arguments (see prelude.lua) of the buckets to lower
--
-- A 429 means the budget believed in room the provider did not have. Pausing
-- alone leaves it as far ahead when the pause ends, with the pause's refill
-- banked on top. So each bucket named is lowered to at most what the call
-- needs (its cost, or 1 request) minus the refill over the pause: when the
-- pause ends the bucket holds just that call's share, as the provider's
-- retry delay says. A level never goes below minus one full bucket.
--
-- Returns {remaining_ms, now_ms}: the pause in force after this call.
--
-- The pause may come before any lease exists, so it extends the hash's own
-- TTL and leaves xp alone (see store in prelude.lua).

local state = KEYS[1]
local ms = ARGV[1] + 0
local now = now_ms()

if not ARGV[2] then
  local pause = (redis.call('HGET', state, 'pause') or 0) + 0
  if now + ms > pause then
    pause = now + ms
    redis.call('HSET', state, 'pause', fmt('%d', pause))
    extend(state, now, pause)
  end
  return {pause - now, now}
end

local cost = ARGV[2] + 0
local n, v, h, ts = load(state, 3, now)
local pause = max((h[3] or 0) + 0, now + ms)
for k = 1, n do
  local f = ARGV[2 + k]
  local need = 1
  if f == 'tpm' or f == 'tpd' then need = cost end
  local cap = v[3 * k - 2]
  local target = math.min(need, cap) - (pause - now) * v[3 * k - 1]
  if target < -cap then target = -cap end
  if v[3 * k] > target then v[3 * k] = target end
end
store(state, nil, 3, n, v, now, ts, 0, pause, {'pause', fmt('%d', pause)}, 2)
return {pause - now, now}
