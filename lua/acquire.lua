-- acquire.lua: admit one call against every limit of a budget, or say how long
-- until it could be admitted. All-or-nothing: nothing is charged unless every
-- limit admits the call.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l   leases and grants (see prelude.lua)
-- KEYS[3]  slot queue   {<prefix>:<name>}:q   member = waiter id, score = ticket;
--          its name is also the channel on which grants are published
-- ARGV[1]  lease id (string, unique per call; a repeated id is answered, not re-admitted)
-- ARGV[2]  priority: 0 interactive, 1 batch
-- ARGV[3]  max wait in ms (integer >= 0): how far ahead an interactive call may
--          reserve its turn, and how long a caller may wait for a slot; 0
--          admits only what fits now
-- ARGV[4]  lease TTL in ms (integer > 0)
-- ARGV[5]  the concurrency limit (integer >= 0); 0 = none
-- ARGV[6]  slots batch calls may use: the limit less the share they leave
--          (integer >= 0; read only with a limit)
-- ARGV[7]  ms between two slots freeing: the mean time a call holds its
--          slot over the limit (integer >= 1; read only when a caller queues)
-- ARGV[8]  ticket: 0 on a call's first attempt; afterwards the ticket a
--          reply gave it (µs), which keeps its place in the slot queue and
--          claims a slot granted to it, or the slot of its pending lease
-- ARGV[9..8+n]  the n configured buckets' fields (rpm, tpm, rpd, tpd)
-- ARGV[9+n..]   for each bucket in the same order, two integers: the call's
--          charge (µs of the bucket's time) and its allowance (how far past
--          now the TAT may lie after the charge: the bucket's span, less for
--          batch the share it leaves)
--
-- Returns {code, wait_ms, now_us, reason, expiry_ms, ticket}:
--   code  1: admitted; every bucket charged; the call's turn comes in
--            wait_ms (0 = now). ticket 0: the lease holds its slot (with a
--            concurrency limit, only ever with wait_ms 0). ticket t: a
--            pending lease, holding no slot: at its turn, the caller sends
--            acquire again with ticket t to claim one (answered like this).
--   code  2: this lease id was already admitted (a retry whose reply was
--            lost, or a claim before its turn); nothing charged again;
--            wait_ms until its turn (0 if past); ticket as for code 1.
--   code  0: not admitted, nothing charged; retry in wait_ms. ticket t:
--            queued for a slot: retry with ticket t when the id is
--            published on KEYS[3] (a grant) or after wait_ms, whichever is
--            first. ticket 0: not queued.
--   code -1: can never be admitted: its charge exceeds its allowance in
--            bucket `reason`.
--   reason: the limit that set wait_ms: rpm, tpm, rpd, tpd, concurrency, pause, or ''.
--   expiry_ms: for codes 1 and 2, the lease's expiry as stored (without
--            PENDING); otherwise 0.
--
-- A bucket found full (no TAT, or one in the past) restarts from now: what
-- was reserved before has been refilled. Every admission records its
-- charge in each bucket's give-back stack (see prelude.lua), so that a
-- give-back from a lease charged before it returns no more than the charge
-- left room for (see settle.lua).

