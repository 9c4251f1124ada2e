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
local ms = tonumber(ARGV[1])
local now = now_ms()

if not ARGV[2] then
  local pause = tonumber(redis.call('HGET', state, 'pause')) or 0
  if now + ms > pause then
    pause = now + ms
    redis.call('HSET', state, 'pause', int(pause))
    extend(state, now, pause)
  end
  return {pause - now, now}
end

local cost = tonumber(ARGV[2])
local b, h = load(state, 3, now)
local pause = math.max(tonumber(h[3]) or 0, now + ms)
for k = 1, b.n do
  local f = ARGV[b.f + k - 1]
  local need = 1
  if f == 'tpm' or f == 'tpd' then need = cost end
  local target = math.min(need, b.cap[k]) - (pause - now) * b.rate[k]
  if target < -b.cap[k] then target = -b.cap[k] end
  if b.level[k] > target then b.level[k] = target end
end
store(state, nil, b, now, 0, pause, {'pause', int(pause)})
return {pause - now, now}
