-- prelude.lua: shared by every llmpacer script (prepended to each at load time,
-- so the clock and expiry rules exist once).
--
-- A bucket is one hash field holding its theoretical arrival time (TAT): the
-- microsecond, on the Redis clock, at and after which the bucket is full.
-- Taking a call's charge moves it later; giving back moves it earlier. A
-- call fits now when the TAT after its charge lies at most its allowance
-- past now. The caller turns units into microseconds (see package lua's
-- Bucket), so the scripts only add and compare integers.
--
-- A TAT in the past reads as full, and the next charge starts from now: the
-- bucket restarts, and what was reserved before has been refilled.
--
-- Give-backs. A give-back (settle's negative correction) moves a TAT back,
-- but only as far as the charges made since the lease leave room for: the
-- TAT must stay where it would be had the lease been charged only what it
-- used, every later call keeping its turn. Every charge event (an
-- admission, a debt, a pause's lowering) has a headroom: how far the TAT
-- lay past the charged call's turn before the charge (0 if the bucket was
-- full). A give-back from a lease charged at t moves the TAT back by at
-- most the smallest headroom of the events after t, and lowers each of
-- their headrooms by what it moved. Each bucket keeps its events in the
-- field <bucket>.h, oldest first, each only while its headroom is below
-- those of all later events, so the first event after t holds the bound.
-- The field is a string of 14-byte entries: the event's time and its
-- headroom now, in µs, each a 7-byte big-endian integer. A full stack
-- (MAXH entries) merges MERGE+1 of its oldest into one before it takes
-- another: the latest of their times with the oldest's headroom, the
-- smallest. The merged ones are the second to the MERGE+2nd: the oldest,
-- often a restart (headroom 0), would spread its 0 over them all. An event's time is now, or 1 µs after the
-- bucket's newest event if that is not earlier (events in one µs, a clock
-- stepping back), so that a bucket's events are in strictly increasing
-- time.
--
-- State hash fields: rpm/tpm/rpd/tpd (TATs, µs), rpm.h/tpm.h/rpd.h/tpd.h
-- (their give-back stacks), pause (ms until which nobody is admitted), qb
-- (the virtual queue that spaces out batch waiters, in ms), xp (the expiry
-- last set on the keys, in ms: every bucket is full again, and every lease
-- has expired, before it).
--
-- Tenants. A tenant's hash (KEYS[5] of acquire and settle, when given)
-- holds its buckets as fields that begin with '@' (its own limits, with
-- their give-back stacks) or '%' (its share of a budget bucket: a TAT
-- only, never given a stack), its own xp and its qb (see acquire.lua).
--
-- Concurrency slots. The lease set (KEYS[2]) holds, scored in ms:
--   <id>     a lease holding a slot, scored by its expiry;
--   <id>     a pending lease, scored PENDING + its expiry: admitted with a
--            later turn for its tokens, it holds no slot until it claims
--            one at its turn.
-- The slot queue (KEYS[3]) holds the callers waiting for a slot, scored by
-- their ticket: the µs of their first denial (or their turn, for a pending
-- lease), plus BATCH for batch calls, so that every interactive waiter
-- comes first. A waiter resends its ticket, so it never loses its place.
-- Each waiter's request is kept with its entry, in the state hash's field
-- w:<id>: '<batch> <ttl> <deadline>' and, for each bucket, ' <field>
-- <charge> <allowance>' as acquire takes them (deadline: the ms after
-- which it no longer waits); or 'p <ttl> <deadline>' for a pending lease
-- waiting to claim its slot; or a marker, 't <ttl> 0 <deadline>' ('T'
-- once told), for a tenant's waiter, whose buckets the script that frees a
-- slot cannot reach (the 0 reads as a deadline passed to an older give,
-- which then tells the waiter to ask again, as it used to). The script
-- that frees a slot admits the queue's head with it (see give), so a
-- waiter learns of its admission from a message and makes no second call;
-- a tenant's waiter is told to take the slot itself.
--
-- Redis runs a script alone, so its cost is everyone's latency. On a small
-- machine every redis.call costs a few microseconds, and every argument,
-- hash field, number parsed from a string (strtod) or printed into one
-- (sprintf), table and closure about a thousand instructions (a third of a
-- microsecond). The scripts therefore read and write only what a path
-- needs, let the caller precompute what it can, store only integers, build
-- few tables, and run no loop whose length grows with the data.
--
-- Numbers go to redis.call as strings made by fmt('%d', v): Redis 7.0 turns
-- a Lua number argument into text with a %.17g printf, which costs as much
-- as a small command, while %d formatting is cheap.

