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
--          reply gave it (µs), which keeps its place in the slot queue, or
--          claims the slot of its pending lease
-- ARGV[9..8+n]  the n configured buckets' fields (rpm, tpm, rpd, tpd)
-- ARGV[9+n..]   for each bucket in the same order, two integers: the call's
--          charge (µs of the bucket's time) and its allowance (how far past
--          now the TAT may lie after the charge: the bucket's span, less for
--          batch the share it leaves). A sliding rate (its field begins with
--          '~', see prelude.lua) takes its charge and allowance in units:
--          the call's, and what its window may hold with it.
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
--            queued for a slot, its request kept with its entry: the
--            script that frees a slot admits it there (see give in
--            prelude.lua) and publishes its id and outcome on KEYS[3].
--            Wait for that message, or retry with ticket t after wait_ms,
--            whichever is first (a retry finds an admission made meanwhile:
--            code 2). ticket 0: not queued.
--   code -1: can never be admitted: its charge exceeds its allowance in
--            bucket `reason`.
--   reason: the limit that set wait_ms: rpm, tpm, rpd, tpd, concurrency,
--            pause, or ''. While the budget is stopped (see stop.lua): code
--            0 with the stop's kind (quota or stop) and wait_ms until the
--            next probe is due or the stop ends; code 1 with reason probe
--            for the one call a probe interval lets through (wait_ms 0).
--   expiry_ms: for codes 1 and 2, the lease's expiry as stored (without
--            PENDING); otherwise 0.
--
-- A bucket found full (no TAT, or one in the past) restarts from now: what
-- was reserved before has been refilled. Every admission records its
-- charge in each bucket's give-back stack (see prelude.lua), so that a
-- give-back from a lease charged before it returns no more than the charge
-- left room for (see settle.lua).
--
-- The script defines no functions of its own: a closure costs thousands
-- of instructions a call, most of them finding its upvalues. The paths
-- break out of one block instead, to the answers at the end.

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

-- Sliding rates (see prelude.lua): sl[k] is bucket k's sub-window width in
-- µs, and slides[k] its counts once read.
local sl, slides = {}, {}
for k = 1, n do
  local f = ARGV[8 + k]
  if byte(f, 1) == 126 then sl[k] = string.match(f, '^~(%d+):') + 0 end
end

-- Slots. mine is the caller's place in the slot queue: its ticket (tk),
-- or now for a first attempt, plus BATCH for batch. A caller that comes
-- back with a ticket may have been admitted by the script that freed a
-- slot, or be a pending lease claiming its slot. held is the id's score
-- in the lease set once looked up (false: not there): admitted before.
-- Unless it was admitted, the waiters before it get the free slots first
-- (give), before its buckets are read: they are charged first. slots is
-- then the slots held, free those still free, and blocked whether a
-- waiter before the caller is still queued.
local conc = limit ~= '0'
local tk, mine, held = us, 0, nil
local slots, free, blocked = 0, 0, true
if conc then
  limit = limit + 0
  if ticket ~= '0' then
    tk = ticket + 0
    held = redis.call('ZSCORE', leases, id)
    if held then held = held + 0 end
  end
  mine = tk
  if batch then mine = tk + BATCH end
  if not held or held >= PENDING then
    slots, free, blocked = give(now, us, limit, ARGV[6] + 0, id, mine)
  end
end

-- h: xp, pause, then each bucket's TAT, then each one's give-back stack,
-- then the stop (see stop.lua).
local names = {'xp', 'pause'}
for k = 1, n do names[2 + k], names[2 + n + k] = ARGV[8 + k], ARGV[8 + k] .. '.h' end
names[3 + 2 * n] = 'qs'
local h = redis.call('HMGET', state, unpack(names, 1, 3 + 2 * n))

-- A stop (see stop.lua) refuses every call until it ends, but one call per
-- probe interval that fits now: the probe. stop is false, or the stop's
-- end, next probe time, probe interval (ms) and kind.
local stop, probe = false, nil
if h[3 + 2 * n] then
  local u, p, e, kind = string.match(h[3 + 2 * n], '^(%d+) (%d+) (%d+) (%a+)$')
  if u and u + 0 > now then stop = {u + 0, p + 0, e + 0, kind} end
end