local state, leases, queue = KEYS[1], KEYS[2], KEYS[3]
local id = ARGV[1]
local batch = ARGV[2] == '1'
local maxwait = ARGV[3] -- parsed only where read: most admissions do not
local ttl = ARGV[4] + 0
local limit = ARGV[5]
local ticket = ARGV[8]
local n = (#ARGV - 8) / 3
-- bucket k: its field ARGV[8 + k]; its charge and allowance ARGV[7 + n + 2k]
-- and ARGV[8 + n + 2k].
local us, now = clock()
-- h: xp, pause, then each bucket's TAT, then each one's give-back stack.
local names = {'xp', 'pause'}
for k = 1, n do names[2 + k], names[2 + n + k] = ARGV[8 + k], ARGV[8 + k] .. '.h' end
local h = redis.call('HMGET', state, unpack(names, 1, 2 + 2 * n))

-- already answers a call whose id is in the lease set, scored score: it
-- was admitted before, and nothing is charged again.
local function already(score)
  if score >= PENDING then
    local turn = score - PENDING - ttl
    return {2, max(turn - now, 0), us, '', score - PENDING, turn * 1000}
  end
  return {2, max(score - ttl - now, 0), us, '', score, 0}
end

-- Slots. mine is the caller's place in the slot queue: its ticket, or now
-- for a first attempt. A caller that comes back with a ticket may hold a
-- grant (a slot kept for it), or be a pending lease claiming its slot.
local conc = limit ~= '0'
local tk, mine, granted, pend = us, 0, false, false
if conc then
  limit = limit + 0
  if ticket ~= '0' then
    tk = ticket + 0
    local s = redis.call('ZMSCORE', leases, id, 'g:' .. id)
    if s[1] then
      pend = s[1] + 0
      if pend < PENDING then return already(pend) end
    end
    granted = s[2] and s[2] - now > 0
  end
  mine = tk
  if batch then mine = tk + BATCH end
end

-- take gives the caller a free slot if no waiter comes before it, granting
-- those that do their slots first.
local function take()
  local live = redis.call('ZCOUNT', leases, '(' .. fmt('%d', now), LIVE)
  local free = math.min(limit - live, MAXGIVE)
  if free <= 0 then return false end
  local heads = redis.call('ZRANGEBYSCORE', queue, '-inf', QEND, 'WITHSCORES', 'LIMIT', 0, free)
  return hand(heads, free, live, ARGV[6] + 0, now, id, mine)
end

-- queued puts the caller in the slot queue by its ticket and estimates its
-- wait: one slot frees every ARGV[7] ms, and each waiter ahead takes one.
-- A caller that would wait past its max wait is not queued (and leaves the
-- queue if it was in it): it fails now rather than after its bound.
local function queued()
  if ticket == '0' then
    local held = redis.call('ZSCORE', leases, id)
    if held then return already(held + 0) end
  end
  local m = fmt('%d', mine)
  local wait = (redis.call('ZCOUNT', queue, '-inf', '(' .. m) + 1) * ARGV[7]
  if wait > maxwait + 0 then
    if ticket ~= '0' then redis.call('ZREM', queue, id) end
    return {0, wait, us, 'concurrency', 0, 0}
  end
  redis.call('ZADD', queue, 'NX', m, id)
  return {0, wait, us, 'concurrency', 0, tk}
end

-- leave takes a caller that no longer waits for a slot (the buckets hold
-- it back, or it reserved a later turn) out of the queue, and gives its
-- grant, if it has one, to the next waiter.
local function leave()
  if granted then
    redis.call('ZREM', leases, 'g:' .. id)
    dispatch(now, limit, ARGV[6] + 0)
  else
    redis.call('ZREM', queue, id)
  end
end

if pend then
  -- A pending lease claims its slot at its turn. Its buckets were charged
  -- when it was admitted, and a pause does not hold back a turn already
  -- reserved; it waits only for a slot.
  local expiry = pend - PENDING
  if expiry - ttl > now then return already(pend) end
  if granted then redis.call('ZREM', leases, 'g:' .. id) end
  if granted or take() then
    expiry = max(expiry, now + ttl)
    redis.call('ZADD', leases, 'XX', fmt('%d', expiry), id)
    cover(now, (h[1] or 0) + 0, expiry, {}, 0)
    return {1, 0, us, '', expiry, 0}
  end
  return queued()
end

-- Each bucket's TAT after the charge, and how long until every bucket has
-- room for it: the first bucket with the longest wait names it, and its
-- charge (the time its refill takes for this call) spaces batch waiters.
-- froms[k] is the TAT bucket k's charge starts from: its own, or now if
-- the bucket is full.
local tats, froms = {0, 0, 0, 0}, {0, 0, 0, 0}
local wait, reason, step = 0, '', 0
for k = 1, n do
  local field, charge, allow = ARGV[8 + k], ARGV[7 + n + 2 * k] + 0, ARGV[8 + n + 2 * k] + 0
  if charge > allow then return {-1, 0, us, field, 0, 0} end
  local tat = h[2 + k]
  if tat and tat - us >= 0 then tat = tat + 0 else tat = us end
  froms[k], tats[k] = tat, tat + charge
  tat = tats[k]
  local w = tat - us - allow
  if w > wait then wait, reason, step = w, field, charge end
end
wait, step = wait / 1000, step / 1000

-- admit opens the lease, scored score, and charges every bucket; ms is
-- the latest time it must keep the keys for. It returns false if the id
-- was in the lease set already (a retry whose first reply was lost).
local function admit(score, ms)
  if redis.call('ZADD', leases, 'NX', fmt('%d', score), id) == 0 then return false end
  -- Leases past their expiry hold no slot but take memory. About one
  -- admission in 16 (those landing on a millisecond divisible by 16)
  -- removes at most 100 of them, lowest expiry first (the sentinel
  -- scores highest), and at most 100 pending leases whose holder never
  -- claimed its slot: a mass expiry then costs many calls a little each,
  -- never one call a lot, and most calls nothing. A lease stays
  -- REAP_AFTER ms past its expiry first, so that a settle retried in that
  -- time finds it and learns it expired (see settle.lua).
  if now % 16 == 0 then
    local expired = redis.call('ZCOUNT', leases, '-inf', fmt('%d', now - REAP_AFTER))
    if expired > 0 then
      redis.call('ZREMRANGEBYRANK', leases, 0, fmt('%d', math.min(expired, 100) - 1))
    end
    local stale = redis.call('ZRANGEBYSCORE', leases, fmt('%d', PENDING),
      fmt('%d', PENDING + now - REAP_AFTER), 'LIMIT', 0, 100)
    if stale[1] then redis.call('ZREM', leases, unpack(stale)) end
  end
  -- Each bucket's give-back stack records the charge, whose headroom is
  -- how far the TAT lay past the call's turn.
  local turn, args = us + wait * 1000, {}
  for k = 1, n do
    args[4 * k - 3], args[4 * k - 2] = ARGV[8 + k], fmt('%d', tats[k])
    args[4 * k - 1], args[4 * k] = names[2 + n + k], push(h[2 + n + k], us, max(froms[k] - turn, 0))
    if tats[k] / 1000 > ms then ms = tats[k] / 1000 end
  end
  cover(now, (h[1] or 0) + 0, ms, args, 4 * n)
  return true
end

-- The paths that deny break out of this block with the wait and reason.
repeat
  -- A pause admits nobody and reserves nothing: a pause may be extended
  -- while callers wait, and a reservation made now could not see that.
  -- A waiter keeps its place in the queue, or its grant, which expires.
  local pause = h[2]
  if pause then
    pause = pause + 0
    if pause > now then wait, reason = ceil(pause - now), 'pause'; break end
  end

  local bound = 0
  if wait > 0 then bound = maxwait + 0 end
  if wait > 0 and (batch or wait > bound) then
    -- Batch calls never reserve ahead (an interactive call arriving later
    -- must not queue behind them), and no call reserves beyond its max
    -- wait. A batch waiter willing to wait is spaced along qb instead.
    if conc and ticket ~= '0' then leave() end
    if batch and bound > 0 then
      local qb = (redis.call('HGET', state, 'qb') or 0) + 0
      if qb < now + wait then qb = now + wait else qb = qb + step end
      if qb - now <= bound then
        qb = ceil(qb)
        cover(now, (h[1] or 0) + 0, qb, {'qb', fmt('%d', qb)}, 2)
        wait = qb - now
      end
    end
    wait = ceil(wait)
    break
  end

  -- An interactive call with wait > 0 takes its turn in the future: the
  -- TATs move past their allowance now, so every later call queues behind
  -- it (first come, first served, one round trip each). With a
  -- concurrency limit it holds no slot until its turn: its lease is
  -- pending, and it claims a slot then.
  wait = ceil(wait)
  local expiry = now + wait + ttl
  if conc and wait > 0 then
    if ticket ~= '0' then leave() end
    if admit(PENDING + expiry, expiry) then
      return {1, wait, us, reason, expiry, (now + wait) * 1000}
    end
    break -- the id was admitted before
  end
  if conc then
    if granted then
      redis.call('ZREM', leases, 'g:' .. id)
    elseif not take() then
      return queued()
    end
  end
  if admit(expiry, expiry) then return {1, wait, us, reason, expiry, 0} end
  -- ZADD NX found the id: a retried call whose first reply was lost.
until true

-- Not admitted now, or this id was admitted before (a retry whose first
-- reply was lost): then code 2, nothing charged again. The check costs a
-- call, so only these paths make it; a caller with a ticket was looked up
-- already.
if ticket == '0' or not conc then
  local held = redis.call('ZSCORE', leases, id)
  if held then return already(held + 0) end
end
return {0, wait, us, reason, 0, 0}