local fmt = string.format -- fmt('%d', v): see above
local byte, char, sub = string.byte, string.char, string.sub
-- Library functions reached through locals, and numbers parsed by arithmetic
-- (s + 0) rather than tonumber(s), which parses twice: each saves about a
-- thousand instructions.
local floor, ceil, max = math.floor, math.ceil, math.max
-- The sentinel score of the lease set and the slot queue (see cover); and
-- PENDING, the offset of pending leases (see above), which LIVE leaves out
-- of a count: ZCOUNT leases (now LIVE counts the slots held.
local SENTINEL = '9000000000000000'
local PENDING, LIVE = 1000000000000000, '(1000000000000000'
-- A batch waiter's score is its ticket plus BATCH (2^52; a ticket and the
-- sum stay exact in a double), after every interactive waiter's.
local BATCH = 4503599627370496
-- How long an expired lease stays in the lease set before acquire removes
-- it, in ms: a settle retried within it is told the lease expired, and one
-- that finds no lease within it knows an earlier attempt ended it.
local REAP_AFTER = 60000

-- The most entries a bucket's give-back stack keeps, and how many of the
-- oldest beyond one merge when it is full (see above).
local MAXH, MERGE = 64, 16

-- clock reads the server clock, in µs and in ms: every process shares it,
-- so skew between callers' machines never changes the budget.
local function clock()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return us, floor(us / 1000)
end

-- cover writes the fields in args[1..j] and keeps the keys until ms (plus a
-- second): the latest bucket TAT, lease expiry, pause or queue time, which
-- the caller passes (a pause must never be cut short). The expiry is set
-- with a quarter of slack and recorded in xp, so most calls skip the
-- PEXPIREs; xp only grows, so no TTL is ever shortened.
--
-- xp speaks for the lease set and the slot queue too, which is only true if
-- neither is ever deleted and recreated without a TTL behind xp's back.
-- Redis deletes a sorted set whose last member goes, so each keeps a
-- sentinel member, '~' (never a lease id), scored far beyond any expiry or
-- ticket: the scripts count, reap and read only scores below it.
local function cover(now, xp, ms, args, j)
  local need = ceil(ms) + 1000
  if need <= xp then
    if j > 0 then redis.call('HSET', KEYS[1], unpack(args, 1, j)) end
    return
  end
  xp = need + ceil((need - now) / 4)
  args[j + 1] = 'xp'
  args[j + 2] = fmt('%d', xp)
  redis.call('HSET', KEYS[1], unpack(args, 1, j + 2))
  local ttl = fmt('%d', xp - now)
  for k = 2, 3 do
    redis.call('ZADD', KEYS[k], SENTINEL, '~')
    redis.call('PEXPIRE', KEYS[k], ttl)
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
end

