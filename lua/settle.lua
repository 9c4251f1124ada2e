-- settle.lua: end a lease. Gives its concurrency slot back and corrects the
-- buckets by what the call really used. Ends a lease at most once: a lease
-- already ended, or expired, changes nothing.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l
-- ARGV[1]  lease id
-- ARGV[2]  charged: the µs, on the Redis clock, at which acquire charged the
--          lease (its reply's now_us). A caller that cannot know it sends a
--          lower bound: an earlier time only ever gives back less.
-- ARGV[3..] pairs: a bucket's field and its correction in µs of the bucket's
--          time (integer): negative gives back (tokens reserved but not
--          used; the request and tokens of a call never made), positive
--          charges an overrun as debt. The caller computes them, and caps a
--          debt at one bucket's span, so one wildly wrong estimate holds the
--          budget back for at most a window more. All of one settle's
--          corrections have the same sign.
--
-- Returns {code, now_us}:
--   1: ended now.
--   0: not in the lease set: ended before, or expired and since removed.
--   2: expired: past its expiry, so its slot is already free. Left as it
--      is (acquire removes it later) and nothing given back: its
--      reservation stays charged, and a retry is answered 2 again.
--
-- A give-back must not restore capacity that the refill already restored.
-- Once a bucket is full again (its TAT in the past), what any earlier call
-- reserved has been refilled, and the next charge starts from now: that
-- restart is recorded in the field <bucket>.f (see prelude.lua). A lease
-- charged before the bucket's last restart gives nothing back to it; one
-- charged since gives back what it did not use. Without that rule a
-- give-back delayed past a refill and a new burst adds a second burst.

local state, leases = KEYS[1], KEYS[2]
local id, charged = ARGV[1], ARGV[2] + 0
local us, now = clock()

local expiry = redis.call('ZSCORE', leases, id)
if not expiry then return {0, us} end
if expiry - now <= 0 then return {2, us} end
redis.call('ZREM', leases, id)
local n = (#ARGV - 2) / 2
if n == 0 then return {1, us} end

-- fields[k] is bucket k's field, delta[k] its correction.
local fields, delta = {}, {}
for k = 1, n do
  fields[k], delta[k] = ARGV[1 + 2 * k], ARGV[2 + 2 * k] + 0
end

if delta[1] < 0 then
  -- Giving back: read each TAT and its restart time; a bucket that is full
  -- now, or restarted since the charge, takes nothing. Moving a TAT back
  -- never lengthens the keys' life, so no expiry changes.
  local names = {}
  for k = 1, n do names[2 * k - 1], names[2 * k] = fields[k], fields[k] .. '.f' end
  local h = redis.call('HMGET', state, unpack(names))
  local args, j = {}, 0
  for k = 1, n do
    local tat, restart = h[2 * k - 1], h[2 * k]
    if tat and tat - us > 0 and not (restart and restart - charged > 0) then
      args[j + 1], args[j + 2] = fields[k], fmt('%d', tat + delta[k])
      j = j + 2
    end
  end
  if j > 0 then redis.call('HSET', state, unpack(args, 1, j)) end
  return {1, us}
end

-- A debt starts from now if the bucket is full (a full bucket's surplus is
-- not spent twice): a restart, recorded like acquire's.
local h = redis.call('HMGET', state, 'xp', 'pause', unpack(fields))
local args, j = {}, 0
local ms = (h[2] or 0) + 0 -- a pause in force must outlive this write
for k = 1, n do
  local tat = h[2 + k]
  if tat and tat - us >= 0 then
    tat = tat + delta[k]
  else
    tat = us + delta[k]
    args[j + 1], args[j + 2] = fields[k] .. '.f', fmt('%d', us)
    j = j + 2
  end
  args[j + 1], args[j + 2] = fields[k], fmt('%d', tat)
  j = j + 2
  if tat / 1000 > ms then ms = tat / 1000 end
end
cover(state, leases, now, (h[1] or 0) + 0, max(ms, now), args, j)
return {1, us}
