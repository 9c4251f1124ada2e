-- acquire.lua: admit one call against every limit of a budget, or say how long
-- until it could be admitted. All-or-nothing: nothing is charged unless every
-- limit admits the call.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l   member = lease id, score = expiry (ms)
-- ARGV[1]  lease id (string, unique per call; a repeated id is answered, not re-admitted)
-- ARGV[2]  priority: 0 interactive, 1 batch
-- ARGV[3]  max wait in ms (integer >= 0): how far ahead an interactive call may
--          reserve its turn; 0 admits only what fits now
-- ARGV[4]  lease TTL in ms (integer > 0)
-- ARGV[5]  slots this call may use: the concurrency limit, less for batch the
--          share it leaves (integer >= 0); 0 = no concurrency limit
-- ARGV[6]  ms between two slot waiters: the mean time a call holds its slot
--          over the limit (integer >= 1; read only when no slot is free)
-- ARGV[7..6+n]  the n configured buckets' fields (rpm, tpm, rpd, tpd)
-- ARGV[7+n..]   for each bucket in the same order, two integers: the call's
--          charge (µs of the bucket's time) and its allowance (how far past
--          now the TAT may lie after the charge: the bucket's span, less for
--          batch the share it leaves)
--
-- Returns {code, wait_ms, now_us, reason, expiry_ms}:
--   code  1: admitted; the call's turn comes in wait_ms (0 = now). The lease is
--            held and every bucket charged, so the caller sleeps wait_ms and goes.
--   code  2: this lease id was already admitted (a retried call whose reply was
--            lost); nothing charged again; wait_ms until its turn (0 if past).
--   code  0: not admitted, nothing charged; retry in wait_ms.
--   code -1: can never be admitted: its charge exceeds its allowance in
--            bucket `reason`.
--   reason: the limit that set wait_ms: rpm, tpm, rpd, tpd, concurrency, pause, or ''.
--   expiry_ms: for codes 1 and 2, the lease's expiry as stored (its score);
--            otherwise 0.
--
-- A bucket found full (no TAT, or one in the past) restarts from now: what
-- was reserved before has been refilled. The admission records that
-- restart in <bucket>.f, so that a give-back from a lease charged before it
-- gives nothing (see settle.lua).