-- tcover writes args[1..j] to a tenant's hash tkey and keeps it until ms
-- plus a second, as cover does for the budget's keys, with the tenant's own
-- xp: an idle tenant's hash expires on its own. Made only for a call that
-- names a tenant: a closure costs every script that makes it.
local tcover
if KEYS[5] then
  tcover = function(tkey, now, xp, ms, args, j)
    local need = math.ceil(ms) + 1000
    if need > xp then
      xp = need + math.ceil((need - now) / 4)
      args[j + 1], args[j + 2] = 'xp', string.format('%d', xp)
      redis.call('HSET', tkey, unpack(args, 1, j + 2))
      redis.call('PEXPIRE', tkey, string.format('%d', xp - now))
    elseif j > 0 then
      redis.call('HSET', tkey, unpack(args, 1, j))
    end
  end
end

-- shared returns a tenant's share TAT (see acquire.lua) after a charge of
-- d µs from tat: never more than twice its allowance allow past now (us),
-- so that a tenant is over its share for at most about a window after its
-- heavy use ends, however many charges and debts it ran up. Acquire and
-- settle both apply it.
local function shared(tat, d, us, allow)
  if tat + d - us - 2 * allow > 0 then return us + 2 * allow end
  return tat + d
end

-- dec returns entry k (from 1) of the give-back stack s: its time and
-- headroom. Every value is below 2^53, so the arithmetic is exact.
local function dec(s, k)
  local p = 14 * k - 13
  local t1, t2, t3, t4, t5, t6, t7, d1, d2, d3, d4, d5, d6, d7 = byte(s, p, p + 13)
  return (((((t1 * 256 + t2) * 256 + t3) * 256 + t4) * 256 + t5) * 256 + t6) * 256 + t7,
    (((((d1 * 256 + d2) * 256 + d3) * 256 + d4) * 256 + d5) * 256 + d6) * 256 + d7
end

-- enc returns the entry for time t and headroom d (integers below 2^53:
-- each step divides exactly, with no call to floor).
local function enc(t, d)
  local t7 = t % 256; t = (t - t7) / 256
  local t6 = t % 256; t = (t - t6) / 256
  local t5 = t % 256; t = (t - t5) / 256
  local t4 = t % 256; t = (t - t4) / 256
  local t3 = t % 256; t = (t - t3) / 256
  local t2 = t % 256
  local d7 = d % 256; d = (d - d7) / 256
  local d6 = d % 256; d = (d - d6) / 256
  local d5 = d % 256; d = (d - d5) / 256
  local d4 = d % 256; d = (d - d4) / 256
  local d3 = d % 256; d = (d - d3) / 256
  local d2 = d % 256
  return char((t - t2) / 256, t2, t3, t4, t5, t6, t7, (d - d2) / 256, d2, d3, d4, d5, d6, d7)
end

-- push returns the give-back stack s (nil: none) with a charge event at us
-- of headroom d (µs, >= 0) recorded: the entries whose headroom is d or
-- more go (all of them when d is 0); at MAXH entries, the second to the
-- MERGE+2nd merge into one first.
local function push(s, us, d)
  s = s or ''
  local m, e = #s / 14, us
  if m > 0 then
    local t, v = dec(s, m)
    if t - e >= 0 then e = t + 1 end
    if d == 0 then
      m = 0
    else
      while v - d >= 0 do
        m = m - 1
        if m == 0 then break end
        t, v = dec(s, m)
      end
    end
    if 14 * m < #s then s = sub(s, 1, 14 * m) end
    if m == MAXH then
      local t = dec(s, MERGE + 2)
      local _, v = dec(s, 2)
      s = sub(s, 1, 14) .. enc(t, v) .. sub(s, 14 * MERGE + 29)
    end
  end
  return s .. enc(e, d)
end

-- Strict sliding windows. A sliding rate's field is named '~<g>:<name>',
-- g the width of its sub-windows in µs (a window is SK of them, or less).
-- Its value counts the units charged in each sub-window: '<base> <count>
-- <count> ...', the first count for sub-window base (floor(time / g)), a
-- token '-<n>' for n sub-windows with no count; it begins and ends with a
-- count ('' when none is left). A turn reserved far ahead (held there by
-- another rate) thus costs one token, not a zero for every sub-window
-- between. A window ending in sub-window j is counted as the SK + 1
-- sub-windows j - SK .. j, the oldest whole: never less than what a
-- window of SK × g really holds.
local SK = 64

