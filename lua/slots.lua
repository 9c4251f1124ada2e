-- slots.lua: the slot queue's hand-over (see prelude.lua, "Concurrency
-- slots"). Not a script of its own: lua.Source places this text in the
-- prelude as the body of `local function glib(cover, push, slib, PENDING,
-- LIVE, BATCH, SK)`, which returns give, so that only a script that hands
-- slots over (a budget with a concurrency limit) makes these closures.

local fmt, byte, sub = string.format, string.byte, string.sub
local floor, ceil, max = math.floor, math.ceil, math.max

-- claim lets pending lease m (its TTL ttl) claim its slot: its buckets
-- were charged when it was admitted, and a pause does not hold back a turn
-- already reserved; a stop does (its call would meet the exhausted quota).
-- It returns the code to publish (1: claimed), the expiry, and whether a
-- stop holds everyone back.
local function claim(m, ttl, now)
  local held = redis.call('ZSCORE', KEYS[2], m)
  local h = redis.call('HMGET', KEYS[1], 'xp', 'qs')
  local st = h[2] and string.match(h[2], '^(%d+) ')
  if st and st + 0 > now then return 0, 0, true end
  if not (held and held + 0 >= PENDING) then return 0, 0, false end
  local expiry = max(held - PENDING, now + ttl)
  redis.call('ZADD', KEYS[2], fmt('%d', expiry), m)
  cover(now, (h[1] or 0) + 0, expiry, {}, 0)
  return 1, expiry, false
end

-- book charges an admitted waiter's n buckets (fields fs, charges cs; h
-- the state as read, its 3 first fields before them, names the fields
-- read) for a turn wait ms from now, its lease kept until expiry: as
-- acquire writes them.
local function book(n, fs, cs, names, h, tats, froms, sls, swrite, now, us, wait, expiry)
  local turn, args, ms, a = us + wait * 1000, {}, expiry, 0
  for j = 1, n do
    local sj = sls[j]
    if sj then
      local g = sj[1]
      local jt = floor((now + wait) * 1000 / g)
      a = swrite(sj[3], sj[2], jt, cs[j], args, a)
      if (jt + SK + 1) * g / 1000 > ms then ms = (jt + SK + 1) * g / 1000 end
    else
      args[a + 1], args[a + 2] = fs[j], fmt('%d', tats[j])
      args[a + 3], args[a + 4] = names[3 + n + j], push(h[3 + n + j], us, max(froms[j] - turn, 0))
      a = a + 4
      if tats[j] / 1000 > ms then ms = tats[j] / 1000 end
    end
  end
  cover(now, (h[1] or 0) + 0, ms, args, a)
end

-- serve admits waiter m, whose request (see prelude.lua) asked for the
-- buckets in rest, batch or not, with its TTL and deadline, as acquire
-- would have had it asked now. It returns the code to publish (1: admitted
-- holding its slot; 2: a pending lease; 0: not admitted), the expiry, the
-- µs it was charged at, and whether a pause or a stop holds everyone back.
local function serve(m, rest, batch, ttl, deadline, now, us)
  local fs, cs, as, n = {}, {}, {}, 0
  for f, c, a in string.gmatch(rest, ' (%S+) (%d+) (%d+)') do
    n = n + 1
    fs[n], cs[n], as[n] = f, c + 0, a + 0
  end
  local names = {'xp', 'pause', 'qs'}
  for j = 1, n do names[3 + j], names[3 + n + j] = fs[j], fs[j] .. '.h' end
  local h = redis.call('HMGET', KEYS[1], unpack(names, 1, 3 + 2 * n))
  local st = h[3] and string.match(h[3], '^(%d+) ')
  -- Paused or stopped: nobody is admitted. The waiter asks acquire, which
  -- tells it how long; the next waiters wait for the next slot to free.
  if (h[2] and h[2] + 0 > now) or (st and st + 0 > now) then return 0, 0, 0, true end
  local wait, tats, froms, sls = 0, {}, {}, {}
  local sread, sfit, swrite
  for j = 1, n do
    local f, charge, allow = fs[j], cs[j], as[j]
    if byte(f, 1) == 126 then
      if not sread then sread, sfit, swrite = slib() end
      local g = string.match(f, '^~(%d+):') + 0
      local cur = floor(now * 1000 / g)
      local ss = sread(h[3 + j], cur, KEYS[1], f)
      local jj = sfit(ss, cur, charge, allow)
      sls[j] = {g, cur, ss}
      if jj > cur and jj * g - now * 1000 > wait then wait = jj * g - now * 1000 end
    else
      local tat = h[3 + j]
      if tat and tat - us >= 0 then tat = tat + 0 else tat = us end
      froms[j], tats[j] = tat, tat + charge
      if tats[j] - us - allow > wait then wait = tats[j] - us - allow end
    end
  end
  wait = ceil(wait / 1000)
  if not (wait == 0 or (batch == '0' and wait <= deadline - now)) then return 0, 0, 0, false end
  -- Admitted: at its turn now, holding the slot; or with a later turn, as
  -- a pending lease holding none.
  local expiry, code = now + wait + ttl, 1
  local score = expiry
  if wait > 0 then code, score = 2, PENDING + expiry end
  redis.call('ZADD', KEYS[2], fmt('%d', score), m)
  book(n, fs, cs, names, h, tats, froms, sls, swrite, now, us, wait, expiry)
  return code, expiry, us, false
