-- prelude.lua: shared by every llmpacer script (prepended to each at load time,
-- so the refill rule exists once). Defines the budget's rate buckets.
--
-- Every script that loads the prelude passes the same eight bucket arguments
-- starting at ARGV[BUCKET_ARGV] (the script sets BUCKET_ARGV before calling
-- load_buckets):
--   capacity (tokens or requests; 0 = this limit is not configured)
--   rate (refill per millisecond, float)
-- for the buckets rpm, tpm, rpd, tpd in that order.
--
-- State hash fields: ts (ms of the last refill, integer), rpm/tpm/rpd/tpd
-- (levels, floats, may be negative while in debt), pause (ms until which
-- every caller waits), hold (mean lease hold time in ms), qc and qb (the
-- virtual queues that stagger concurrency and batch waiters, in ms), lt (the
-- longest lease TTL in use, in ms), le (the latest lease expiry, in ms), xp
-- (the expiry last set on the hash itself, in ms), n (admissions, modulo
-- 16, which paces the removal of expired leases).
--
-- Redis runs a script alone, so every redis.call counts: on a small machine
-- each costs one to two microseconds. The scripts make as few as they can
-- and none whose number grows with the data.

local BUCKETS = {'rpm', 'tpm', 'rpd', 'tpd'}
-- Request buckets (rpm, rpd) charge 1 per call; token buckets charge the cost.
local IS_TOKEN = {false, true, false, true}

-- now_ms reads the server clock: every process shares it, so skew between
-- callers' machines never changes the budget. Whole milliseconds keep the
-- stored timestamp exact in a double and in its string form.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- load_buckets reads the state hash and refills every configured bucket up to
-- now. It returns the bucket table and the raw HMGET extras (pause, hold, qc, qb).
local function load_buckets(state, first, now)
  local h = redis.call('HMGET', state, 'ts', 'rpm', 'tpm', 'rpd', 'tpd', 'pause', 'hold', 'qc', 'qb', 'lt', 'le', 'xp', 'n')
  local ts = tonumber(h[1]) or now
  -- A clock that steps back (a failover to a replica with a slower clock)
  -- refills nothing until it has caught up: store_buckets never moves ts
  -- back, so the skew can neither drain a bucket nor refill it twice.
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  local b = {}
  for i = 1, 4 do
    local cap = tonumber(ARGV[first + 2 * (i - 1)])
    local rate = tonumber(ARGV[first + 2 * (i - 1) + 1])
    if cap and cap > 0 and rate and rate > 0 then
      local level = tonumber(h[i + 1]) or cap -- a new budget starts full
      if level > cap then level = cap end     -- capacity lowered since
      level = level + elapsed * rate
      if level > cap then level = cap end
      b[i] = {cap = cap, rate = rate, level = level}
    end
  end
  return b, {ts = ts, pause = tonumber(h[6]) or 0, hold = tonumber(h[7]), qc = tonumber(h[8]) or 0,
    qb = tonumber(h[9]) or 0, lt = tonumber(h[10]) or 0, le = tonumber(h[11]) or 0,
    xp = tonumber(h[12]) or 0, n = tonumber(h[13]) or 0}
end

-- store_buckets writes the levels back with ts = now, plus the fields in
-- extra (name, value, ...), and sets the hash's expiry to the moment every
-- bucket would be full again and nothing else is pending (a pause, a queue, a
-- lease): an idle budget then vanishes, and a vanished budget reads as full,
-- which is exactly what it would have been.
local function store_buckets(state, b, now, x, extra)
  local args = {'ts', math.max(now, x.ts)}
  if extra then
    for i = 1, #extra do args[#args + 1] = extra[i] end
  end
  local until_ms = math.max(now, x.pause, x.qc, x.qb, x.le)
  for i = 1, 4 do
    local bk = b[i]
    if bk then
      args[#args + 1] = BUCKETS[i]
      args[#args + 1] = bk.level
      local full = now + (bk.cap - bk.level) / bk.rate
      if full > until_ms then until_ms = full end
    end
  end
  -- Most calls need no new expiry: the one set last time (xp) still covers
  -- them, since it was set with a quarter of slack. Skipping the PEXPIRE
  -- saves a call; the hash is never emptied, so it cannot lose its TTL.
  local need = math.ceil(until_ms) + 1000
  if need > x.xp then
    local xp = need + math.ceil((need - now) / 4)
    args[#args + 1] = 'xp'
    args[#args + 1] = xp
    redis.call('HSET', state, unpack(args))
    redis.call('PEXPIRE', state, xp - now)
  else
    redis.call('HSET', state, unpack(args))
  end
end

-- extend_ttl makes sure key lives at least ms more, never shortening it: two
-- processes may run with different lease TTLs.
local function extend_ttl(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
