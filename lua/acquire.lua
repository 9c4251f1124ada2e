-- acquire.lua: admit one call against every limit of a budget, or say how long
-- until it could be admitted. All-or-nothing: nothing is charged unless every
-- limit admits the call.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l   member = lease id, score = expiry (ms)
-- ARGV[1]  lease id (string, unique per call; a repeated id is answered, not re-admitted)
-- ARGV[2]  cost in tokens (integer >= 0)
-- ARGV[3]  priority: 0 interactive, 1 batch
-- ARGV[4]  max wait in ms (integer >= 0): how far ahead an interactive call may
--          reserve its turn; 0 admits only what fits now
-- ARGV[5]  lease TTL in ms (integer > 0)
-- ARGV[6]  concurrency limit (integer >= 0; 0 = none)
-- ARGV[7]  batch floor in thousandths: the share of each bucket and of the
--          slots that batch calls may not take (integer, 0 <= f < 1000)
-- ARGV[8]  mean ms a call holds its slot, as the caller has seen it (integer
--          >= 1; read only when no slot is free, to space the waiters)
-- ARGV[9..] bucket arguments (see prelude.lua)
--
-- Returns {code, wait_ms, now_ms, reason}:
--   code  1: admitted; the call's turn comes in wait_ms (0 = now). The lease is
--            held and every bucket charged, so the caller sleeps wait_ms and goes.
--   code  2: this lease id was already admitted (a retried call whose reply was
--            lost); nothing charged again; wait_ms as for 1.
--   code  0: not admitted, nothing charged; retry in wait_ms.
--   code -1: can never be admitted: its share (for batch, plus the floor)
--            exceeds the capacity of bucket `reason`.
--   reason: the limit that set wait_ms: rpm, tpm, rpd, tpd, concurrency, pause, or ''.

local state, leases = KEYS[1], KEYS[2]
local id = ARGV[1]
local cost = tonumber(ARGV[2])
local batch = ARGV[3] == '1'
local maxwait = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
local now = now_ms()
local b, h = load(state, 9, now)
local floor = 0
if batch then floor = ARGV[7] / 1000 end

-- Each bucket's share of this call: 1 request, or its tokens. A call whose
-- share (plus, for batch, the floor) exceeds a capacity can never be
-- admitted: say so rather than a wait that never comes.
local need = {}
for k = 1, b.n do
  local f = ARGV[8 + k]
  local c = 1
  if f == 'tpm' or f == 'tpd' then c = cost end
  need[k] = c
  if c + b.cap[k] * floor > b.cap[k] then return {-1, 0, now, f} end
end

-- deny answers code 0, unless this id was admitted before (a retry whose
-- first reply was lost): then code 2. The check costs a call, so it is made
-- only on the paths that deny, and where ZADD NX finds the id.
local function deny(wait, reason)
  local held = redis.call('ZSCORE', leases, id)
  if held then
    local w = 0
    if held - ttl > now then w = math.ceil(held - ttl - now) end
    return {2, w, now, ''}
  end
  return {0, wait, now, reason}
end

-- A pause admits nobody and reserves nothing: a pause may be extended while
-- callers wait, and a reservation made now could not see that.
local pause = h[3]
if pause then
  pause = tonumber(pause)
  if pause > now then return deny(math.ceil(pause - now), 'pause') end
end

if ARGV[6] ~= '0' then
  local conc = tonumber(ARGV[6])
  local allowed = conc
  if batch then allowed = conc - math.floor(conc * floor) end
  -- Leases past their expiry, or ended (score 0), hold no slot, removed or
  -- not (they are removed a bounded number at a time, below).
  local inflight = redis.call('ZCOUNT', leases, '(' .. int(now), '+inf')
  if inflight >= allowed then
    -- No slot. The next one frees when some call ends: on average every
    -- hold/conc ms, or at the latest when the oldest lease expires. Waiters
    -- are spaced along a virtual queue (qc) so that they come back one at a
    -- time instead of all at once.
    local spacing = ARGV[8] / conc
    if spacing < 1 then spacing = 1 end
    local first = redis.call('ZRANGEBYSCORE', leases, '(' .. int(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    local latest = ttl
    if first[2] then latest = first[2] - now end
    local qc = tonumber(redis.call('HGET', state, 'qc')) or 0
    if qc < now then qc = now end
    qc = math.ceil(qc + spacing)
    local wait = qc - now
    if wait > latest then wait = math.ceil(latest) end
    if wait < 1 then wait = 1 end
    if maxwait > 0 and wait <= maxwait then
      redis.call('HSET', state, 'qc', int(qc))
      extend(state, now, qc)
    end
    return deny(wait, 'concurrency')
  end
end

-- How long until every bucket has this call's share (and, for batch, its
-- share plus the floor kept for interactive calls).
local wait, reason, spacing = 0, '', 0
for k = 1, b.n do
  local want = need[k] + b.cap[k] * floor
  local level = b.level[k]
  if want > level then
    local w = (want - level) / b.rate[k]
    if w > wait then wait, reason, spacing = w, ARGV[8 + k], need[k] / b.rate[k] end
  end
end

if wait > 0 and (batch or wait > maxwait) then
  -- Batch calls never reserve ahead (an interactive call arriving later must
  -- not queue behind them), and no call reserves beyond its max wait.
  if batch and maxwait > 0 then
    local qb = tonumber(redis.call('HGET', state, 'qb')) or 0
    if qb < now + wait then qb = now + wait else qb = qb + spacing end
    if qb - now <= maxwait then
      qb = math.ceil(qb)
      redis.call('HSET', state, 'qb', int(qb))
      extend(state, now, qb)
      wait = qb - now
    end
  end
  return deny(math.ceil(wait), reason)
end

-- Admit: open the lease, charge every bucket. An interactive call with
-- wait > 0 takes its turn in the future: the buckets go below zero now, so
-- every later call queues behind it (first come, first served, one round
-- trip each).
wait = math.ceil(wait)
local expiry = now + wait + ttl
if redis.call('ZADD', leases, 'NX', int(expiry), id) == 0 then
  -- A retried call whose first reply was lost: charge nothing twice.
  local held = redis.call('ZSCORE', leases, id) - ttl
  local w = 0
  if held > now then w = math.ceil(held - now) end
  return {2, w, now, ''}
end
-- Leases past their expiry, and ended ones, hold no slot but take memory.
-- About one admission in 16 (those landing on a millisecond divisible by
-- 16) removes at most 100 of them: a mass expiry then costs many calls a
-- little each, never one call a lot, and most calls nothing. The lease just
-- added is live, so the set never empties here.
if now % 16 == 0 then
  local expired = redis.call('ZCOUNT', leases, '-inf', int(now))
  if expired > 0 then
    redis.call('ZREMRANGEBYRANK', leases, 0, int(math.min(expired, 100) - 1))
  end
end
for k = 1, b.n do b.level[k] = b.level[k] - need[k] end
store(state, leases, b, now, tonumber(h[2]) or 0, expiry, {})
return {1, wait, now, reason}
