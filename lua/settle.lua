-- settle.lua: end a lease. Corrects the buckets by what the call really
-- used, then gives its concurrency slot back: to the slot queue's head, if
-- anyone waits, which it admits (see give in slots.lua). Ends a lease at
-- most once: a lease already ended, or expired, changes nothing. Also
-- takes a waiter that gives up out of the slot queue; one that was
-- admitted meanwhile (by a freed slot) is ended like any lease, so the
-- waiter sends the corrections of a call never made (a cancel).
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   {<prefix>:<name>}:l
-- KEYS[3]  slot queue   {<prefix>:<name>}:q   (see acquire.lua)
-- KEYS[4]  definition   (not read; as acquire's)
-- KEYS[5]  tenant hash  (optional, as acquire's): the lease's tenant
-- ARGV[1]  lease id
-- ARGV[2]  charged: the µs, on the Redis clock, at which acquire charged the
--          lease (its reply's now_us). A caller that cannot know it sends a
--          lower bound: an earlier time only ever gives back less. A time
--          after now is taken as now.
-- ARGV[3]  the concurrency limit (integer >= 0; 0 = none), and
-- ARGV[4]  the slots batch calls may use, as acquire takes them
-- ARGV[5..] pairs: a bucket's field and its correction in µs of the bucket's
--          time (integer): negative gives back (tokens reserved but not
--          used; the request and tokens of a call never made), positive
--          charges an overrun as debt. The caller computes them, and caps a
--          debt at one bucket's span, so one wildly wrong estimate holds the
--          budget back for at most a window more. Each bucket's
--          correction is applied by its own sign, so one settle may give
--          back to one bucket and charge a debt to another (less input and
--          more output than reserved). A sliding rate's (its field
--          begins with '~') is '<units>@<j>', in units: a give-back off
--          sub-window j, where the call was counted; a debt counted now.
--          Fields that begin with '@' or '%' are the tenant's (see
--          acquire.lua): corrected in KEYS[5]. A share's ('%') may be
--          '<µs>:<allow>', allow its allowance in µs (as an interactive
--          call's acquire sends it): a debt then leaves its TAT at most
--          2 × allow past now, as acquire caps a charge (see prelude.lua).
--
-- Returns {code, now_us}:
--   1: ended now.
--   0: not in the lease set: ended before, or expired and since removed, or
--      a waiter never admitted. If it waited for a slot, it leaves the
--      queue.
--   2: expired: past its expiry, so its slot is already free. Left as it
--      is (acquire removes it later) and nothing given back: its
--      reservation stays charged, and a retry is answered 2 again.
--
-- A give-back must not restore capacity that the refill, or a later call's
-- turn, already accounts for. The TAT moves back only as far as it would
-- lie had the lease been charged only what it used, with every call
-- charged since keeping its turn: by at most the smallest headroom of the
-- charges since the lease (see prelude.lua). A bucket that was full when
-- a later call came (a restart: headroom 0) gives nothing back to leases
-- charged before. Without that rule a give-back delayed past a refill and
-- a new burst adds a second burst, and one that arrives behind a reserved
-- turn lets the next call share that turn.

-- The give-back's stack work, which only settle does (see prelude.lua):
-- made here, so that no other script pays for its closure. The codec
-- (sh, dec, enc, head) comes from blib, called only when a give-back
-- reads a stack.
local sh, dec, enc, head

-- giveback lowers by moved the events of stack s (its m entries, F, A,
-- header o) from lo on, the first after the lease: those before it are
-- frozen, those from lo on live under A + moved, and those before it whose
-- headroom, first (lo's, lowered), is no lower, go. It returns the stack.
-- (The usual case, lo = F + 1 and no entry going, is givetat's own.)
local function giveback(s, m, f, a, o, lo, first, moved)
  local p = lo - 1
  while p > 0 do
    local _, w = dec(s, p, o)
    if p > f then w = w - a end
    if w - first < 0 then break end
    p = p - 1
  end
  local a2 = a + moved
  local parts, n = {'', sub(s, o + 1, o + 14 * math.min(f, p))}, 2
  for x = f + 1, p do
    local tx, wx = dec(s, x, o)
    n = n + 1
    parts[n] = enc(tx, wx - a)
  end
  for x = lo, f do
    local tx, wx = dec(s, x, o)
    n = n + 1
    parts[n] = enc(tx, wx + a)
  end
  n = n + 1
  parts[n] = sub(s, o + 14 * max(lo, f + 1) - 13, o + 14 * m)
  parts[1] = head(p, a2)
  s = table.concat(parts, '', 1, n)
  if a2 > 1125899906842624 then
    local _, flat = clib(pk, upk)
    return flat(s, p + m - lo + 1, p, a2, 14)
  end
  return s
end

-- givetat returns where the give-back of r µs moves the TAT tat (a
-- string, or nil) of bucket field, whose stack is s, for a lease charged
-- at t: nil if it stays; and the stack after it (nil: unchanged; true:
-- only hv changed). hv, if given, is the header {F, A} a batch holds for
-- s in place of the one s begins with (see settles.lua); an empty one
-- takes s's own.
local function givetat(field, tat, s, r, t, us, hv)
  -- Giving back: a bucket that is full now takes nothing; another moves
  -- back by at most the headroom of the first event after the charge (see
  -- prelude.lua), and never before now. A tenant's share has no stack: it
  -- only ever judges whether a tenant is past its share, and moves back by
  -- the whole give-back.
  s = s or ''
  tat = tat and tat + 0
  if not tat or tat - us <= 0 then return nil end
  local first, lo, m2, f, a, ho = 0, 1, 0, 0, 0, 0
  if byte(field, 1) ~= 37 then
    -- The first event after t: a binary search, the times increasing.
    -- Leases end about in the order they were charged, so it is most
    -- often the first live entry (f + 1: the entries before it went
    -- frozen when the leases charged before ended): that one and the
    -- one before it are read first, and the search runs only on the side
    -- they leave (each read is a struct.unpack, about 1.4k instructions).
    if not sh then sh, dec, enc, head = blib(nil, pk, upk) end
    if byte(s, 1) == 255 then ho = 14 end
    m2 = (#s - ho) / 14
    if hv and hv[1] then
      -- (A read back from a held header whole, as a single settle reads
      -- back the 7 bytes it wrote: a fractional give-back leaves A
      -- fractional in hv.)
      f, a = hv[1], floor(hv[2])
    else
      if ho > 0 then
        local _
        _, f, a = upk('>BxxxxxBI7', s)
      end
      if hv then hv[1], hv[2] = f, a end
    end
    -- The usual give-back (leases end about in the order they were
    -- charged), read in one call: entry f (frozen) before t, if any, and
    -- entry f + 1 after it, the first event. When entry f stays below the
    -- first's headroom lowered, no entry goes and only A moves: the
    -- entries stay as they are, under a new header.
    if f < m2 then
      local tf, wf, tg, wg = 0, 0, 0, 0
      if f > 0 then
        tf, wf, tg, wg = upk('>I7I7I7I7', s, ho + 14 * f - 13)
      else
        tg, wg = upk('>I7I7', s, ho + 1)
      end
      if (f == 0 or tf - t <= 0) and tg - t > 0 then
        local d = wg - a
        local to = max(tat - math.min(r, d), us)
        local a2 = a + tat - to
        if d > 0 and (f == 0 or wf - (d - (tat - to)) < 0) and a2 <= 1125899906842624 then
          if not hv then return to, head(f, a2) .. sub(s, ho + 1) end
          hv[2] = a2
          return to, true
        end
      end
    end
    local hi = m2 + 1
    local g = f + 1
    if g <= m2 then
      if upk('>I7', s, ho + 14 * g - 13) - t <= 0 then
        lo = g + 1
      elseif g == 1 or upk('>I7', s, ho + 14 * g - 27) - t <= 0 then
        lo, hi = g, g
      else
        hi = g - 1
      end
    end
    while lo < hi do
      local mid = floor((lo + hi) / 2)
      -- Entry mid's time.
      if upk('>I7', s, ho + 14 * mid - 13) - t > 0 then
        hi = mid
      else
        lo = mid + 1
      end
    end
    if lo <= m2 then
      local _, d = dec(s, lo, ho)
      if lo > f then d = d - a end
      first = d
      if d < r then r = d end
    end
  end
  if r <= 0 then return nil end
  local to = max(tat - r, us)
  -- The events from the first after t lose what the TAT moved.
  if lo <= m2 then return to, giveback(s, m2, f, a, ho, lo, first - (tat - to), tat - to) end
  return to
end

-- correct applies the corrections delta of the m buckets fields (their
-- caps, for a share) kept in hash st (pass 2: the tenant's), for a lease
-- charged at t.
local function correct(st, pass, fields, delta, caps, m, t, us, now)
  -- Each bucket's correction by its own sign: one settle may give back to
  -- one bucket and charge a debt to another (less input and more output
  -- than reserved), and both rules run in this one call. One HMGET reads
  -- each bucket's TAT and give-back stack, and for a debt the xp and the
  -- pause first (a debt may lengthen the keys' life; a give-back never
  -- does).
  local debt = false
  for k = 1, m do if delta[k] > 0 then debt = true; break end end
  local o = debt and 2 or 0
  local names = debt and {'xp', 'pause'} or {}
  for k = 1, m do names[o + 2 * k - 1], names[o + 2 * k] = fields[k], fields[k] .. '.h' end
  local h = redis.call('HMGET', st, unpack(names, 1, o + 2 * m))
  local args, j = {}, 0
  local ms = debt and (h[2] or 0) + 0 -- a pause in force must outlive a debt's write
  for k = 1, m do
    local tat, s = h[o + 2 * k - 1], h[o + 2 * k]
    if delta[k] < 0 then
      -- Giving back (see givetat).
      local to, ns = givetat(fields[k], tat, s, -delta[k], t, us)
      if to then
        args[j + 1], args[j + 2] = fields[k], fmt('%d', to)
        j = j + 2
        if ns then
          args[j + 1], args[j + 2] = names[o + 2 * k], ns
          j = j + 2
        end
      end
    elseif delta[k] > 0 then
      -- A correction of 0 changes nothing (the callers never send one).
      -- A debt starts from now if the bucket is full (a full bucket's
      -- surplus is not spent twice). It is a charge event whose turn is
      -- now, recorded like an admission (a tenant's share keeps no record).
      tat = tat and tat + 0 or us
      if tat - us < 0 then tat = us end
      if byte(fields[k], 1) ~= 37 then
        args[j + 1], args[j + 2] = names[o + 2 * k], push(s, us, tat - us)
        j = j + 2
      end
      tat = tat + delta[k]
      -- A share's cap (see prelude.lua): at most 2 × allow past now.
      if caps[k] and tat - us - 2 * caps[k] > 0 then tat = us + 2 * caps[k] end
      args[j + 1], args[j + 2] = fields[k], fmt('%d', tat)
      j = j + 2
      if tat / 1000 > ms then ms = tat / 1000 end
    end
  end
  if not debt then
    -- Moving a TAT back never lengthens the keys' life: no expiry changes.
    if j > 0 then redis.call('HSET', st, unpack(args, 1, j)) end
  elseif pass == 2 then
    tcover(st, now, (h[1] or 0) + 0, max(ms, now), args, j)
  else
    cover(now, (h[1] or 0) + 0, max(ms, now), args, j)
  end
end

-- The main block (settles.lua runs it as the function settle1: see
-- Source in lua.go).
local state, leases, queue = KEYS[1], KEYS[2], KEYS[3]
local id, charged = ARGV[1], ARGV[2] + 0
local limit = ARGV[3]
-- A freed slot goes to the queue's waiters through give (see glib in
-- prelude.lua), made only under a limit and while someone waits (the
-- queue holds more than its sentinel): a settle nobody waits for makes
-- none of its closures. The check is written out at each of its three
-- places, as a function for it would cost a closure every settle.
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)

local score = redis.call('ZSCORE', leases, id)
local expiry
if score then
  score = score + 0
  expiry = score
end
-- left: a waiter left the queue, so those after it may get a slot (one
-- kept for a tenant's waiter, see give in slots.lua, or a batch slot).
local left = false
if not score or score >= PENDING then
  -- No slot held: a waiter giving up, a pending lease (which may wait for
  -- its slot too), or a lease ended before. Out of the queue, with its
  -- request.
  if limit ~= '0' and redis.call('ZREM', queue, id) == 1 then
    redis.call('HDEL', state, 'w:' .. id)
    left = true
  end
  if not score then
    if left and redis.call('ZCARD', queue) > 1 then glib(cover, push, slib, PENDING, LIVE, BATCH, SK)(now, us, limit + 0, ARGV[4] + 0) end
    return {0, us}
  end
  expiry = score - PENDING
end
local live = expiry - now > 0
if live then redis.call('ZREM', leases, id) end
-- Its slot is free now (or was already, if it expired): the queue's head
-- gets it once the buckets are corrected (a give-back may let it fit).
local freed = left or limit ~= '0' and score < PENDING
local n = (#ARGV - 4) / 2
if not live or n == 0 then
  if freed and redis.call('ZCARD', queue) > 1 then glib(cover, push, slib, PENDING, LIVE, BATCH, SK)(now, us, limit + 0, ARGV[4] + 0) end
  if not live then return {2, us} end
  return {1, us}
end

-- The corrections go to the key their bucket lives in: the budget's state
-- hash, or for fields that begin with '@' or '%' the tenant's hash
-- (KEYS[5]; see prelude.lua). Each key's are applied alike, in turn.
-- fields[k] is bucket k's field, delta[k] its correction. A sliding
-- rate's (its field begins with '~', or '@~') is '<units>@<j>': a
-- give-back comes off sub-window j, where the call was counted (if it has
-- not rolled out of every window); a debt is counted now.
local tkey = KEYS[5]
for pass = 1, tkey and 2 or 1 do
  local st = pass == 2 and tkey or state
  local fields, delta, caps, m = {}, {}, {}, 0
  local sfields, svals = nil, nil
  for k = 1, n do
    local f, v = ARGV[3 + 2 * k], ARGV[4 + 2 * k]
    local b = byte(f, 1)
    local mine = b ~= 64 and b ~= 37
    if pass == 2 then mine = not mine end
    if not mine then
    elseif b == 126 or b == 64 and byte(f, 2) == 126 then
      sfields, svals = sfields or {}, svals or {}
      sfields[#sfields + 1], svals[#svals + 1] = f, v
    else
      m = m + 1
      fields[m] = f
      local u, a = nil, nil
      if b == 37 then u, a = string.match(v, '^(-?%d+):(%d+)$') end
      if u then delta[m], caps[m] = u + 0, a + 0 else delta[m] = v + 0 end
    end
  end
  if sfields then
    local _, _, _, slides = slib()
    slides(st, pass, sfields, svals, now, cover, tcover)
  end
  -- A charge time after now counts as now.
  if m > 0 then correct(st, pass, fields, delta, caps, m, math.min(charged, us), us, now) end
end
if freed and redis.call('ZCARD', queue) > 1 then glib(cover, push, slib, PENDING, LIVE, BATCH, SK)(now, us, limit + 0, ARGV[4] + 0) end
return {1, us}
