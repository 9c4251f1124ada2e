-- settle.lua: end a lease. Gives its concurrency slot back and corrects the
-- token buckets by what the call really used. Ends a lease at most once: a
-- lease already ended, or expired, changes nothing.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l
-- ARGV[1]  lease id
-- ARGV[2]  mode: 'settle'  refund reserved-used tokens (or charge the overrun as debt)
--                'release' keep the whole reservation (the call failed, but the
--                          provider may have counted it)
--                'cancel'  the call never happened: give back its tokens and its request
-- ARGV[3]  tokens reserved (integer >= 0)
-- ARGV[4]  tokens used (integer >= 0; read only by 'settle')
-- ARGV[5]  ms at which the lease's turn began (from acquire: now + wait)
-- ARGV[6]  ms at which the lease expires: its score, as set by acquire or the
--          last keepalive (the lease's owner is the only one to change it)
-- ARGV[7..18] bucket arguments (see prelude.lua)
--
-- Returns {code, now_ms}: code 1 ended now, 0 not found (ended before) or
-- expired (then removed, its reservation kept).

local state, leases = KEYS[1], KEYS[2]
local id, mode = ARGV[1], ARGV[2]
local reserved = tonumber(ARGV[3])
local used = tonumber(ARGV[4])
local start = tonumber(ARGV[5])
local expiry = tonumber(ARGV[6])
local now = now_ms()

-- A lease past its expiry has already given its slot back (acquire counts
-- only live leases), so it is over: it keeps its reservation, as if released.
if redis.call('ZREM', leases, id) == 0 or expiry <= now then return {0, now} end

-- A cancelled lease never held its slot for a call, so it says nothing
-- about how long calls take.
local tracks = mode ~= 'cancel' and start <= now
local extra = {}
if tracks then extra = {'hold'} end
local b, x = load(state, 7, now, extra)
for i = 1, 4 do
  local bk = b[i]
  if bk then
    local delta = 0
    if mode == 'settle' and IS_TOKEN[i] then
      delta = reserved - used
    elseif mode == 'cancel' then
      if IS_TOKEN[i] then delta = reserved else delta = 1 end
    end
    -- One overrun is charged at most one full bucket, so one wildly wrong
    -- estimate holds the budget back for at most a window more.
    if delta < -bk.cap then delta = -bk.cap end
    local level = bk.level + delta
    if level > bk.cap then level = bk.cap end
    bk.level = level
  end
end

-- Track how long calls hold their slot: concurrency waiters use it to guess
-- when the next slot frees.
local args = {}
if tracks then
  local d = now - start
  local hold = d
  if x.hold then hold = x.hold * 0.8 + d * 0.2 end
  args = {'hold', int(math.floor(hold + 0.5))}
end
store(state, b, now, x, args)
return {1, now}