end

-- give hands the free slots to the slot queue's waiters, first come, first
-- served: it admits each, in order, as acquire would have had the waiter
-- asked at that moment (see wake). The caller of acquire (id me, queue
-- score mine) comes after the waiters before it (lower score, or the same
-- score and a lower id), and give stops there; without a caller (settle)
-- it hands over whatever is free. limit is the concurrency limit, bslots
-- the slots batch calls may use: a batch waiter gets one only while fewer
-- are held. Each waiter it handles leaves the queue, and its id and
-- outcome are published on the queue's name, where its process listens
-- (space-separated '<id>:<code>:<expiry ms>:<charged µs>'):
--   1  admitted, holding its slot until expiry, its buckets charged at
--      the µs given (or, for a pending lease's claim, its slot taken);
--   2  its tokens' turn lies ahead: admitted as a pending lease (holding
--      no slot), turn = expiry less its TTL, charged at the µs given;
--   0  not admitted (its buckets, a pause or a stop hold it back, or its
--      deadline passed): it asks acquire again, with its ticket.
-- A tenant's waiter (a marker, 't') stays queued, owed one of the free
-- slots: told 0 once (its marker becomes 'T', its deadline at most one
-- lease TTL away), it asks acquire with its ticket and takes the slot
-- there, having kept its place; those after it get only the slots left.
-- It returns the slots held after it, those still free, whether the
-- caller must wait (a waiter before it is still queued), and whether it
-- met the caller's own entry (a call resent after its first run queued it).
local function give(now, us, limit, bslots, me, mine)
  -- MAXGIVE bounds the slots one script gives: a mass expiry must not
  -- make one call admit thousands. LOOK is how many waiters past the
  -- free slots it looks at, for those that get no slot (a later turn,
  -- not admitted).
  local MAXGIVE, LOOK = 100, 4
  -- Nobody waits when the queue holds its sentinel alone (or nothing):
  -- a waiter is queued only through cover, which puts the sentinel
  -- there first. ZCARD reads a count kept by the set: without a caller
  -- (settle) there is then nothing to do, and acquire reads no ranks.
  local none = redis.call('ZCARD', KEYS[3]) <= 1
  if none and not me then return 0, 0, false end
  local live = redis.call('ZCOUNT', KEYS[2], '(' .. fmt('%d', now), LIVE)
  local free = math.min(limit - live, MAXGIVE)
  if free <= 0 then return live, 0, false end
  if none then return live, free, false, false end
  -- The queue's first members by rank, with their scores; the sentinel
  -- '~', last, ends it. Cheaper than a range by score: fewer arguments.
  local heads = redis.call('ZRANGE', KEYS[3], '0', fmt('%d', free + LOOK - 1), 'WITHSCORES')
  if not heads[1] or heads[1] == '~' then return live, free, false end
  local ws = {}
  for i = 1, #heads / 2 do ws[i] = 'w:' .. heads[2 * i - 1] end
  local reqs = redis.call('HMGET', KEYS[1], unpack(ws))
  local given, blocked, gone, sent, k, told, seen = 0, true, {}, {}, 0, nil, false
  for i = 1, #heads / 2 do
    local m, s = heads[2 * i - 1], heads[2 * i] + 0
    if m == '~' or (me and (m == me or s > mine or (s == mine and m > me))) then
      blocked, seen = false, m == me
      break
    end
    if given >= free or (s >= BATCH and live + given >= bslots) then break end
    local req, code, expiry, at = reqs[i], 0, 0, 0
    local stop = false
    if req then
      local batch, ttl, deadline, rest = string.match(req, '^(%S+) (%d+) (%d+)(.*)$')
      ttl, deadline = ttl + 0, deadline + 0
      if batch == 't' or batch == 'T' then deadline = sub(rest, 2) + 0 end
      if deadline < now then
        req = nil
      elseif batch == 't' or batch == 'T' then
        -- A tenant's waiter keeps its place and the slot it is owed.
        given = given + 1
        if batch == 't' then
          -- Told, it holds the slot one lease TTL at most: a waiter
          -- that died holds it no longer than a dead lease would.
          told = told or {}
          told[#told + 1], told[#told + 2] = 'w:' .. m, fmt('T %d 0 %d', ttl, math.min(deadline, now + ttl))
          sent[#sent + 1] = m .. ':0:0:0'
        end
        req = false
      elseif batch == 'p' then
        code, expiry, stop = claim(m, ttl, now)
        if code == 1 then given = given + 1 end
      else
        code, expiry, at, stop = serve(m, rest, batch, ttl, deadline, now, us)
        if code == 1 then given = given + 1 end
      end
    end
    if req ~= false then
      k = k + 1
      gone[k], sent[#sent + 1] = m, fmt('%s:%d:%d:%d', m, code, expiry, at)
    end
    if stop then break end
  end
  if k > 0 then
    redis.call('ZREM', KEYS[3], unpack(gone, 1, k))
    for j = 1, k do gone[j] = 'w:' .. gone[j] end
    redis.call('HDEL', KEYS[1], unpack(gone, 1, k))
  end
  if told then redis.call('HSET', KEYS[1], unpack(told)) end
  if sent[1] then redis.call('PUBLISH', KEYS[3], table.concat(sent, ' ')) end
  return live + given, free - given, blocked, seen
end
return give
