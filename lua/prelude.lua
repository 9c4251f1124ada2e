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
-- machine every redis.call costs a few microseconds, every argument and hash
-- field about one, and so does every number parsed from a string (strtod)
-- or printed into one (sprintf). The scripts therefore read and write only
-- what a path needs, let the caller precompute what it can, store only
-- integers, build few tables, and run no loop whose length grows with the
-- data. Levels are kept in thousandths, rounded down, never in the caller's
-- favour: at most 0.001 lost per write.
--
-- Numbers go to redis.call as strings made by int(): Redis 7.0 turns a Lua
-- number argument into text with a %.17g printf, which costs as much as a
-- small command, while %d formatting is cheap.

local function int(v)
  return string.format('%d', v)
end

-- now_ms reads the server clock: every process shares it, so skew between
-- callers' machines never changes the budget.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- load reads the budget: the bucket arguments start at ARGV[first]. It
-- returns the buckets b (b.n of them; b.f is the ARGV index of the first
-- field name; b.cap, b.rate and b.level are arrays, levels refilled up to
-- now) and the raw HMGET reply h: h[1] ts, h[2] xp, h[3] pause, then the
-- stored levels.
local function load(state, first, now)
  local n = (#ARGV - first + 1) / 4
  local h = redis.call('HMGET', state, 'ts', 'xp', 'pause', unpack(ARGV, first, first + n - 1))
  local b = {n = n, f = first, ts = now, cap = {}, rate = {}, level = {}}
  local elapsed = 0
  if h[1] then
    b.ts = tonumber(h[1])
    -- A clock that steps back (a failover to a replica with a slower clock)
    -- refills nothing until it has caught up: store never moves ts back, so
    -- the skew can neither drain a bucket nor refill it twice.
    if now > b.ts then elapsed = now - b.ts end
  end
  for k = 1, n do
    local a = first + n + 3 * (k - 1)
    local cap = tonumber(ARGV[a])
    local rate = ARGV[a + 1] / ARGV[a + 2]
    local level = cap -- a new or expired budget reads as full
    local v = h[3 + k]
    if v then
      level = v / 1000
      if level > cap then level = cap end -- capacity lowered, or refunded past full
      level = level + elapsed * rate
      if level > cap then level = cap end
    end
    b.cap[k], b.rate[k], b.level[k] = cap, rate, level
  end
  return b, h
end

-- store writes ts, every level and the fields in args (name, value, ...),
-- and keeps the budget until every bucket is full again and ms (the latest
-- pending time: a lease's expiry, a pause) has passed: an idle budget
-- vanishes, and reads as full, which it would be.
--
-- With leases (the lease set, which must exist: a lease was just added or
-- found) the expiry is set on both keys and recorded in xp, with a quarter
-- of slack so that most calls skip the PEXPIRE. Without, only the hash's own
-- TTL is extended (see extend): xp promises a TTL on the lease set too, and a
-- script that may run before any lease exists cannot keep that promise.
local function extend(state, now, ms)
  local need = math.ceil(ms - now) + 1000
  local ttl = redis.call('PTTL', state)
  if ttl < need then redis.call('PEXPIRE', state, int(need)) end
end

local function store(state, leases, b, now, xp, ms, args)
  args[#args + 1] = 'ts'
  args[#args + 1] = int(math.max(now, b.ts))
  for k = 1, b.n do
    local level = b.level[k]
    args[#args + 1] = ARGV[b.f + k - 1]
    args[#args + 1] = int(math.floor(level * 1000))
    if level < b.cap[k] then
      local full = now + (b.cap[k] - level) / b.rate[k]
      if full > ms then ms = full end
    end
  end
  if not leases then
    redis.call('HSET', state, unpack(args))
    return extend(state, now, ms)
  end
  local need = math.ceil(ms) + 1000
  if need <= xp then
    redis.call('HSET', state, unpack(args))
    return
  end
  xp = need + math.ceil((need - now) / 4)
  args[#args + 1] = 'xp'
  args[#args + 1] = int(xp)
  redis.call('HSET', state, unpack(args))
  local ttl = int(xp - now)
  redis.call('PEXPIRE', state, ttl)
  redis.call('PEXPIRE', leases, ttl)
end
