-- pause.lua: make every caller of the budget wait at least ARGV[1] ms from now,
-- and optionally bring buckets the provider says are exhausted back in line.
-- A pause only ever grows: a shorter pause than the one set changes nothing.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset (its TTL is kept with the hash's: see cover)
-- ARGV[1]  pause in ms (integer > 0)
-- ARGV[2..] optional triples, one per bucket to lower: its field, an offset
--          and a limit in µs (integers): the bucket's span less the refused
--          call's charge (its share, at most the capacity), and twice the span
--
-- A 429 means the budget believed in room the provider did not have. Pausing
-- alone leaves it as far ahead when the pause ends, with the pause's refill
-- banked on top. So each bucket sent is lowered to hold, when the pause
-- ends, just the refused call's share, as the provider's retry delay says:
-- its TAT moves to at least the pause's end plus the offset. A bucket never
-- goes below minus one full bucket: the TAT stays within the limit of now.
--
-- Returns {remaining_ms, now_ms}: the pause in force after this call.

local state = KEYS[1]
local us, now = clock()
local fields = {'pause', 'xp'}
for a = 2, #ARGV, 3 do fields[#fields + 1] = ARGV[a] end
local h = redis.call('HMGET', state, unpack(fields))
local pause = max((h[1] or 0) + 0, now + ARGV[1])
local args = {'pause', fmt('%d', pause)}
local ms = pause
for a = 2, #ARGV, 3 do
  local target = us + (pause - now) * 1000 + ARGV[a + 1]
  local limit = us + ARGV[a + 2]
  if target > limit then target = limit end
  local s = h[3 + (a - 2) / 3]
  if not s or s + 0 < target then
    args[#args + 1] = ARGV[a]
    args[#args + 1] = fmt('%d', target)
    if target / 1000 > ms then ms = target / 1000 end
  end
end
if #args > 2 or pause > (h[1] or 0) + 0 then
  cover(state, KEYS[2], now, (h[2] or 0) + 0, ms, args, #args)
end
return {pause - now, now}
