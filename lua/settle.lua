-- settle.lua: end a lease. Gives its concurrency slot back (to the slot
-- queue's head, if anyone waits) and corrects the buckets by what the call
-- really used. Ends a lease at most once: a lease already ended, or
-- expired, changes nothing. Also takes a waiter that gives up out of the
-- slot queue.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l
-- KEYS[3]  slot queue   {<prefix>:<name>}:q   (see acquire.lua)
-- ARGV[1]  lease id
-- ARGV[2]  charged: the µs, on the Redis clock, at which acquire charged the
--          lease (its reply's now_us). A caller that cannot know it sends a
--          lower bound: an earlier time only ever gives back less.
-- ARGV[3]  the concurrency limit (integer >= 0; 0 = none), and
-- ARGV[4]  the slots batch calls may use, as acquire takes them
-- ARGV[5..] pairs: a bucket's field and its correction in µs of the bucket's
--          time (integer): negative gives back (tokens reserved but not
--          used; the request and tokens of a call never made), positive
--          charges an overrun as debt. The caller computes them, and caps a
--          debt at one bucket's span, so one wildly wrong estimate holds the
--          budget back for at most a window more. All of one settle's
--          corrections have the same sign.
--
-- Returns {code, now_us}:
--   1: ended now.
--   0: not in the lease set: ended before, or expired and since removed, or
--      a waiter never admitted. If it waited for a slot, it leaves the
--      queue, and a slot granted to it goes to the next waiter.
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

local state, leases, queue = KEYS[1], KEYS[2], KEYS[3]
local id, charged = ARGV[1], ARGV[2] + 0
local limit = ARGV[3]
local us, now = clock()

local score = redis.call('ZSCORE', leases, id)
local expiry
if score then
  score = score + 0
  expiry = score
end
if not score or score >= PENDING then
  -- No slot held: a waiter giving up (queued, or holding a grant), a
  -- pending lease (which may wait for its slot too), or a lease ended
  -- before. Out of the queue first, so that its grant goes to another.
  if limit ~= '0' then
    redis.call('ZREM', queue, id)
    if redis.call('ZREM', leases, 'g:' .. id) == 1 then give(now, limit + 0, ARGV[4] + 0) end
  end
  if not score then return {0, us} end
  expiry = score - PENDING
end
local live = expiry - now > 0
if live then redis.call('ZREM', leases, id) end
-- Its slot is free now (or was already, if it expired): the queue's head
-- gets it. A grant lasts CLAIM ms, less than the second by which xp
-- outlives a live lease, so it needs no cover; one that outlives the keys
-- (after an expiry) costs its waiter that grant, not its place.
if limit ~= '0' and score < PENDING then give(now, limit + 0, ARGV[4] + 0) end
if not live then return {2, us} end
local n = (#ARGV - 4) / 2
if n == 0 then return {1, us} end

-- fields[k] is bucket k's field, delta[k] its correction.
local fields, delta = {}, {}
for k = 1, n do
  fields[k], delta[k] = ARGV[3 + 2 * k], ARGV[4 + 2 * k] + 0
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
cover(now, (h[1] or 0) + 0, max(ms, now), args, j)
return {1, us}