local wait, reason, reply = 0, '', nil
repeat
  -- slot: this call takes a slot now; score: the lease's score once
  -- admitted; expiry: its expiry.
  local slot, score, expiry = conc, 0, 0
  local tats, froms = {0, 0, 0, 0}, {0, 0, 0, 0}
  if held then
    -- Admitted before (a retry whose reply was lost; answered at the
    -- end), or a pending lease. At its turn a pending lease claims its
    -- slot: its buckets were charged when it was admitted, and a pause
    -- does not hold back a turn already reserved.
    expiry = held - PENDING
    if held < PENDING or expiry - ttl > now then break end
    -- A stop refuses a pending lease's claim too: its call has not been
    -- sent, and would meet the exhausted quota.
    if stop then
      wait = stop[1] - now
      if stop[3] > 0 then wait = math.min(wait, max(stop[2] - now, 1)) end
      reply = {0, wait, us, stop[4], 0, 0}
      break
    end
    expiry = max(expiry, now + ttl)
    score = expiry
  else
    -- Each bucket's TAT after the charge, and how long until every
    -- bucket has room for it: the first bucket with the longest wait
    -- names it, and its charge (the time its refill takes for this call)
    -- spaces batch waiters. froms[k] is the TAT bucket k's charge starts
    -- from: its own, or now if the bucket is full.
    local step = 0
    for k = 1, n do
      local field, charge, allow = ARGV[8 + k], ARGV[7 + n + 2 * k] + 0, ARGV[8 + n + 2 * k] + 0
      if charge > allow then return {-1, 0, us, field, 0, 0} end
      local g, w = sl[k], 0
      if g then
        -- A sliding rate: the first sub-window j, at or after now and
        -- after every turn already counted, whose window has room for the
        -- charge (allow is the units the call may see used, its own
        -- included). Past the last count the sum only falls, so SK + 1
        -- steps at most.
        local cur = floor(now * 1000 / g)
        local base, cs = sread(h[2 + k], cur - SK)
        local j = max(cur, base + #cs - 1)
        local sum = 0
        for i = j - SK, j do sum = sum + (cs[i - base + 1] or 0) end
        while sum + charge > allow do
          sum = sum - (cs[j - SK - base + 1] or 0)
          j = j + 1
        end
        slides[k] = {base, cs}
        if j > cur then w = j * g - now * 1000 end
        if w > wait then wait, reason, step = w, field, g end
      else
        local tat = h[2 + k]
        if tat and tat - us >= 0 then tat = tat + 0 else tat = us end
        froms[k], tats[k] = tat, tat + charge
        w = tats[k] - us - allow
        if w > wait then wait, reason, step = w, field, charge end
      end
    end
    wait, step = wait / 1000, step / 1000

    -- A pause admits nobody and reserves nothing: a pause may be extended
    -- while callers wait, and a reservation made now could not see that.
    -- A waiter keeps its place in the queue.
    local pause = h[2]
    if pause then
      pause = pause + 0
      if pause > now then wait, reason = ceil(pause - now), 'pause'; break end
    end

    -- Stopped: refused, unless the probe is due and the call fits now;
    -- told to come back when the next probe is due or the stop ends.
    if stop then
      if stop[3] == 0 or stop[2] > now or wait > 0 then
        local w = stop[1] - now
        if stop[3] > 0 then w = math.min(w, max(stop[2] - now, ceil(wait), 1)) end
        wait, reason = w, stop[4]
        break
      end
      probe = fmt('%d %d %d %s', stop[1], now + stop[3], stop[3], stop[4])
    end

    -- A waiter the buckets hold back, or that reserves a later turn, no
    -- longer waits for a slot: it leaves the queue, with its request.
    if conc and ticket ~= '0' and wait > 0 then
      if redis.call('ZREM', queue, id) == 1 then redis.call('HDEL', state, 'w:' .. id) end
    end

    local bound = 0
    if wait > 0 then bound = maxwait + 0 end
    if wait > 0 and (batch or wait > bound) then
      -- Batch calls never reserve ahead (an interactive call arriving
      -- later must not queue behind them), and no call reserves beyond
      -- its max wait. A batch waiter willing to wait is spaced along qb
      -- instead.
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
    -- TATs move past their allowance now, so every later call queues
    -- behind it (first come, first served, one round trip each). With a
    -- concurrency limit it holds no slot until its turn: its lease is
    -- pending, and it claims a slot then.
    wait = ceil(wait)
    expiry = now + wait + ttl
    score = expiry
    if conc and wait > 0 then slot, score = false, PENDING + expiry end
  end

  if slot then
    -- A slot, if one is free and no waiter before the caller is still
    -- queued (give served those first). A batch call takes one only while
    -- fewer than ARGV[6] are held.
    if free > 0 and not blocked and (not batch or slots < ARGV[6] + 0) then
      if ticket ~= '0' and redis.call('ZREM', queue, id) == 1 then
        redis.call('HDEL', state, 'w:' .. id)
      end
    else
      -- The caller waits in the queue by its ticket, its request kept
      -- with it (see prelude.lua) until a slot freed for it admits it.
      -- One slot frees every ARGV[7] ms, and each waiter before it takes
      -- one: a caller that would wait past its max wait is not queued
      -- (and leaves the queue if it was in it), so it fails now rather
      -- than after its bound.
      if ticket == '0' then
        held = redis.call('ZSCORE', leases, id)
        if held then held = held + 0; break end
      end
      local m = fmt('%d', mine)
      wait, reason = (redis.call('ZCOUNT', queue, '-inf', '(' .. m) + 1) * ARGV[7], 'concurrency'
      if wait > maxwait + 0 then
        if ticket ~= '0' and redis.call('ZREM', queue, id) == 1 then
          redis.call('HDEL', state, 'w:' .. id)
        end
        break
      end
      local req
      if held then
        req = fmt('p %d %d', ttl, now + maxwait)
      else
        local parts = {fmt('%s %d %d', batch and '1' or '0', ttl, now + maxwait)}
        for k = 1, n do
          parts[k + 1] = ARGV[8 + k] .. ' ' .. ARGV[7 + n + 2 * k] .. ' ' .. ARGV[8 + n + 2 * k]
        end
        req = table.concat(parts, ' ', 1, n + 1)
      end
      redis.call('ZADD', queue, 'NX', m, id)
      redis.call('HSET', state, 'w:' .. id, req)
      reply = {0, wait, us, reason, 0, tk}
      break
    end
    if held then
      -- The pending lease now holds its slot.
      redis.call('ZADD', leases, 'XX', fmt('%d', expiry), id)
      cover(now, (h[1] or 0) + 0, expiry, {}, 0)
      reply = {1, 0, us, '', expiry, 0}
      break
    end
  end

  -- Admit: open the lease (or the pending lease), charge every bucket.
  if redis.call('ZADD', leases, 'NX', fmt('%d', score), id) == 0 then break end
  -- Leases past their expiry hold no slot but take memory. About one
  -- admission in 16 (those landing on a millisecond divisible by 16)
  -- removes at most 100 of them, lowest expiry first (the sentinel scores
  -- highest), and at most 100 pending leases whose holder never claimed
  -- its slot: a mass expiry then costs many calls a little each, never
  -- one call a lot, and most calls nothing. A lease stays REAP_AFTER ms
  -- past its expiry first, so that a settle retried in that time finds it
  -- and learns it expired (see settle.lua).
  if now % 16 == 0 then
    local expired = redis.call('ZCOUNT', leases, '-inf', fmt('%d', now - REAP_AFTER))
    if expired > 0 then
      redis.call('ZREMRANGEBYRANK', leases, '0', fmt('%d', math.min(expired, 100) - 1))
    end
    local stale = redis.call('ZRANGEBYSCORE', leases, fmt('%d', PENDING),
      fmt('%d', PENDING + now - REAP_AFTER), 'LIMIT', '0', '100')
    if stale[1] then redis.call('ZREM', leases, unpack(stale)) end
  end
  -- Each bucket's give-back stack records the charge, whose headroom is
  -- how far the TAT lay past the call's turn.
  -- A sliding rate counts the call in the sub-window of its turn (in ms,
  -- as the caller knows it), and keeps its counts until that one rolls
  -- out of every window.
  local turn, args, ms, a = us + wait * 1000, {}, expiry, 0
  for k = 1, n do
    local g = sl[k]
    if g then
      local base, cs = slides[k][1], slides[k][2]
      local jt = floor((now + wait) * 1000 / g)
      sadd(base, cs, jt, ARGV[7 + n + 2 * k] + 0)
      args[a + 1], args[a + 2] = ARGV[8 + k], swrite(base, cs)
      a = a + 2
      if (jt + SK + 1) * g / 1000 > ms then ms = (jt + SK + 1) * g / 1000 end
    else
      args[a + 1], args[a + 2] = ARGV[8 + k], fmt('%d', tats[k])
      args[a + 3], args[a + 4] = names[2 + n + k], push(h[2 + n + k], us, max(froms[k] - turn, 0))
      a = a + 4
      if tats[k] / 1000 > ms then ms = tats[k] / 1000 end
    end
  end
  if probe then
    -- The probe: the next one is due an interval from now.
    args[a + 1], args[a + 2] = 'qs', probe
    cover(now, (h[1] or 0) + 0, ms, args, a + 2)
    reply = {1, 0, us, 'probe', expiry, 0}
    break
  end
  cover(now, (h[1] or 0) + 0, ms, args, a)
  if slot or not conc then
    reply = {1, wait, us, reason, expiry, 0}
  else
    reply = {1, wait, us, reason, expiry, (now + wait) * 1000}
  end
until true
if reply then return reply end

-- Not admitted now, or this id was admitted before (a retry whose first
-- reply was lost, or a pending lease's claim before its turn): then code
-- 2, nothing charged again. The check costs a call, so only these paths
-- make it; a caller with a ticket was looked up already.
if held == nil and (ticket == '0' or not conc) then
  held = redis.call('ZSCORE', leases, id)
  if held then held = held + 0 end
end
if held then
  if held >= PENDING then
    local turn = held - PENDING - ttl
    return {2, max(turn - now, 0), us, '', held - PENDING, turn * 1000}
  end
  return {2, max(held - ttl - now, 0), us, '', held, 0}
end
return {0, wait, us, reason, 0, 0}
