-- acquire.lua: admit one call against every limit of a budget, or say how long
-- until it could be admitted. All-or-nothing: nothing is charged unless every
-- limit admits the call.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l   leases (see prelude.lua)
-- KEYS[3]  slot queue   {<prefix>:<name>}:q   member = waiter id, score = ticket;
--          its name is also the channel on which the admissions of
--          queued waiters are published (see give in slots.lua)
-- KEYS[4]  definition   {<prefix>:<name>}:d   (optional, with ARGV's last
--          argument): the stored definition's version, field v (see
--          define.lua)
-- KEYS[5]  tenant hash  {<prefix>:<name>}:t:<32 hex digits>   (optional): the
--          tenant's buckets, charged with the budget's (see below)
-- ARGV[1]  lease id (string, unique per call; a repeated id is answered, not re-admitted)
-- ARGV[2]  priority: 0 interactive, 1 batch; or, for a tenant's interactive
--          call, '0:<ppm>': over its share, it is served as a batch call
--          that leaves <ppm> millionths of each budget bucket
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
-- ARGV[9+n..9+3n-1]   for each bucket in the same order, two integers: the call's
--          charge (µs of the bucket's time) and its allowance (how far past
--          now the TAT may lie after the charge: the bucket's span, less for
--          batch the share it leaves). A sliding rate (its field begins with
--          '~', see prelude.lua) takes its charge and allowance in units:
--          the call's, and what its window may hold with it.
--          A field that begins with '@' is a bucket of the tenant, kept in
--          KEYS[5] (its sliding rates begin '@~'). One that begins with '%'
--          is the tenant's share of a budget bucket, also in KEYS[5]: it
--          never holds a call back, but a call it finds past its allowance
--          is over the tenant's share. Such a call never reserves a later
--          turn of the budget's buckets, may not take the share ARGV[2]
--          gives of them, and a waiting one is spaced along the tenant's
--          own batch queue (field qb of KEYS[5]), so that tenants within
--          their share are served first and a heavy tenant fills only the
--          room they leave.
-- ARGV[9+3n] (optional, with KEYS[4]): the version of the definition the
--          caller runs (0: none stored when it loaded it)
-- ARGV[10+3n] (optional, after the version): '<seen> <e1> ... <en>': the
--          latest xp the caller saw (see the reply), and what each bucket
--          restarts at if the state was lost (below): its span in µs, a
--          sliding rate's limit in units, 0 for a tenant's bucket
--
-- Returns {code, wait_ms, now_us, reason, expiry_ms, ticket, xp}:
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
--            slots.lua) and publishes its id and outcome on KEYS[3].
--            Wait for that message, or retry with ticket t after wait_ms,
--            whichever is first (a retry finds an admission made meanwhile:
--            code 2). ticket 0: not queued. A tenant's call is not admitted
--            there (give has only the budget's keys): it keeps its place
--            and a slot, and is told to ask again, with its ticket, which
--            takes the slot.
--   code  3: the caller runs another definition than the one stored
--            (see KEYS[4]): nothing done; ticket is the stored version
--            (0: none). The caller loads it and asks again.
--   code -1: can never be admitted: its charge exceeds its allowance in
--            bucket `reason`.
--   reason: the limit that set wait_ms: rpm, tpm, rpd, tpd, concurrency,
--            pause, or ''. While the budget is stopped (see stop.lua): code
--            0 with the stop's kind (quota or stop) and wait_ms until the
--            next probe is due or the stop ends, a pause in force
--            included (a stop wins over a pause); code 1 with reason probe
--            for the one call a probe interval lets through (wait_ms 0).
--   expiry_ms: for codes 1 and 2, the lease's expiry as stored (without
--            PENDING); otherwise 0.
--   xp:      the state's xp as read (0: no state), or -1: this call found
--            the state lost and restarted its buckets empty (see below).
--
-- A bucket found full (no TAT, or one in the past) restarts from now: what
-- was reserved before has been refilled. Every admission records its
-- charge in each bucket's give-back stack (see prelude.lua), so that a
-- give-back from a lease charged before it returns no more than the charge
-- left room for (see settle.lua).
--
-- The main block reads the state and answers; the steps it takes are the
-- functions below, each under 80 lines. Every call makes each of them (a
-- closure, about 0.4k instructions), and each value passed in or out of
-- one costs about 40 more: so the steps are few, take what they need as
-- arguments (an upvalue of the prelude's costs more) and return what they
-- found. An admission calls three (read, room, admit); hold and seat run
-- only for a call that a stop, a pause or its buckets may hold back, or
-- that takes a slot. Together they cost an acquire about 6k instructions
-- (docs/results.md, issue 23).

-- read reads the state: h, then what the state hash does not hold, the
-- definition stored (KEYS[4]), a lost state's restart and a tenant's
-- buckets (KEYS[5]), into h. It returns a reply for a caller that runs
-- another definition, else nil, then h, names, xr, dvw, th and stop
-- (below).
--
-- h: xp, pause, then each bucket's TAT, then each one's give-back stack,
-- then the stop (see stop.lua), then the definition's version; names: the
-- fields read. xr: the state's xp as read (0: no state), for the reply.
--
-- The definition. A caller that sends the version of the definition it
-- runs (myv) is told when another is stored: code 3, with the stored
-- version in place of the ticket, nothing changed. The state keeps a copy
-- of the version (field dv), read with the buckets; a state without one
-- (new, or expired) asks KEYS[4], and the admission records what it found.
-- dvw: the copy to write.
--
-- A lost state: the caller saw the keys kept until f (ARGV after the
-- version), still ahead, and the state now says less (xp only grows), or
-- nothing: Redis lost it (a restart, a failover, an eviction) while the
-- provider still counts what was used. Each budget bucket missing from it
-- restarts empty, not full: a TAT a span from now, or a sliding window
-- holding its limit in the current sub-window. The reply says so (xr -1).
-- Not within f's last second: the keys may expire a millisecond before
-- xp (their TTL is counted from the script's start), and every bucket is
-- full by then anyway (xp lies a second past the latest TAT, see cover).
-- The keys then live at least until f, as they would have: a caller that
-- saw f then finds the state as it left it, not lost again.
--
-- A tenant's buckets live in its own hash, which expires when the tenant
-- is idle: their TATs and stacks come from there, into h where a budget
-- bucket's would be (the state hash is asked for their fields too: a
-- table of the fields it holds, and one to place them, cost more than the
-- four fields). th: its xp and qb, then what was asked.
--
-- A stop (see stop.lua) refuses every call until it ends, but one call per
-- probe interval that fits now: the probe. stop is false, or the stop's
-- end, next probe time, probe interval (ms) and kind.
local function read(n, myv, tkey, us, now, cover, SK)
  local names = {'xp', 'pause'}
  for k = 1, n do names[2 + k], names[2 + n + k] = ARGV[8 + k], ARGV[8 + k] .. '.h' end
  names[3 + 2 * n] = 'qs'
  if myv then names[4 + 2 * n] = 'dv' end
  local h = redis.call('HMGET', KEYS[1], unpack(names))
  local xr = (h[1] or 0) + 0
  local dvw, th, stop = nil, nil, false
  if myv then
    local dv = h[4 + 2 * n]
    if not dv then
      dv = redis.call('HGET', KEYS[4], 'v') or '0'
      dvw = dv
    end
    if dv ~= myv then
      if not dvw then dv = redis.call('HGET', KEYS[4], 'v') or '0' end
      if dv ~= myv then return {3, 0, us, 'definition', 0, dv + 0, xr} end
      dvw = dv -- the copy was wrong: the definition changed under it
    end
  end
  local lf = myv and ARGV[10 + 3 * n]
  if lf then
    local sp = string.find(lf, ' ', 1, true) or #lf + 1 -- no bucket: seen alone
    local f = string.sub(lf, 1, sp - 1) + 0
    if f - now > 1000 and xr < f then
      local args, a, ms, k = {}, 0, f, 0
      for e in string.gmatch(string.sub(lf, sp + 1), '%d+') do
        k = k + 1
        if e ~= '0' and not h[2 + k] then
          local fld, v = ARGV[8 + k], nil
          if string.byte(fld, 1) == 126 then
            local g = string.match(fld, '^~(%d+):') + 0
            local cur = math.floor(now * 1000 / g)
            v = string.format('%d:%d:0:%s', cur, cur, e)
            ms = math.max(ms, (cur + SK + 1) * g / 1000)
          else
            v = string.format('%d', us + e)
            ms = math.max(ms, (us + e) / 1000)
          end
          h[2 + k], args[a + 1], args[a + 2] = v, fld, v
          a = a + 2
        end
      end
      cover(now, xr, ms, args, a)
      h[1] = redis.call('HGET', KEYS[1], 'xp')
      if a > 0 then xr = -1 end
    end
  end
  if tkey then
    local byte, tn = string.byte, {'xp', 'qb'}
    for k = 1, n do
      local f = names[2 + k]
      local b = byte(f, 1)
      if b == 64 then
        tn[#tn + 1], tn[#tn + 2] = f, names[2 + n + k]
      elseif b == 37 then
        tn[#tn + 1] = f
      end
    end
    th = redis.call('HMGET', tkey, unpack(tn))
    -- Their values in h, where a budget bucket's would be.
    local i = 2
    for k = 1, n do
      local b = byte(names[2 + k], 1)
      if b == 64 then
        h[2 + k], h[2 + n + k], i = th[i + 1], th[i + 2], i + 2
      elseif b == 37 then
        h[2 + k], i = th[i + 1], i + 1
      end
    end
  end
  if h[3 + 2 * n] then
    local u, p, e, kind = string.match(h[3 + 2 * n], '^(%d+) (%d+) (%d+) (%a+)$')
    if u and u + 0 > now then stop = {u + 0, p + 0, e + 0, kind} end
  end
  return nil, h, names, xr, dvw, th, stop
end

-- room works out each bucket's TAT after the call's charge, and how
-- long until every bucket has room for it (wait, in ms, and reason): the
-- first bucket with the longest wait names it, and its charge (step: the
-- time its refill takes for this call) spaces batch waiters. froms[k] is
-- the TAT bucket k's charge starts from: its own, or now if the bucket is
-- full. It returns a reply (code -1) for a call that can never be
-- admitted, else nil, then wait, reason, step, share (the call is over
-- its tenant's share), sl, tats, froms and swrite.
--
-- Sliding rates (see prelude.lua): sl[k] is bucket k's sub-window width in
-- µs, and sl[n + k] its state once read (one table: each costs about 800
-- instructions); their functions made only if there is one. A sliding
-- rate waits for the first sub-window j, at or after now and after every
-- turn already counted, whose window has room for the charge (allow is
-- the units the call may see used, its own included; see sfit); over its
-- share, a call larger than what the rate leaves it fits no sub-window: it
-- waits until it is within its share (swait).
--
-- A tenant's share ('%') never holds a call back: it says whether the call
-- is past it, and for how long (µs); its TAT after the charge is worked out
-- then, once. keep: what an interactive call over its share leaves of
-- each budget bucket (see ARGV[2]), read only for such a call. Its TAT lies at most a span past the
-- allowance: a tenant is over its share for at most a window after its
-- heavy use ends.
local function room(n, h, us, now, xr, tkey, slib, byte, floor)
  local sl, share, swait, keep = {}, false, 0, nil
  local sread, sfit, swrite
  local tats, froms = {0, 0, 0, 0}, {0, 0, 0, 0}
  for k = 1, n do
    local f = ARGV[8 + k]
    local b = byte(f, 1)
    if b == 126 then
      sl[k] = string.match(f, '^~(%d+):') + 0
      if not sread then sread, sfit, swrite = slib() end
    elseif b == 64 and byte(f, 2) == 126 then
      sl[k] = string.match(f, '^@~(%d+):') + 0
      if not sread then sread, sfit, swrite = slib() end
    elseif b == 37 then
      -- A share's TAT after the charge, worked out here once (each
      -- number parsed is a strtod); the loop below skips it.
      local tat, charge, allow = h[2 + k], ARGV[7 + n + 2 * k] + 0, ARGV[8 + n + 2 * k] + 0
      tat = tat and tat + 0 or us
      if tat - us < 0 then tat = us end
      froms[k], tats[k] = tat, tat + charge
      if tat + charge - us - 2 * allow > 0 then tats[k] = us + 2 * allow end
      local past = tat + charge - us - allow
      if past > 0 then
        share = true
        if past > swait then swait = past end
      end
    end
  end
  -- keep (see ARGV[2]) matters only to a call over its share.
  if share then
    local ppm = string.match(ARGV[2], '^0:(%d+)$')
    if ppm then keep = ppm / 1000000 end
  end
  local wait, reason, step = 0, '', 0
  for k = 1, n do
    local field = ARGV[8 + k]
    local b = byte(field, 1)
    if b ~= 37 then
      local charge, allow = ARGV[7 + n + 2 * k] + 0, ARGV[8 + n + 2 * k] + 0
      if charge > allow then return {-1, 0, us, field, 0, 0, xr} end
      if keep and b ~= 64 then allow = allow - floor(allow * keep) end
      local g, w = sl[k], 0
      if g then
        local cur = floor(now * 1000 / g)
        local st = sread(h[2 + k], cur, b == 64 and tkey or KEYS[1], field)
        if charge > allow then
          w = swait
        else
          local j = sfit(st, cur, charge, allow)
          if j > cur then w = j * g - now * 1000 end
        end
        sl[n + k] = st
        if w > wait then wait, reason, step = w, field, g end
      else
        local tat = h[2 + k]
        tat = tat and tat + 0 or us -- parsed once: a parse is a strtod
        if tat - us < 0 then tat = us end
        froms[k], tats[k] = tat, tat + charge
        w = tats[k] - us - allow
        if w > wait then wait, reason, step = w, field, charge end
      end
    end
  end
  return nil, wait / 1000, reason, step / 1000, share, sl, tats, froms, swrite
end

-- hold is the rest of the decision for a call that a stop, a pause or its
-- buckets may hold back (wait > 0). It returns whether the call ends here
-- (not admitted), then wait, reason, expiry, score, slot (this call takes
-- a slot now), probe and left (the caller left the slot queue).
--
-- Stopped: refused, unless the probe is due, no pause is in force and the
-- call fits now; told to come back when the next probe is due (or the
-- pause ends) or the stop ends. A stop wins over a pause: a caller that
-- fails fast on a stop must not be told to wait.
--
-- A pause admits nobody and reserves nothing: a pause may be extended
-- while callers wait, and a reservation made now could not see that. A
-- waiter keeps its place in the queue.
--
-- A waiter the buckets hold back, or that reserves a later turn, no longer
-- waits for a slot: it leaves the queue, with its request.
--
-- Batch calls never reserve ahead (an interactive call arriving later must
-- not queue behind them), nor do a tenant's calls over its share, and no
-- call reserves beyond its max wait. A batch waiter willing to wait is
-- spaced along qb instead (a tenant's over its share along its own).
--
-- An interactive call with wait > 0 takes its turn in the future: the TATs
-- move past their allowance now, so every later call queues behind it
-- (first come, first served, one round trip each). With a concurrency
-- limit it holds no slot until its turn: its lease is pending, and it
-- claims a slot then.
local function hold(stop, pause, wait, reason, step, share, batch, conc, ticket, id, maxwait, ttl, now, h, th, cover, tcover, PENDING)
  local ceil, fmt = math.ceil, string.format
  local probe, left = nil, false
  if stop then
    if stop[3] == 0 or stop[2] > now or wait > 0 or (pause and pause > now) then
      local w = stop[1] - now
      if stop[3] > 0 then w = math.min(w, math.max(stop[2] - now, ceil(wait), (pause or 0) - now, 1)) end
      return true, w, stop[4]
    end
    probe = fmt('%d %d %d %s', stop[1], now + stop[3], stop[3], stop[4])
  end
  if pause and pause > now then return true, ceil(pause - now), 'pause' end
  if conc and ticket ~= '0' and wait > 0 then
    if redis.call('ZREM', KEYS[3], id) == 1 then
      redis.call('HDEL', KEYS[1], 'w:' .. id)
      left = true
    end
  end
  local bound = 0
  if wait > 0 then bound = maxwait + 0 end
  if wait > 0 and (batch or share or wait > bound) then
    if (batch or share) and bound > 0 then
      local qb
      if share then qb = (th[2] or 0) + 0 else qb = (redis.call('HGET', KEYS[1], 'qb') or 0) + 0 end
      if qb < now + wait then qb = now + wait else qb = qb + step end
      if qb - now <= bound then
        qb = ceil(qb)
        if share then
          tcover(KEYS[5], now, (th[1] or 0) + 0, qb, {'qb', fmt('%d', qb)}, 2)
        else
          cover(now, (h[1] or 0) + 0, qb, {'qb', fmt('%d', qb)}, 2)
        end
        wait = qb - now
      end
    end
    return true, ceil(wait), reason, 0, 0, conc, probe, left
  end
  wait = ceil(wait)
  local expiry = now + wait + ttl
  if conc and wait > 0 then return false, wait, reason, expiry, PENDING + expiry, false, probe, left end
  return false, wait, reason, expiry, expiry, conc, probe, left
end

-- seat gives a call with a concurrency limit its slot, or queues it. It
-- returns whether the call ends here, then its reply (nil: answered at
-- the end), held, wait, reason and left.
--
-- A slot, if one is free and no waiter before the caller is still queued
-- (give served those first). A batch call takes one only while fewer than
-- ARGV[6] are held. A first attempt (ticket 0) met in the queue is this
-- call resent (go-redis resends a script whose reply timed out) after its
-- first run queued it: its entry goes too, or a freed slot would admit it
-- again from its request, charging it twice.
--
-- Else the caller waits in the queue by its ticket, its request kept with
-- it (see prelude.lua) until a slot freed for it admits it. One slot frees
-- every ARGV[7] ms, and each waiter before it takes one: a caller that
-- would wait past its max wait is not queued (and leaves the queue if it
-- was in it), so it fails now rather than after its bound. The request is
-- written through cover: the keys live until its deadline at least, and
-- the queue holds its sentinel (which give's count of waiters relies on)
-- before it holds a waiter. A tenant's request is a marker: give cannot
-- reach a tenant's hash (see prelude.lua).
--
-- A pending lease that gets its slot now holds it.
local function seat(free, blocked, slots, seen, held, batch, ticket, id, mine, tk, maxwait, ttl, n, now, us, h, xr, expiry, wait, reason, left, cover)
  local fmt, state, queue = string.format, KEYS[1], KEYS[3]
  if free > 0 and not blocked and (not batch or slots < ARGV[6] + 0) then
    if (ticket ~= '0' or seen) and redis.call('ZREM', queue, id) == 1 then
      redis.call('HDEL', state, 'w:' .. id)
      left = true
    end
  else
    if ticket == '0' then
      held = redis.call('ZSCORE', KEYS[2], id)
      if held then return true, nil, held + 0, wait, reason, left end
    end
    local m = fmt('%d', mine)
    wait, reason = (redis.call('ZCOUNT', queue, '-inf', '(' .. m) + 1) * ARGV[7], 'concurrency'
    if wait > maxwait + 0 then
      if ticket ~= '0' and redis.call('ZREM', queue, id) == 1 then
        redis.call('HDEL', state, 'w:' .. id)
        left = true
      end
      return true, nil, held, wait, reason, left
    end
    local req
    if held then
      req = fmt('p %d %d', ttl, now + maxwait)
    elseif KEYS[5] then
      req = fmt('t %d 0 %d', ttl, now + maxwait)
    else
      local parts = {fmt('%s %d %d', batch and '1' or '0', ttl, now + maxwait)}
      for k = 1, n do
        parts[k + 1] = ARGV[8 + k] .. ' ' .. ARGV[7 + n + 2 * k] .. ' ' .. ARGV[8 + n + 2 * k]
      end
      req = table.concat(parts, ' ', 1, n + 1)
    end
    cover(now, (h[1] or 0) + 0, now + maxwait, {'w:' .. id, req}, 2)
    redis.call('ZADD', queue, 'NX', m, id)
    return true, {0, wait, us, reason, 0, tk, xr}, held, wait, reason, left
  end
  if held then
    redis.call('ZADD', KEYS[2], 'XX', fmt('%d', expiry), id)
    cover(now, (h[1] or 0) + 0, expiry, {}, 0)
    return true, {1, 0, us, '', expiry, 0, xr}, held, wait, reason, left
  end
  return false, nil, held, wait, reason, left
end

-- admit opens the lease (or the pending lease) and charges every bucket;
-- it returns the reply, or nil if the lease id was admitted before.
--
-- Leases past their expiry hold no slot but take memory. About one
-- admission in 16 (those landing on a millisecond divisible by 16) removes
-- at most 100 of them, lowest expiry first (the sentinel scores highest),
-- and at most 100 pending leases whose holder never claimed its slot: a
-- mass expiry then costs many calls a little each, never one call a lot,
-- and most calls nothing. A lease stays REAP_AFTER ms past its expiry
-- first, so that a settle retried in that time finds it and learns it
-- expired (see settle.lua).
--
-- Each bucket's give-back stack records the charge, whose headroom is how
-- far the TAT lay past the call's turn. A sliding rate counts the call in
-- the sub-window of its turn (in ms, as the caller knows it), and keeps
-- its counts until that one rolls out of every window. A tenant's buckets
-- go to its hash (targs, until tms). With a probe (see stop.lua), the next
-- one is due an interval from now.
local function admit(n, h, names, th, sl, tats, froms, swrite, id, now, us, xr, wait, reason, expiry, score, pend, dvw, probe, cover, tcover, push, byte, PENDING, REAP_AFTER, SK)
  local fmt, floor, max, leases = string.format, math.floor, math.max, KEYS[2]
  if redis.call('ZADD', leases, 'NX', fmt('%d', score), id) == 0 then return nil end
  if now % 16 == 0 then
    local expired = redis.call('ZCOUNT', leases, '-inf', fmt('%d', now - REAP_AFTER))
    if expired > 0 then
      redis.call('ZREMRANGEBYRANK', leases, '0', fmt('%d', math.min(expired, 100) - 1))
    end
    local stale = redis.call('ZRANGEBYSCORE', leases, fmt('%d', PENDING),
      fmt('%d', PENDING + now - REAP_AFTER), 'LIMIT', '0', '100')
    if stale[1] then redis.call('ZREM', leases, unpack(stale)) end
  end
  local turn, args, ms, a = us + wait * 1000, {}, expiry, 0
  local tkey = KEYS[5]
  local targs, tms, ta = tkey and {}, 0, 0
  for k = 1, n do
    local g, f = sl[k], ARGV[8 + k]
    local b = byte(f, 1)
    local out, j, m = args, a, ms
    if b == 64 or b == 37 then out, j, m = targs, ta, tms end
    if g then
      local jt = floor((now + wait) * 1000 / g)
      j = swrite(sl[n + k], floor(now * 1000 / g), jt, ARGV[7 + n + 2 * k] + 0, out, j)
      if (jt + SK + 1) * g / 1000 > m then m = (jt + SK + 1) * g / 1000 end
    else
      out[j + 1], out[j + 2] = f, fmt('%d', tats[k])
      j = j + 2
      if b ~= 37 then
        out[j + 1], out[j + 2] = names[2 + n + k], push(h[2 + n + k], us, max(froms[k] - turn, 0))
        j = j + 2
      end
      if tats[k] / 1000 > m then m = tats[k] / 1000 end
    end
    if out == targs then ta, tms = j, m else a, ms = j, m end
  end
  if tkey then tcover(tkey, now, (th[1] or 0) + 0, max(tms, now), targs, ta) end
  if dvw then args[a + 1], args[a + 2] = 'dv', dvw; a = a + 2 end
  if probe then
    args[a + 1], args[a + 2] = 'qs', probe
    cover(now, (h[1] or 0) + 0, ms, args, a + 2)
    return {1, 0, us, 'probe', expiry, 0, xr}
  end
  cover(now, (h[1] or 0) + 0, ms, args, a)
  if not pend then return {1, wait, us, reason, expiry, 0, xr} end
  return {1, wait, us, reason, expiry, (now + wait) * 1000, xr}
end

local leases = KEYS[2]
local id, batch, ticket = ARGV[1], ARGV[2] == '1', ARGV[8]
local maxwait = ARGV[3] -- parsed only where read: most admissions do not
local ttl, limit = ARGV[4] + 0, ARGV[5]
local n = floor((#ARGV - 8) / 3)
-- myv: the version of the definition the caller runs, if it sends one.
local myv = KEYS[4] and ARGV[9 + 3 * n]
-- bucket k: its field ARGV[8 + k]; its charge and allowance ARGV[7 + n + 2k]
-- and ARGV[8 + n + 2k].
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)
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
local slots, free, blocked, seen = 0, 0, true, false
if conc then
  limit = limit + 0
  if ticket ~= '0' then
    tk = ticket + 0
    held = redis.call('ZSCORE', leases, id)
    if held then held = held + 0 end
  end
  mine = batch and tk + BATCH or tk
  if not held or held >= PENDING then
    -- give (see glib in prelude.lua) is made only while someone waits:
    -- the queue holds more than its sentinel. Else the slots held and
    -- those free are counted here, as give would count them.
    if redis.call('ZCARD', KEYS[3]) > 1 then
      slots, free, blocked, seen = glib(cover, push, slib, PENDING, LIVE, BATCH, SK)(now, us, limit, ARGV[6] + 0, id, mine)
    else
      slots = redis.call('ZCOUNT', leases, '(' .. fmt('%d', now), LIVE)
      free, blocked = max(math.min(limit - slots, 100), 0), false
    end
  end
end

local tkey, probe = KEYS[5], nil
local r, h, names, xr, dvw, th, stop = read(n, myv, tkey, us, now, cover, SK)
if r then return r end

-- left: the caller left the slot queue in this call (see the end).
local wait, reason, reply, left = 0, '', nil, false
repeat
  -- slot: this call takes a slot now; score: the lease's score once
  -- admitted; expiry: its expiry.
  local slot, score, expiry, done = conc, 0, 0, false
  local sl, tats, froms, swrite
  if held then
    -- Admitted before (a retry whose reply was lost; answered at the
    -- end), or a pending lease. At its turn a pending lease claims its
    -- slot: its buckets were charged when it was admitted, and a pause
    -- does not hold back a turn already reserved. A stop refuses its
    -- claim too: its call has not been sent, and would meet the exhausted
    -- quota.
    expiry = held - PENDING
    if held < PENDING or expiry - ttl > now then break end
    if stop then
      wait = stop[1] - now
      if stop[3] > 0 then wait = math.min(wait, max(stop[2] - now, 1)) end
      reply = {0, wait, us, stop[4], 0, 0, xr}
      break
    end
    expiry = max(expiry, now + ttl)
    score = expiry
  else
    local step, share
    r, wait, reason, step, share, sl, tats, froms, swrite = room(n, h, us, now, xr, tkey, slib, byte, floor)
    if r then return r end
    local pause = h[2] and h[2] + 0
    if stop or (pause and pause > now) or wait > 0 then
      done, wait, reason, expiry, score, slot, probe, left = hold(stop, pause, wait, reason, step, share, batch, conc, ticket, id, maxwait, ttl, now, h, th, cover, tcover, PENDING)
      if done then break end
    else
      expiry, score = now + ttl, now + ttl
    end
  end
  if slot then
    done, reply, held, wait, reason, left = seat(free, blocked, slots, seen, held, batch, ticket, id, mine, tk, maxwait, ttl, n, now, us, h, xr, expiry, wait, reason, left, cover)
    if done then break end
  end
  reply = admit(n, h, names, th, sl, tats, froms, swrite, id, now, us, xr, wait, reason, expiry, score, conc and not slot, dvw, probe, cover, tcover, push, byte, PENDING, REAP_AFTER, SK)
until true
-- A waiter that left the queue (admitted, held back by its buckets, or
-- past its bound) may leave free slots behind it: give stopped at it, and
-- a tenant's was kept one. They go to the next waiters now, after its own
-- charges.
if left then glib(cover, push, slib, PENDING, LIVE, BATCH, SK)(now, us, limit, ARGV[6] + 0) end
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
    return {2, max(turn - now, 0), us, '', held - PENDING, turn * 1000, xr}
  end
  return {2, max(held - ttl - now, 0), us, '', held, 0, xr}
end
return {0, wait, us, reason, 0, 0, xr}
