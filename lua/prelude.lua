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
-- (their last restarts, µs), pause (ms until which nobody is admitted), qc
-- and qb (the virtual queues that space out concurrency and batch waiters,
-- in ms), xp (the expiry last set on both keys, in ms: every bucket is full
-- again, and every lease has expired, before it).
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
-- The lease set's sentinel score (see cover), and the bound that leaves it
-- out of a count: ZCOUNT leases (now LIVE counts the leases in flight.
local SENTINEL, LIVE = '9000000000000000', '(9000000000000000'
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

-- cover writes the fields in args[1..j] and keeps both keys until ms (plus a
-- second): the latest bucket TAT, lease expiry, pause or queue time, which
-- the caller passes (a pause must never be cut short). The expiry is set
-- with a quarter of slack and recorded in xp, so most calls skip the
-- PEXPIREs; xp only grows, so no TTL is ever shortened.
--
-- xp speaks for the lease set too, which is only true if the set is never
-- deleted and recreated without a TTL behind xp's back. Redis deletes a set
-- whose last member goes, so the set keeps a sentinel member, '~' (never a
-- lease id), scored far beyond any expiry: the scripts count and reap only
-- scores below SENTINEL.
local function cover(state, leases, now, xp, ms, args, j)
  local need = ceil(ms) + 1000
  if need <= xp then
    if j > 0 then redis.call('HSET', state, unpack(args, 1, j)) end
    return
  end
  xp = need + ceil((need - now) / 4)
  args[j + 1] = 'xp'
  args[j + 2] = fmt('%d', xp)
  redis.call('HSET', state, unpack(args, 1, j + 2))
  redis.call('ZADD', leases, SENTINEL, '~')
  local ttl = fmt('%d', xp - now)
  redis.call('PEXPIRE', state, ttl)
  redis.call('PEXPIRE', leases, ttl)
end
