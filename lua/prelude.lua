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
-- headroom now, in µs, each a 7-byte big-endian integer (or, after a
-- header, its headroom plus an offset: see sh below). An event's time
-- is now, or 1 µs after the bucket's newest event if that is not earlier
-- (events in one µs, a clock stepping back), so that a bucket's events
-- are in strictly increasing time.
--
-- Compaction. A full stack (MAXH entries) is compacted before it takes
-- another: each run of adjacent entries becomes one, with the run's last
-- time and its first headroom, the smallest. A lease charged among the
-- run's events is then bounded by (and lowers) that smallest headroom: it
-- may get back less than it could, never more. The runs are cut from the
-- oldest on, a headroom of 0 (a restart) alone: a run goes on while an
-- entry's headroom is at most g times the run's first, g = (largest /
-- smallest headroom)^(3/128), taken with square roots alone (correctly
-- rounded, so Redis, gopher-lua and the Go model agree to the bit). Each
-- run's first headroom exceeds the last run's g times, so at most 43 runs
-- and the 0 remain: a compaction frees at least 20 entries, in one pass
-- over the stack. A merged entry holds at least 1/g of each headroom it
-- stands for (g < 2.5 always, headrooms being below 2^56; about 1.3 for a
-- day bucket in use, whose headrooms span one call to a day's calls).
-- Where the events are densest, the headrooms being close, the runs are
-- longest. The merge the stack made before (its 2nd to 18th entries into
-- one, keeping the 2nd's headroom) spread a day's first headroom over
-- ever later events: a day bucket under 200 leases in flight charged
-- 4-12% more tokens than used (0.4-0.7% in issue 21's run).
--
-- The bound. On a bucket that never fills (a day's), an event's headroom
-- is what the calls charged before it used, plus the refunds they still
-- owe; a merged entry ends, once all have settled, at what the calls
-- before its run used less the refunds owed, when it was made, by the
-- calls charged among its events. So a give-back is cut only while a
-- day's use is below the refunds in flight (its first moments, and only
-- where leases reserve far more than they use), and the day's whole loss
-- is below the refunds owed by the calls of that time. pacer's
-- TestDayBucketLedger checks it: 200 leases in flight, using 5-100% of
-- what they reserve, charge what they used within 0.05%, never less.
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
local floor, ceil, max, sqrt = math.floor, math.ceil, math.max, math.sqrt
-- The give-back stacks' integers (see sh below) are 7-byte big-endian,
-- written and read by Redis's struct library: one call into C, where the
-- same work in Lua arithmetic took 1.7 (to read) to 2.9 (to write) times
-- the instructions (docs/results.md, issue 23, round 8). The library holds
-- an integer in a C long, which is 32 bits wide on a 32-bit build and on
-- Windows ports: there it would cut 7 bytes to 4, so it is used only where
-- it reads 2^48 back whole (one call a script). A server without it, or
-- with a narrow one (and miniredis, which the tests run on too), gets the
-- same bytes from the Lua pk and upk below, made only there, for the
-- formats the scripts use: '>I7' repeated (one integer, an entry, or a
-- stack's entries at once) and '>BxxxxxBI7' (a header).
local pk, upk
local lib = rawget(_G, 'struct')
if lib and lib.unpack('>I7', '\1\0\0\0\0\0\0') == 281474976710656 then
  pk, upk = lib.pack, lib.unpack
else
  local function seven(v)
    local b7 = v % 256; v = (v - b7) / 256
    local b6 = v % 256; v = (v - b6) / 256
    local b5 = v % 256; v = (v - b5) / 256
    local b4 = v % 256; v = (v - b4) / 256
    local b3 = v % 256; v = (v - b3) / 256
    local b2 = v % 256
    return (v - b2) / 256, b2, b3, b4, b5, b6, b7
  end
  local function int(s, p)
    local b1, b2, b3, b4, b5, b6, b7 = byte(s, p, p + 6)
    return (((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6) * 256 + b7
  end
  -- n returns how many I7 format f names: '>' then 'I7' n times.
  local function n(f)
    local k = (#f - 1) / 2
    if k >= 1 and f == '>' .. string.rep('I7', k) then return k end
    error('pk: format ' .. f)
  end
  pk = function(f, ...)
    local x, y, z = ...
    if f == '>I7' then return char(seven(x)) end
    if f == '>I7I7' then return char(seven(x)) .. char(seven(y)) end
    if f == '>BxxxxxBI7' then return char(x, 0, 0, 0, 0, 0, y) .. char(seven(z)) end
    local v, parts = {...}, {}
    for i = 1, n(f) do parts[i] = char(seven(v[i])) end
    return table.concat(parts)
  end
  upk = function(f, s, p)
    p = p or 1
    if f == '>I7' then return int(s, p), p + 7 end
    if f == '>I7I7' then return int(s, p), int(s, p + 7), p + 14 end
    if f == '>BxxxxxBI7' then return byte(s, p), byte(s, p + 6), int(s, p + 7), p + 14 end
    local k, v = n(f), {}
    for i = 1, k do v[i] = int(s, p + 7 * i - 7) end
    v[k + 1] = p + 7 * k
    return unpack(v, 1, k + 1)
  end
end
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

-- The most entries a bucket's give-back stack keeps: a full one is
-- compacted (see above) before it takes another.
local MAXH = 64

-- The clock: each script reads the server clock itself, in µs and in ms
-- (every process shares it, so skew between callers' machines never
-- changes the budget), in three lines:
--   local t = redis.call('TIME')
--   local us = t[1] * 1000000 + t[2]
--   local now = floor(us / 1000)
-- A function for it would cost a closure on every call of every script.

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
--
-- The lease set keeps a second sentinel, WIDE: 65 bytes, longer than a
-- small sorted set may hold (zset-max-listpack-value, 64 by default), so
-- the set is a skiplist from its first cover on. A small set is a
-- listpack that every ZADD, ZSCORE, ZREM and ZCOUNT scans whole: with 64
-- leases in flight those four cost about 30k instructions more than on a
-- skiplist, where they cost the same at 1 and 10,000 in flight.
local WIDE = '~wide:keeps-the-lease-set-a-skiplist-so-its-cost-is-flat-in-leases'
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
  redis.call('ZADD', KEYS[2], SENTINEL, '~', SENTINEL, WIDE)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('ZADD', KEYS[3], SENTINEL, '~')
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
end

-- tcover writes args[1..j] to a tenant's hash tkey and keeps it until ms
-- plus a second, as cover does for the budget's keys, with the tenant's own
-- xp: an idle tenant's hash expires on its own. Its slack is a quarter, as
-- the budget's, but at least TIDLE ms: a tenant's TATs seldom lie far
-- ahead (its calls are a share of the budget's), so with a quarter alone
-- its hash lived about 1.5 s past its latest call, and a tenant calling
-- less often than that paid a PEXPIRE (and a hash made anew) on every
-- call. With TIDLE a tenant calling at least once a minute pays one a
-- minute; an idle tenant's hash still goes TIDLE ms (a quarter more, if
-- its TATs ran further ahead) after its latest TAT plus a second: the
-- memory of the tenants of the last minute. Made only for a call that
-- names a tenant: a closure costs every script that makes it.
local TIDLE = 60000
local tcover
if KEYS[5] then
  tcover = function(tkey, now, xp, ms, args, j)
    local need = math.ceil(ms) + 1000
    if need > xp then
      xp = need + math.max(math.ceil((need - now) / 4), TIDLE)
      args[j + 1], args[j + 2] = 'xp', string.format('%d', xp)
      redis.call('HSET', tkey, unpack(args, 1, j + 2))
      redis.call('PEXPIRE', tkey, string.format('%d', xp - now))
    elseif j > 0 then
      redis.call('HSET', tkey, unpack(args, 1, j))
    end
  end
end

-- A tenant's share TAT (see acquire.lua) after a charge of d µs from tat
-- lies never more than twice its allowance allow past now (us): at most
-- us + 2 * allow. So a tenant is over its share for at most about a window
-- after its heavy use ends, however many charges and debts it ran up.
-- Acquire and settle both apply it (inline: a function costs a closure).

-- The stack's layout. Entries are 14 bytes: the event's time and a stored
-- value w, each a 7-byte big-endian integer. A give-back lowers every
-- event after its lease, which are the newest; rewriting them all would
-- cost each settle up to MAXH entries. So the stack may begin with a
-- 14-byte header, byte 255 then F (byte 7) and A (bytes 8-14): entries 1..F
-- are frozen, w their headroom; those after F are live, their headroom w
-- less A. A give-back adds what it moved to A (the live entries lose it
-- at once) after freezing, or thawing, the entries between F and its
-- first event: with leases settled about in the order they were charged,
-- one or two entries. A string without a header (its first byte is a
-- time's, below 255) has A = 0 and every entry live, so a stack written
-- before the header existed reads the same. A returns to 0 whenever the
-- stack empties or is compacted; until then it grows by what give-backs
-- move, at most the bucket's refills over the stack's life, far below
-- 2^50 µs (a flat, header-less rewrite past it keeps it exact).

-- clib returns fold and flat (below). A stack is compacted, or flattened,
-- once in dozens of pushes, so their closures are made only then: clib
-- itself has no upvalues (what they need comes as arguments, as for
-- glib), and a script pays for one bare closure, not for two with theirs.
-- Both read a stack's entries in one unpack and write the result in one
-- pack: a call into C an entry cost about as much as the rest.
local function clib(pk, upk)
  local rep, unpack, sqrt = string.rep, unpack, math.sqrt
  -- entries returns the m entries of stack s (header o bytes, F, A) as
  -- {t1, w1, t2, w2, ...}, each live entry's headroom written out (w - A).
  local function entries(s, m, f, a, o)
    local v = {upk('>' .. rep('I7', 2 * m), s, o + 1)}
    for k = f + 1, m do v[2 * k] = v[2 * k] - a end
    return v
  end

  -- flat returns stack s without a header: each headroom written out.
  local function flat(s, m, f, a, o)
    return pk('>' .. rep('I7', 2 * m), unpack(entries(s, m, f, a, o), 1, 2 * m))
  end

  -- fold returns a full stack s flat (see flat) with each run of
  -- adjacent entries within a factor g of the run's first headroom made
  -- one (see above): the run's last time, its first headroom.
  local function fold(s, m, f, a, o)
    local v = entries(s, m, f, a, o)
    local i = v[2] == 0 and 2 or 1
    local q = sqrt(sqrt(sqrt(sqrt(sqrt(v[2 * m] / v[2 * i])))))
    local g = sqrt(q * sqrt(q))
    local out, n, b = {v[1], v[2]}, 2 * i - 2, i
    for k = i + 1, m do
      if v[2 * k] > v[2 * b] * g then
        -- The run b..k-1 ends: entry k-1's time, entry b's headroom.
        out[n + 1], out[n + 2] = v[2 * k - 3], v[2 * b]
        n, b = n + 2, k
      end
    end
    out[n + 1], out[n + 2] = v[2 * m - 1], v[2 * b]
    return pk('>' .. rep('I7', n + 2), unpack(out, 1, n + 2))
  end
  return fold, flat
end

-- blib returns the stack's codec, sh, dec, enc and head (below), and,
-- given clib, pushx, push's slow path. Only a push that removes entries
-- or compacts, and a settle that gives back, need them; the common push
-- (below) calls pk and upk itself. So blib has no upvalues (clib, pk and
-- upk come as arguments), and a script that never calls it pays for one
-- bare closure, not for five with theirs.
local function blib(clib, pk, upk)
  local byte, sub, MAXH = string.byte, string.sub, 64
  -- sh returns the entry count of stack s, F, A and the header's length.
  local function sh(s)
    if byte(s, 1) ~= 255 then return #s / 14, 0, 0, 0 end
    local _, f, a = upk('>BxxxxxBI7', s)
    return (#s - 14) / 14, f, a, 14
  end

  -- dec returns entry k (from 1) of the give-back stack s, its header o
  -- bytes long: its time and stored value.
  local function dec(s, k, o)
    local t, d = upk('>I7I7', s, o + 14 * k - 13)
    return t, d
  end

  -- enc returns the entry for time t and value d (integers below 2^53).
  local function enc(t, d) return pk('>I7I7', t, d) end

  -- head returns the header for F frozen entries and offset A ('' for A 0:
  -- no header, every entry live).
  local function head(f, a)
    if a == 0 then return '' end
    return pk('>BxxxxxBI7', 255, f, a)
  end

  if not clib then return sh, dec, enc, head end
  -- pushx is push (below) for a stack that loses entries or is full:
  -- made only when asked for (with clib).
  local function pushx(s, us, d)
    s = s or ''
    local m, f, a, o = sh(s)
    if m == 0 then return enc(us, d) end
    local t, w = dec(s, m, o)
    local e = us
    if t - e >= 0 then e = t + 1 end
    if d == 0 then return enc(e, d) end
    if m < MAXH and w - (m > f and a or 0) - d < 0 then return s .. enc(e, d + a) end
    while m > 0 do
      if m > f then w = w - a end
      if w - d < 0 then break end
      m = m - 1
      if m > 0 then t, w = dec(s, m, o) end
    end
    if m == 0 then return enc(e, d) end
    if m == MAXH then
      return clib(pk, upk)(s, m, math.min(f, m), a, o) .. enc(e, d)
    end
    -- The header stays as it is unless entries it froze went.
    if f <= m then return sub(s, 1, o + 14 * m) .. enc(e, d + a) end
    return head(m, a) .. sub(s, o + 1, o + 14 * m) .. enc(e, d + a)
  end
  return sh, dec, enc, head, pushx
end

-- push returns the give-back stack s (nil: none) with a charge event at us
-- of headroom d (µs, >= 0) recorded: the entries whose headroom is d or
-- more go (all of them when d is 0); at MAXH entries, it is compacted
-- first (see above). Only the entries that go are read, and the others
-- copied as they are. The usual case, nothing going (a bucket's TAT
-- running ahead) or an empty stack, reads and writes its entries here
-- with pk and upk: a function of the codec would cost a closure every
-- script run. The others go to pushx (see blib).
local function push(s, us, d)
  local m, f, a, e, w = 0, 0, 0, us, 0
  if s and s ~= '' then
    local n, o = #s, 0
    if byte(s, 1) == 255 then
      local _
      _, f, a = upk('>BxxxxxBI7', s)
      o = 14
    end
    m = (n - o) / 14
    if m > 0 then
      local t
      t, w = upk('>I7I7', s, n - 13)
      if t - us >= 0 then e = t + 1 end
    end
  end
  local x = d
  if m > 0 and d ~= 0 then
    -- Nothing goes: the stack as it is, one entry longer. Every byte a
    -- script allocates costs several instructions (copied, then
    -- collected), so no copy of the stack is made on the way.
    if m < MAXH and w - (m > f and a or 0) - d < 0 then
      x = d + a
    else
      local _, _, _, _, pushx = blib(clib, pk, upk)
      return pushx(s, us, d)
    end
  end
  if m > 0 and d ~= 0 then return s .. pk('>I7I7', e, x) end
  return pk('>I7I7', e, x)
end

-- Strict sliding windows. A sliding rate's field is named '~<g>:<name>',
-- g the width of its sub-windows in µs (a window is SK of them, or less).
-- A window ending in sub-window j is counted as the SK + 1 sub-windows
-- j - SK .. j, the oldest whole: never less than what a window of SK × g
-- really holds.
--
-- The counts sit in a ring of the SK + 1 sub-windows r - SK .. r, r its
-- head. The field holds '<r>:<l>:<t>:<c>', and ':<p>:<pl>' after it
-- while p (below) is not 0: l the latest sub-window with a count (0:
-- none), c the head's count, t the sum of the others. Those SK counts are kept in four fields '<field>.r0' .. '.r3',
-- sub-window k in slot k % SK, slot i in field '.r<i // 16>' at place
-- i % 16, each count 9 base-64 digits ('0' + d, most significant first);
-- a field missing or '' holds zeros. A call in the head's sub-window,
-- most of them, reads and writes the field alone; a slot is read once
-- when its count leaves the ring (the head moving on by one sub-window
-- rewrites one slot: the old head's count over the one leaving), when a
-- give-back comes off an older sub-window, and when a call waits. Writing
-- a long string costs about ten instructions a byte (copy and garbage),
-- so no call rewrites more than the quarter of the ring it changed. The
-- field is '' when nothing is counted.
--
-- Counts that leave the ring while still in a window (a turn reserved
-- more than a window ahead, held there by another rate) are folded into
-- p, their total, and pl, the latest of their sub-windows: a window
-- ending at or before pl + SK counts p whole (never less than it holds),
-- and one after it none. l is the latest count, in the ring or folded:
-- a later call never takes an earlier turn. t + c and p are kept at most
-- 2^53 (8 times the largest limit), so that every count is exact.
--
-- A sliding rate's state, once read, is a table: {r, l, t, c, p, pl,
-- chunks (the ring's fields read or written, by i + 1), key, field,
-- chunks changed}. The functions make no closure and keep their
-- constants to themselves (see give).
local SK = 64

-- slib returns sread, sfit, swrite and slides: sliding.lua's functions, which
-- lua.Source places in the prelude as slib's body (see lua.go), so that
-- only a script that meets a sliding rate makes them, one bare closure
-- costing every other script.
--
-- glib(cover, push, slib, PENDING, LIVE, BATCH, SK) returns give: slots.lua's
-- functions, placed as glib's body alike, made only by a script that hands
-- slots over (a budget with a concurrency limit). give needs of the prelude
-- what comes as glib's arguments, so glib has no upvalues: a script that
-- never calls it pays for one bare closure, not for give's dozen upvalues.
