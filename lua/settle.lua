-- settle.lua: end a lease. Gives its concurrency slot back and corrects the
-- buckets by what the call really used. Ends a lease at most once: a lease
-- already ended, or expired, changes nothing.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l
-- ARGV[1]  lease id
-- ARGV[2]  ms at which the lease expires: its score, as set by acquire or the
--          last keepalive (the lease's owner is the only one to change it)
-- ARGV[3..] pairs: a bucket's field and its correction in µs of the bucket's
--          time (integer): negative gives back (tokens reserved but not
--          used; the request and tokens of a call never made), positive
--          charges an overrun as debt. The caller computes them, and caps a
--          debt at one bucket's span, so one wildly wrong estimate holds the
--          budget back for at most a window more. All of one settle's
--          corrections have the same sign.
--
-- Returns {code, now_us}: code 1 ended now, 0 not found (ended before) or
-- expired (its reservation kept).
--
-- Giving back is one HINCRBY per bucket, without reading the budget: a TAT
-- moved into the past reads as full, so nothing needs clamping, and the keys
-- already live until the bucket is full again. A debt is taken from now if
-- the TAT lies in the past (a full bucket's surplus is not spent twice), so
-- it reads the TATs first.

local state, leases = KEYS[1], KEYS[2]
local id = ARGV[1]
local us, now = clock()

-- A lease past its expiry has already given its slot back (acquire counts
-- only live leases), so it is over: it keeps its reservation, as if
-- released.
if redis.call('ZREM', leases, id) == 0 or ARGV[2] - now <= 0 then return {0, us} end
if #ARGV < 4 then return {1, us} end
if string.byte(ARGV[4], 1) == 45 then -- '-': giving back
  for a = 3, #ARGV, 2 do redis.call('HINCRBY', state, ARGV[a], ARGV[a + 1]) end
  return {1, us}
end

local fields = {'xp', 'pause'}
for a = 3, #ARGV, 2 do fields[#fields + 1] = ARGV[a] end
local h = redis.call('HMGET', state, unpack(fields))
local args = {false, false, false, false, false, false, false, false, false, false}
local ms = (h[2] or 0) + 0 -- a pause in force must outlive this write
local j = 0
for a = 3, #ARGV, 2 do
  local tat = us
  local s = h[2 + (a - 1) / 2]
  if s then
    tat = s + 0
    if tat < us then tat = us end
  end
  tat = tat + ARGV[a + 1]
  args[j + 1], args[j + 2] = ARGV[a], fmt('%d', tat)
  j = j + 2
  if tat / 1000 > ms then ms = tat / 1000 end
end
cover(state, leases, now, (h[1] or 0) + 0, max(ms, now), args, j)
return {1, us}