local state, leases = KEYS[1], KEYS[2]
local id = ARGV[1]
local batch = ARGV[2] == '1'
local maxwait = ARGV[3] -- parsed only where read: most admissions do not
local ttl = ARGV[4] + 0
local slots = ARGV[5]
local spacing = ARGV[6] -- parsed only where read
local n = (#ARGV - 6) / 3
-- bucket k: its field ARGV[6 + k]; its charge and allowance ARGV[5 + n + 2k]
-- and ARGV[6 + n + 2k].
local us, now = clock()
local h = redis.call('HMGET', state, 'xp', 'pause', unpack(ARGV, 7, 6 + n))

-- Each bucket's TAT after the charge, and how long until every bucket has
-- room for it: the first bucket with the longest wait names it, and its
-- charge (the time its refill takes for this call) spaces batch waiters.
local tats, restarted = {0, 0, 0, 0}, {false, false, false, false}
local wait, reason, step = 0, '', 0
for k = 1, n do
  local field, charge, allow = ARGV[6 + k], ARGV[5 + n + 2 * k] + 0, ARGV[6 + n + 2 * k] + 0
  if charge > allow then return {-1, 0, us, field, 0} end
  local tat = h[2 + k]
  if tat and tat - us >= 0 then
    tat = tat + charge
  else
    tat, restarted[k] = us + charge, true
  end
  tats[k] = tat
  local w = tat - us - allow
  if w > wait then wait, reason, step = w, field, charge end
end
wait, step = wait / 1000, step / 1000

-- The paths that deny break out of this block with the wait and reason.
repeat
  -- A pause admits nobody and reserves nothing: a pause may be extended
  -- while callers wait, and a reservation made now could not see that.
  local pause = h[2]
  if pause then
    pause = pause + 0
    if pause > now then wait, reason = ceil(pause - now), 'pause'; break end
  end

  if slots ~= '0' then
    -- Leases past their expiry hold no slot, removed or not (they are
    -- removed a bounded number at a time, below).
    local live = '(' .. fmt('%d', now)
    if redis.call('ZCOUNT', leases, live, LIVE) >= slots + 0 then
      -- No slot. The next one frees when some call ends: on average every
      -- `spacing` ms, or at the latest when the oldest lease expires.
      -- Waiters are spaced along a virtual queue (qc) so that they come
      -- back one at a time instead of all at once.
      local first = redis.call('ZRANGEBYSCORE', leases, live, LIVE, 'WITHSCORES', 'LIMIT', 0, 1)
      local latest = ttl
      if first[2] then latest = first[2] - now end
      local qc = (redis.call('HGET', state, 'qc') or 0) + 0
      if qc < now then qc = now end
      qc = ceil(qc + spacing)
      wait, reason = qc - now, 'concurrency'
      if wait > latest then wait = ceil(latest) end
      if wait < 1 then wait = 1 end
      maxwait = maxwait + 0
      if maxwait > 0 and wait <= maxwait then
        cover(state, leases, now, (h[1] or 0) + 0, qc, {'qc', fmt('%d', qc)}, 2)
      end
      break
    end
  end

  if wait > 0 then maxwait = maxwait + 0 else maxwait = 0 end
  if wait > 0 and (batch or wait > maxwait) then
    -- Batch calls never reserve ahead (an interactive call arriving later
    -- must not queue behind them), and no call reserves beyond its max
    -- wait. A batch waiter willing to wait is spaced along qb instead.
    if batch and maxwait > 0 then
      local qb = (redis.call('HGET', state, 'qb') or 0) + 0
      if qb < now + wait then qb = now + wait else qb = qb + step end
      if qb - now <= maxwait then
        qb = ceil(qb)
        cover(state, leases, now, (h[1] or 0) + 0, qb, {'qb', fmt('%d', qb)}, 2)
        wait = qb - now
      end
    end
    wait = ceil(wait)
    break
  end

  -- Admit: open the lease, charge every bucket. An interactive call with
  -- wait > 0 takes its turn in the future: the TATs move past their
  -- allowance now, so every later call queues behind it (first come, first
  -- served, one round trip each).
  wait = ceil(wait)
  local expiry = now + wait + ttl
  if redis.call('ZADD', leases, 'NX', fmt('%d', expiry), id) == 1 then
    -- Leases past their expiry hold no slot but take memory. About one
    -- admission in 16 (those landing on a millisecond divisible by 16)
    -- removes at most 100 of them, lowest expiry first (the sentinel
    -- scores highest): a mass expiry then costs many calls a little each,
    -- never one call a lot, and most calls nothing. A lease stays
    -- REAP_AFTER ms past its expiry first, so that a settle retried in
    -- that time finds it and learns it expired (see settle.lua).
    if now % 16 == 0 then
      local expired = redis.call('ZCOUNT', leases, '-inf', fmt('%d', now - REAP_AFTER))
      if expired > 0 then
        redis.call('ZREMRANGEBYRANK', leases, 0, fmt('%d', math.min(expired, 100) - 1))
      end
    end
    local args, j = {false, false, false, false, false, false, false, false, false, false}, 0
    local ms = expiry
    for k = 1, n do
      args[j + 1], args[j + 2] = ARGV[6 + k], fmt('%d', tats[k])
      j = j + 2
      if restarted[k] then
        args[j + 1], args[j + 2] = ARGV[6 + k] .. '.f', fmt('%d', us)
        j = j + 2
      end
      if tats[k] / 1000 > ms then ms = tats[k] / 1000 end
    end
    cover(state, leases, now, (h[1] or 0) + 0, ms, args, j)
    return {1, wait, us, reason, expiry}
  end
  -- ZADD NX found the id: a retried call whose first reply was lost.
until true

-- Not admitted now, or this id was admitted before (a retry whose first
-- reply was lost): then code 2, nothing charged again. The check costs a
-- call, so only these paths make it.
local held = redis.call('ZSCORE', leases, id)
if held then
  held = held + 0
  local w = 0
  if held - ttl > now then w = ceil(held - ttl - now) end
  return {2, w, us, '', held}
end
return {0, wait, us, reason, 0}
