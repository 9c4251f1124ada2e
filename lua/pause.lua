-- pause.lua: make every caller of the budget wait at least ARGV[1] ms from now,
-- and optionally bring buckets the provider says are exhausted back in line.
-- A pause only ever grows: a shorter pause than the one set changes nothing.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset and
-- KEYS[3]  slot queue (their TTL is kept with the hash's: see cover)
-- ARGV[1]  pause in ms (integer >= 0); 0 sets no pause and lowers the
--          buckets sent from now, not from the end of a pause in force:
--          how a provider's rate-limit headers bring the budget down to the
--          room they report, without pausing anyone
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
-- Each bucket sent is a charge event in its give-back stack (see
-- prelude.lua): a give-back from a lease charged before the pause never
-- takes the bucket below the level the pause set.
--
-- Returns {remaining_ms, now_us}: the pause in force after this call.

local state = KEYS[1]
local ms_arg = ARGV[1]
local n = (#ARGV - 1) / 3
-- bucket k: its field ARGV[3k - 1], offset ARGV[3k], limit ARGV[3k + 1].
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)
local names = {'pause', 'xp'}
for k = 1, n do names[2 + k], names[2 + n + k] = ARGV[3 * k - 1], ARGV[3 * k - 1] .. '.h' end
local h = redis.call('HMGET', state, unpack(names, 1, 2 + 2 * n))
local pause = max((h[1] or 0) + 0, now + ms_arg)
local args, j, from = {'pause', fmt('%d', pause)}, 2, pause
if ms_arg == '0' then args, j, from = {}, 0, now end
local base, ms = j, pause
for k = 1, n do
  local offset, limit = ARGV[3 * k] + 0, us + ARGV[3 * k + 1]
  local target = us + (from - now) * 1000 + offset
  if target > limit then target = limit end
  -- Lowering is a charge event whose turn is the target: its headroom is
  -- how far the TAT (now, if the bucket is full) lay past it.
  local tat = h[2 + k]
  if tat and tat - us >= 0 then tat = tat + 0 else tat = us end
  -- Without a pause, a bucket already as low as asked is left alone.
  if base > 0 or tat - target < 0 then
    args[j + 1], args[j + 2] = names[2 + n + k], push(h[2 + n + k], us, max(tat - target, 0))
    j = j + 2
  end
  if tat - target < 0 or base > 0 and not h[2 + k] then
    args[j + 1], args[j + 2] = names[2 + k], fmt('%d', target)
    j = j + 2
    if target / 1000 > ms then ms = target / 1000 end
  end
end
if j > base or base > 0 and pause > (h[1] or 0) + 0 then
  cover(now, (h[2] or 0) + 0, ms, args, j)
end
return {pause - now, us}
