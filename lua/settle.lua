-- settle.lua: end a lease. Gives its concurrency slot back and corrects the
-- buckets by what the call really used. Ends a lease at most once: a lease
-- already ended, or expired, changes nothing.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l
-- ARGV[1]  lease id
-- ARGV[2]  ms at which the lease expires: its score, as set by acquire or the
--          last keepalive (the lease's owner is the only one to change it)
-- ARGV[3]  k: how many corrections follow (integer >= 0)
-- ARGV[4..3+2k]  k pairs: a bucket's field name and its correction in
--          thousandths (integer): positive gives back (tokens reserved but
--          not used; the request and tokens of a call never made), negative
--          charges an overrun as debt. The caller computes them, and caps a
--          debt at one bucket's capacity, so one wildly wrong estimate holds
--          the budget back for at most a window more. All of one settle's
--          corrections have the same sign.
-- ARGV[4+2k..] with a debt only: the bucket arguments (see prelude.lua)
--
-- Returns {code, now_ms}: code 1 ended now, 0 not found (ended before) or
-- expired (its reservation kept).
--
-- A refund is one HINCRBY per bucket, without reading the budget: a level
-- stored above capacity reads as full, so adding to the stored level gives
-- what refilling first and adding after would, and the keys already live
-- until the bucket is full again. A debt must first refill the bucket to
-- now (a full bucket loses its surplus before the debt is taken), so it
-- loads and stores the budget as acquire does.

local state, leases = KEYS[1], KEYS[2]
local id = ARGV[1]
local now = now_ms()

-- The lease is marked ended (score 0) rather than removed, so the lease set
-- is never emptied and recreated without its TTL; ended leases are reaped
-- like expired ones. A lease past its expiry has already given its slot
-- back (acquire counts only live leases), so it is over: it keeps its
-- reservation, as if released.
if redis.call('ZADD', leases, 'XX', 'CH', '0', id) == 0 or ARGV[2] - now <= 0 then return {0, now} end

if #ARGV == 3 then return {1, now} end
if string.byte(ARGV[5], 1) ~= 45 then -- '-': a debt
  -- Refunds only: no bucket arguments follow the pairs.
  for a = 4, #ARGV, 2 do redis.call('HINCRBY', state, ARGV[a], ARGV[a + 1]) end
  return {1, now}
end
local last = 3 + 2 * ARGV[3]

local first = last + 1
local n, v, h, ts = load(state, first, now)
for a = 4, last, 2 do
  for k = 1, n do
    if ARGV[first + k - 1] == ARGV[a] then
      local level = v[3 * k] + ARGV[a + 1] / 1000
      if level > v[3 * k - 2] then level = v[3 * k - 2] end
      v[3 * k] = level
    end
  end
end
local pending = (h[3] or 0) + 0 -- a pause in force must outlive this write
store(state, leases, first, n, v, now, ts, (h[2] or 0) + 0, max(pending, now), {}, 0)
return {1, now}
