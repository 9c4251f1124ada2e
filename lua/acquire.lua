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
local cost = ARGV[2] + 0
local batch = ARGV[3] == '1'
local ttl = ARGV[5] + 0
local now = now_ms()
local n, v, h, ts = load(state, 9, now)
local keep = 0 -- the share of each bucket batch calls leave
if batch then keep = ARGV[7] / 1000 end

-- A call whose share of a bucket (1 request, or its tokens; for batch, plus
-- the floor) exceeds its capacity can never be admitted: say so rather than
-- a wait that never comes. Otherwise, find how long until every bucket has
-- that share: the first bucket with the longest wait names it, and spacing
-- is how long its refill takes for the call's share.
local wait, reason, spacing = 0, '', 0
for k = 1, n do
  local f = ARGV[8 + k]
  local c = 1
  if f == 'tpm' or f == 'tpd' then c = cost end
  local cap, level = v[3 * k - 2], v[3 * k]
  local want = c + cap * keep
  if want > cap then return {-1, 0, now, f} end
  if want > level then
    local rate = v[3 * k - 1]
    local w = (want - level) / rate
    if w > wait then wait, reason, spacing = w, f, c / rate end
  end
end

-- The paths that deny break out of this block with the wait and reason.
-- The max wait is parsed only where it is read: most admissions do not.
repeat
  -- A pause admits nobody and reserves nothing: a pause may be extended
  -- while callers wait, and a reservation made now could not see that.
  local pause = h[3]
  if pause then
    pause = pause + 0
    if pause > now then wait, reason = ceil(pause - now), 'pause'; break end
  end

  if ARGV[6] ~= '0' then
    local conc = ARGV[6] + 0
    local allowed = conc
    if batch then allowed = conc - floor(conc * keep) end
    -- Leases past their expiry, or ended (score 0), hold no slot, removed
    -- or not (they are removed a bounded number at a time, below).
    local live = '(' .. fmt('%d', now)
    if redis.call('ZCOUNT', leases, live, '+inf') >= allowed then
      -- No slot. The next one frees when some call ends: on average every
      -- hold/conc ms, or at the latest when the oldest lease expires.
      -- Waiters are spaced along a virtual queue (qc) so that they come
      -- back one at a time instead of all at once.
      local space = ARGV[8] / conc
      if space < 1 then space = 1 end
      local first = redis.call('ZRANGEBYSCORE', leases, live, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      local latest = ttl
      if first[2] then latest = first[2] - now end
      local qc = (redis.call('HGET', state, 'qc') or 0) + 0
      if qc < now then qc = now end
      qc = ceil(qc + space)
      wait, reason = qc - now, 'concurrency'
      if wait > latest then wait = ceil(latest) end
      if wait < 1 then wait = 1 end
      local maxwait = ARGV[4] + 0
      if maxwait > 0 and wait <= maxwait then
        redis.call('HSET', state, 'qc', fmt('%d', qc))
        extend(state, now, qc)
      end
      break
    end
  end

  local maxwait = 0
  if wait > 0 then maxwait = ARGV[4] + 0 end
  if wait > 0 and (batch or wait > maxwait) then
    -- Batch calls never reserve ahead (an interactive call arriving later
    -- must not queue behind them), and no call reserves beyond its max
    -- wait. A batch waiter willing to wait is spaced along qb instead.
    if batch and maxwait > 0 then
      local qb = (redis.call('HGET', state, 'qb') or 0) + 0
      if qb < now + wait then qb = now + wait else qb = qb + spacing end
      if qb - now <= maxwait then
        qb = ceil(qb)
        redis.call('HSET', state, 'qb', fmt('%d', qb))
        extend(state, now, qb)
        wait = qb - now
      end
    end
    wait = ceil(wait)
    break
  end

  -- Admit: open the lease, charge every bucket. An interactive call with
  -- wait > 0 takes its turn in the future: the buckets go below zero now,
  -- so every later call queues behind it (first come, first served, one
  -- round trip each).
  wait = ceil(wait)
  local expiry = now + wait + ttl
  if redis.call('ZADD', leases, 'NX', fmt('%d', expiry), id) == 1 then
    -- Leases past their expiry, and ended ones, hold no slot but take
    -- memory. About one admission in 16 (those landing on a millisecond
    -- divisible by 16) removes at most 100 of them: a mass expiry then
    -- costs many calls a little each, never one call a lot, and most calls
    -- nothing. The lease just added is live, so the set never empties here.
    if now % 16 == 0 then
      local expired = redis.call('ZCOUNT', leases, '-inf', fmt('%d', now))
      if expired > 0 then
        redis.call('ZREMRANGEBYRANK', leases, 0, fmt('%d', math.min(expired, 100) - 1))
      end
    end
    for k = 1, n do
      local c = 1
      local f = ARGV[8 + k]
      if f == 'tpm' or f == 'tpd' then c = cost end
      v[3 * k] = v[3 * k] - c
    end
    store(state, leases, 9, n, v, now, ts, (h[2] or 0) + 0, expiry, {false, false, false, false, false, false, false, false, false, false, false, false}, 0)
    return {1, wait, now, reason}
  end
  -- ZADD NX found the id: a retried call whose first reply was lost.
until true

-- Not admitted now, or this id was admitted before (a retry whose first
-- reply was lost): then code 2, nothing charged again. The check costs a
-- call, so only these paths make it.
local held = redis.call('ZSCORE', leases, id)
if held then
  local w = 0
  if held - ttl > now then w = ceil(held - ttl - now) end
  return {2, w, now, ''}
end
return {0, wait, now, reason}
