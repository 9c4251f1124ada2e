-- prelude.lua: shared by every llmpacer script (prepended to each at load time,
-- so the refill and expiry rules exist once).
--
-- Bucket arguments: every script that reads the buckets passes twelve values
-- starting at a position of its own, three for each of rpm, tpm, rpd, tpd in
-- that order: capacity (0 = this limit is not configured), refill per window,
-- window in ms. All integers: a bucket refills continuously at refill/window.
--
-- State hash fields: ts (ms of the last refill), rpm/tpm/rpd/tpd (levels in
-- thousandths of a request or token, negative while in debt or while reserved
-- turns are pending), pause (ms until which nobody is admitted), hold (mean ms
-- a lease is held), qc and qb (the virtual queues that space out concurrency
-- and batch waiters, in ms), le (the latest lease expiry, in ms), xp (the
-- expiry last set on the hash, in ms; every pending time above is below it).
--
-- Redis runs a script alone, so its cost is everyone's latency. Every
-- redis.call costs a few microseconds on a small machine, and so does every
-- hash field read or written (a small hash is a list scanned per field, and
-- each value is parsed or printed as a number). The scripts read and write
-- only the fields a path needs, store only integers, and run no loop whose
-- length grows with the data. Levels are kept in thousandths, rounded down,
-- never in the caller's favour: at most 0.001 lost per call.
--
-- Numbers go to redis.call as strings made by int(): Redis 7.0 turns a Lua
-- number argument into text with a %.17g printf, which costs as much as a
-- small command, while %d formatting is cheap.

local BUCKETS = {'rpm', 'tpm', 'rpd', 'tpd'}
-- Request buckets (rpm, rpd) charge 1 per call; token buckets charge the cost.
local IS_TOKEN = {false, true, false, true}

local function int(v)
  return string.format('%d', v)
end

-- now_ms reads the server clock: every process shares it, so skew between
-- callers' machines never changes the budget.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- load reads the budget: ts, xp, the level of every configured bucket
-- (refilled up to now) and the extra fields named (numbers, nil if unset).
-- The bucket arguments start at ARGV[first].
local function load(state, first, now, extra)
  local fields = {'ts', 'xp'}
  local cfg = {}
  for i = 1, 4 do
    local a = first + 3 * (i - 1)
    local cap = tonumber(ARGV[a])
    if cap > 0 then
      cfg[#cfg + 1] = {i = i, cap = cap, rate = tonumber(ARGV[a + 1]) / tonumber(ARGV[a + 2])}
      fields[#fields + 1] = BUCKETS[i]
    end
  end
  local n = #fields
  for j = 1, #extra do fields[n + j] = extra[j] end
  local h = redis.call('HMGET', state, unpack(fields))
  local ts = tonumber(h[1]) or now
  -- A clock that steps back (a failover to a replica with a slower clock)
  -- refills nothing until it has caught up: store never moves ts back, so
  -- the skew can neither drain a bucket nor refill it twice.
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  local b = {}
  for k = 1, #cfg do
    local c = cfg[k]
    local level = c.cap -- a new or expired budget reads as full
    local v = h[2 + k]
    if v then
      level = tonumber(v) / 1000
      if level > c.cap then level = c.cap end -- capacity lowered since
    end
    level = level + elapsed * c.rate
    if level > c.cap then level = c.cap end
    c.level = level
    b[c.i] = c
  end
  local x = {ts = ts, xp = tonumber(h[2]) or 0}
  for j = 1, #extra do x[extra[j]] = tonumber(h[n + j]) end
  return b, x
end

-- cover keeps the hash alive until ms (plus a second): its expiry is set with
-- a quarter of slack and recorded in xp, so most calls skip the PEXPIRE. The
-- hash is never emptied, so it cannot lose a TTL once set. It returns the
-- fields to write with the caller's HSET.
local function cover(state, x, now, ms, args)
  local need = math.ceil(ms) + 1000
  if need > x.xp then
    x.xp = need + math.ceil((need - now) / 4)
    args[#args + 1] = 'xp'
    args[#args + 1] = int(x.xp)
    return true
  end
  return false
end

-- store writes ts, the levels and the fields in args (name, value, ...), and
-- keeps the hash until every bucket is full again and any pending time has
-- passed: an idle budget vanishes, and reads as full, which it would be.
local function store(state, b, now, x, args, pending)
  args[#args + 1] = 'ts'
  args[#args + 1] = int(math.max(now, x.ts))
  local until_ms = pending or now
  for i = 1, 4 do
    local bk = b[i]
    if bk then
      args[#args + 1] = BUCKETS[i]
      args[#args + 1] = int(math.floor(bk.level * 1000))
      local full = now + (bk.cap - bk.level) / bk.rate
      if full > until_ms then until_ms = full end
    end
  end
  local expire = cover(state, x, now, until_ms, args)
  redis.call('HSET', state, unpack(args))
  if expire then redis.call('PEXPIRE', state, int(x.xp - now)) end
end

-- set writes one field that holds a pending time (a pause, a queue) and
-- keeps the hash until then.
local function set(state, x, now, field, ms)
  local args = {field, int(math.ceil(ms))}
  local expire = cover(state, x, now, ms, args)
  redis.call('HSET', state, unpack(args))
  if expire then redis.call('PEXPIRE', state, int(x.xp - now)) end
end
