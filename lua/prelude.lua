-- prelude.lua: shared by every llmpacer script (prepended to each at load time,
-- so the refill and expiry rules exist once).
--
-- Bucket arguments: the scripts that read the buckets take them at the end of
-- ARGV, from a position of their own, for the n configured buckets (1 to 4,
-- in the order rpm, tpm, rpd, tpd): first the n field names, then for each
-- bucket in the same order three integers: capacity, refill per window,
-- window in ms. A bucket refills continuously at refill/window.
--
-- State hash fields: ts (ms of the last refill), rpm/tpm/rpd/tpd (levels in
-- thousandths of a request or token, negative while in debt or while reserved
-- turns are pending; a level above capacity reads as full), pause (ms until
-- which nobody is admitted), qc and qb (the virtual queues that space out
-- concurrency and batch waiters, in ms), xp (the expiry last set on both
-- keys, in ms: every level is full again, and every lease has expired,
-- before it).
--
-- Redis runs a script alone, so its cost is everyone's latency. On a small
-- machine every redis.call costs a few microseconds, and every argument,
-- hash field, number parsed from a string (strtod) or printed into one
-- (sprintf), table and closure about a thousand instructions (a third of a
-- microsecond). The scripts therefore read and write only
-- what a path needs, let the caller precompute what it can, store only
-- integers, build few tables, and run no loop whose length grows with the
-- data. Levels are kept in thousandths, rounded down, never in the caller's
-- favour: at most 0.001 lost per write.
--
-- Numbers go to redis.call as strings made by fmt('%d', v): Redis 7.0 turns
-- a Lua number argument into text with a %.17g printf, which costs as much
-- as a small command, while %d formatting is cheap.

local fmt = string.format -- fmt('%d', v): see above
-- Library functions reached through locals, and numbers parsed by arithmetic
-- (s + 0) rather than tonumber(s), which parses twice: each saves about a
-- microsecond per script on a small machine.
local floor, ceil, max = math.floor, math.ceil, math.max

-- now_ms reads the server clock: every process shares it, so skew between
-- callers' machines never changes the budget.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + floor(t[2] / 1000)
end

-- load reads the budget: the bucket arguments start at ARGV[first]. It
-- returns the number of buckets n, an array v holding for bucket k its
-- capacity at v[3k-2], its refill per ms at v[3k-1] and its level refilled
-- up to now at v[3k], the raw HMGET reply h (h[1] ts, h[2] xp, h[3] pause,
-- then the stored levels) and ts (the stored ts, or now).
local function load(state, first, now)
  local n = (#ARGV - first + 1) / 4
  local h = redis.call('HMGET', state, 'ts', 'xp', 'pause', unpack(ARGV, first, first + n - 1))
  local ts, elapsed = now, 0
  if h[1] then
    ts = h[1] + 0
    -- A clock that steps back (a failover to a replica with a slower clock)
    -- refills nothing until it has caught up: store never moves ts back, so
    -- the skew can neither drain a bucket nor refill it twice.
    if now > ts then elapsed = now - ts end
  end
  local v = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} -- sized once: at most 4 buckets
  for k = 1, n do
    local a = first + n + 3 * k - 3
    local cap = ARGV[a] + 0
    local rate = ARGV[a + 1] / ARGV[a + 2]
    local level = cap -- a new or expired budget reads as full
    local s = h[3 + k]
    if s then
      level = s / 1000
      if level > cap then level = cap end -- capacity lowered, or refunded past full
      level = level + elapsed * rate
      if level > cap then level = cap end
    end
    v[3 * k - 2], v[3 * k - 1], v[3 * k] = cap, rate, level
  end
  return n, v, h, ts
end

-- extend makes the hash live at least until ms (plus a second), leaving xp
-- alone: see store.
local function extend(state, now, ms)
  local need = ceil(ms - now) + 1000
  if redis.call('PTTL', state) < need then redis.call('PEXPIRE', state, fmt('%d', need)) end
end

-- store writes ts, the level of each of the n buckets in v (as load returned
-- them, for the bucket arguments at ARGV[first]) and the fields in args
-- (name, value, ...), and keeps the budget until every bucket is full again
-- and ms (the latest pending time: a lease's expiry, a pause) has passed:
-- an idle budget vanishes, and reads as full, which it would be.
--
-- With leases (the lease set, which must exist: a lease was just added or
-- found) the expiry is set on both keys and recorded in xp, with a quarter
-- of slack so that most calls skip the PEXPIRE. Without, only the hash's own
-- TTL is extended: xp promises a TTL on the lease set too, and a script
-- that may run before any lease exists cannot keep that promise.
local function store(state, leases, first, n, v, now, ts, xp, ms, args, j)
  args[j + 1] = 'ts'
  args[j + 2] = fmt('%d', max(now, ts))
  j = j + 2
  for k = 1, n do
    local cap, level = v[3 * k - 2], v[3 * k]
    args[j + 1] = ARGV[first + k - 1]
    args[j + 2] = fmt('%d', floor(level * 1000))
    j = j + 2
    if level < cap then
      local full = now + (cap - level) / v[3 * k - 1]
      if full > ms then ms = full end
    end
  end
  if not leases then
    redis.call('HSET', state, unpack(args, 1, j))
    return extend(state, now, ms)
  end
  local need = ceil(ms) + 1000
  if need <= xp then
    redis.call('HSET', state, unpack(args, 1, j))
    return
  end
  xp = need + ceil((need - now) / 4)
  args[j + 1] = 'xp'
  args[j + 2] = fmt('%d', xp)
  redis.call('HSET', state, unpack(args, 1, j + 2))
  local ttl = fmt('%d', xp - now)
  redis.call('PEXPIRE', state, ttl)
  redis.call('PEXPIRE', leases, ttl)
end