-- sread returns the counts of v from sub-window lo on, as a table from
-- lo - j to sub-window j's count (those above 0), and the last sub-window
-- with a count (lo - 1 if none). Its keys are never positive, so every
-- Lua keeps them hashed: gopher-lua (miniredis's Lua) would make an array
-- as long as a positive key, a sub-window number in the millions.
local function sread(v, lo)
  local cs, last, j = {}, lo - 1, nil
  if v then
    for x in string.gmatch(v, '%-?%d+') do
      x = x + 0
      if not j then
        j = x
      elseif x < 0 then
        j = j - x
      else
        if x > 0 and j >= lo then cs[lo - j], last = x, j end
        j = j + 1
      end
    end
  end
  return cs, last
end

-- sadd adds u (which may be negative) to the count at key k (lo - j),
-- never below 0.
local function sadd(cs, k, u)
  local c = (cs[k] or 0) + u
  if c > 0 then cs[k] = c else cs[k] = nil end
end

-- swrite returns the counts read from lo on as stored (see above).
local function swrite(cs, lo)
  local js = {}
  for k in pairs(cs) do js[#js + 1] = lo - k end
  if not js[1] then return '' end
  table.sort(js)
  local parts, prev = {fmt('%d', js[1])}, js[1] - 1
  for i = 1, #js do
    local j = js[i]
    if j - prev > 1 then parts[#parts + 1] = fmt('%d', prev + 1 - j) end
    parts[#parts + 1] = fmt('%d', cs[lo - j])
    prev = j
  end
  return table.concat(parts, ' ')
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
-- slots: told 0 once (its marker becomes 'T'), it asks acquire with its
-- ticket and takes the slot there, having kept its place; those after it
-- get only the slots left.
-- It returns the slots held after it, those still free, and whether the
-- caller must wait (a waiter before it is still queued).
--
-- Every script makes this closure, so its constants are its own locals: a
-- closure's upvalues cost hundreds of instructions each to make.
local function give(now, us, limit, bslots, me, mine)
  -- MAXGIVE bounds the slots one script gives: a mass expiry must not
  -- make one call admit thousands. LOOK is how many waiters past the
  -- free slots it looks at, for those that get no slot (a later turn,
  -- not admitted).
  local MAXGIVE, LOOK = 100, 4
  -- Without a caller (settle), nothing to do unless someone waits (below
  -- the sentinel's score): counted, as an integer reply costs less than
  -- members and scores.
  if not me and redis.call('ZCOUNT', KEYS[3], '-inf', '(9000000000000000') == 0 then
    return 0, 0, false
  end
  local live = redis.call('ZCOUNT', KEYS[2], '(' .. fmt('%d', now), LIVE)
  local free = math.min(limit - live, MAXGIVE)
  if free <= 0 then return live, 0, false end
  -- The queue's first members by rank, with their scores; the sentinel
  -- '~', last, ends it. Cheaper than a range by score: fewer arguments.
  local heads = redis.call('ZRANGE', KEYS[3], '0', fmt('%d', free + LOOK - 1), 'WITHSCORES')
  if not heads[1] or heads[1] == '~' then return live, free, false end
  local ws = {}
  for i = 1, #heads / 2 do ws[i] = 'w:' .. heads[2 * i - 1] end
  local reqs = redis.call('HMGET', KEYS[1], unpack(ws))
  local given, blocked, gone, sent, k, told = 0, true, {}, {}, 0, nil
  for i = 1, #heads / 2 do
    local m, s = heads[2 * i - 1], heads[2 * i] + 0
    if m == '~' or (me and (m == me or s > mine or (s == mine and m > me))) then
      blocked = false
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
          told = told or {}
          told[#told + 1], told[#told + 2] = 'w:' .. m, 'T' .. sub(req, 2)
          sent[#sent + 1] = m .. ':0:0:0'
        end
        req = false
      elseif batch == 'p' then
        -- A pending lease claims its slot: its buckets were charged when
        -- it was admitted, and a pause does not hold back a turn already
        -- reserved; a stop does (its call would meet the exhausted quota).
        local held = redis.call('ZSCORE', KEYS[2], m)
        local h = redis.call('HMGET', KEYS[1], 'xp', 'qs')
        local st = h[2] and string.match(h[2], '^(%d+) ')
        if st and st + 0 > now then
          stop = true
        elseif held and held + 0 >= PENDING then
          expiry = max(held - PENDING, now + ttl)
          redis.call('ZADD', KEYS[2], fmt('%d', expiry), m)
          cover(now, (h[1] or 0) + 0, expiry, {}, 0)
          code, given = 1, given + 1
        end
      else
        -- The waiter's buckets, as acquire reads and charges them.
        local fs, cs, as, n = {}, {}, {}, 0
        for f, c, a in string.gmatch(rest, ' (%S+) (%d+) (%d+)') do
          n = n + 1
          fs[n], cs[n], as[n] = f, c + 0, a + 0
        end
        local names = {'xp', 'pause', 'qs'}
        for j = 1, n do names[3 + j], names[3 + n + j] = fs[j], fs[j] .. '.h' end
        local h = redis.call('HMGET', KEYS[1], unpack(names, 1, 3 + 2 * n))
        local st = h[3] and string.match(h[3], '^(%d+) ')
        if (h[2] and h[2] + 0 > now) or (st and st + 0 > now) then
          -- Paused or stopped: nobody is admitted. The waiter asks
          -- acquire, which tells it how long; the next waiters wait for
          -- the next slot to free.
          stop = true
        else
          local wait, tats, froms, sls = 0, {}, {}, {}
          for j = 1, n do
            local f, charge, allow = fs[j], cs[j], as[j]
            if byte(f, 1) == 126 then
              local g = string.match(f, '^~(%d+):') + 0
              local cur = floor(now * 1000 / g)
              local lo = cur - SK
              local cnt, last = sread(h[3 + j], lo)
              local jj = max(cur, last)
              local sum = 0
              for x = jj - SK, jj do sum = sum + (cnt[lo - x] or 0) end
              while sum + charge > allow do
                sum = sum - (cnt[lo - jj + SK] or 0)
                jj = jj + 1
              end
              sls[j] = {g, lo, cnt}
              if jj > cur and jj * g - now * 1000 > wait then wait = jj * g - now * 1000 end
            else
              local tat = h[3 + j]
              if tat and tat - us >= 0 then tat = tat + 0 else tat = us end
              froms[j], tats[j] = tat, tat + charge
              if tats[j] - us - allow > wait then wait = tats[j] - us - allow end
            end
          end
          wait = ceil(wait / 1000)
          if wait == 0 or (batch == '0' and wait <= deadline - now) then
            -- Admitted: at its turn now, holding the slot; or with a
            -- later turn, as a pending lease holding none.
            expiry = now + wait + ttl
            local score = expiry
            if wait > 0 then
              code, score = 2, PENDING + expiry
            else
              code, given = 1, given + 1
            end
            redis.call('ZADD', KEYS[2], fmt('%d', score), m)
            at = us
            local turn, args, ms, a = us + wait * 1000, {}, expiry, 0
            for j = 1, n do
              local sj = sls[j]
              if sj then
                local g, lo, cnt = sj[1], sj[2], sj[3]
                local jt = floor((now + wait) * 1000 / g)
                sadd(cnt, lo - jt, cs[j])
                args[a + 1], args[a + 2] = fs[j], swrite(cnt, lo)
                a = a + 2
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
        end
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
  return live + given, free - given, blocked
end
