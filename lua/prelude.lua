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
-- bucket restarts, and what was reserved before has been refilled. The
-- script that restarts a bucket records when in the field <bucket>.f, and a
-- give-back from a lease charged before that time gives nothing back (see
-- settle.lua): otherwise a give-back that reaches Redis late, after the
-- refill and a new burst, would add capacity the refill already added.
--
-- State hash fields: rpm/tpm/rpd/tpd (TATs, µs), rpm.f/tpm.f/rpd.f/tpd.f
-- (their last restarts, µs), pause (ms until which nobody is admitted), qb
-- (the virtual queue that spaces out batch waiters, in ms), xp (the expiry
-- last set on the keys, in ms: every bucket is full again, and every lease
-- has expired, before it).
--
-- Concurrency slots. The lease set (KEYS[2]) holds, scored in ms:
--   <id>     a lease holding a slot, scored by its expiry;
--   g:<id>   a grant: a slot kept for the queued waiter <id> until the end
--            of its claim window (CLAIM ms), counted as held;
--   <id>     a pending lease, scored PENDING + its expiry: admitted with a
--            later turn for its tokens, it holds no slot until it claims
--            one at its turn.
-- The slot queue (KEYS[3]) holds the callers waiting for a slot, scored by
-- their ticket: the µs of their first denial (or their turn, for a pending
-- lease), plus BATCH for batch calls, so that every interactive waiter
-- comes first. A waiter resends its ticket, so it never loses its place.
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

-- give gives the free slots to the slot queue's head, first come, first
-- served, and reports whether the caller of acquire (id me, score mine)
-- got one; with me nil (settle, or a grant given up), it gives whatever is
-- free if anyone waits. limit is the concurrency limit, bslots the slots
-- batch calls may use: a batch waiter gets a slot only while fewer are
-- held. The caller takes its slot itself, at its own entry if it is
-- queued, or else placed by its score after any waiter of the same score.
-- Each other waiter given one gets a grant, and its id is published on
-- the queue's name, where its process listens.
--
-- Every script makes this closure, so its constants are its own locals: a
-- closure's upvalues cost hundreds of instructions each to make.
local function give(now, limit, bslots, me, mine)
  -- CLAIM is how long a grant keeps a slot for its waiter, in ms: one that
  -- does not claim it in time (it crashed, or missed the message) loses
  -- the slot to the next waiter once, and keeps its place in the queue by
  -- its ticket. MAXGIVE bounds the slots one script gives: a mass expiry
  -- must not make one call grant thousands.
  local CLAIM, MAXGIVE = 1000, 100
  -- Without a caller, nothing to do unless someone waits (below the
  -- sentinel's score): counted, as an integer reply costs less than
  -- members and scores.
  if not me and redis.call('ZCOUNT', KEYS[3], '-inf', '(9000000000000000') == 0 then return false end
  local live = redis.call('ZCOUNT', KEYS[2], '(' .. fmt('%d', now), LIVE)
  local free = math.min(limit - live, MAXGIVE)
  if free <= 0 then return false end
  -- The queue's first members by rank, with their scores; the sentinel
  -- '~', last, ends it. Cheaper than a range by score: fewer arguments.
  local heads = redis.call('ZRANGE', KEYS[3], '0', fmt('%d', free - 1), 'WITHSCORES')
  local took, seen, grants, names, k, claim = false, false, {}, {}, 0, nil
  local i, given = 1, 0
  while given < free do
    local m, s = heads[i], heads[i + 1]
    if m == '~' then m, s = nil, nil end
    if s then s = s + 0 end
    local own = me ~= nil and m == me
    if own then seen = true end
    if own and took then
      i = i + 2
    else
      local caller = me ~= nil and not took and (own or not m or mine < s)
      if not caller and not m then break end
      local score = s
      if caller and not own then score = mine end
      if score >= BATCH and live + given >= bslots then break end
      given = given + 1
      if caller then
        took = true
        if own then i = i + 2 end
      else
        k = k + 1
        claim = claim or fmt('%d', now + CLAIM)
        grants[2 * k - 1], grants[2 * k], names[k] = claim, 'g:' .. m, m
        i = i + 2
      end
    end
  end
  if k > 0 then
    redis.call('ZADD', KEYS[2], unpack(grants, 1, 2 * k))
    redis.call('PUBLISH', KEYS[3], table.concat(names, ' ', 1, k))
  end
  if took and seen then
    k = k + 1
    names[k] = me
  end
  if k > 0 then redis.call('ZREM', KEYS[3], unpack(names, 1, k)) end
  return took
end
