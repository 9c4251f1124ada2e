-- acquires.lua: admit several calls of one budget in one script call, each
-- exactly as acquire.lua would alone, in the order sent: the k acquires of
-- a batch are the k single acquires run one after another, each a µs after
-- the one before (or at the clock, for one that acquire.lua runs itself:
-- below), as each reply's now_us says. A Pacer sends one when calls of a budget
-- arrive while its previous acquire is in flight (group commit); a lone
-- call goes to acquire.lua. Both scripts share a budget.
--
-- KEYS[1..4] as acquire's (all four: KEYS[4] too).
-- KEYS[5..]  the hashes of the tenants of the batch's calls, each once.
-- ARGV       k groups, each t, the index in KEYS of its call's tenant's
--            hash (0: none), then the count n of its arguments, then
--            acquire.lua's ARGV for one call (n of them), which runs with
--            KEYS[t] as its KEYS[5].
--
-- Returns the k replies, in order, each acquire.lua's seven values, in one
-- flat array: call c's at 7c - 6 .. 7c. (A table a reply costs Redis a
-- dozen lookups to convert: one for all costs them once.)
--
-- The common call (a first attempt, ticket 0, none of its buckets sliding
-- (a tenant's and its shares included), that every bucket has room for
-- now (under the share kept, for an interactive call over its tenant's), with a slot
-- free and nobody queued for one, its definition's version the state's
-- copy, no stop or pause in force, the state not lost, its id new) is
-- admitted on the state read once: one TIME, one ZMSCORE of the ids, one
-- HMGET of the fields the batch reads (and one of each tenant's, and ZCARD
-- and ZCOUNT under a concurrency limit), and at the end one HSET and one
-- ZADD (and one HSET of each tenant's), the keys' expiry moved as
-- acquire's cover and tcover would. Its arithmetic is acquire.lua's
-- own, written for that one path (room's and admit's, with the prelude's
-- push). Any other call writes what came before, then runs acquire.lua,
-- prelude and all, as the function acquire1 on the state as it is; the
-- batch then reads the clock and the state again. Either way the replies
-- and the state are those of the singles.

-- What the batch holds between two writes, besides the state hash's
-- fields (see batch.lua): the lease scores of calls from base on
-- (ZMSCORE), the ids admitted, the leases to add, whether the keys'
-- expiry moved, and under a concurrency limit whether anyone waits for a
-- slot and the slots held (nil: not yet read).
local scores, base
local ids
local added, na, moved
local waiters, slots

-- An acquire most often appends one entry to each of its buckets' stacks
-- (push's usual path), and appending copies the stack: k copies of each
-- stack a batch of k. So the batch holds each stack's new entries apart:
-- stacks[g][field] is {s, m, F, A, t, w, parts, np}, the stack as read or
-- last rewritten (s; m false until read: its entry count, its header's F
-- and A, its last entry's time t and stored value w, with the np entries
-- appended since in parts, each as its two numbers), joined to them once,
-- at the write. pend lists the stacks held, in order.
local stacks, pend, np

-- joined returns stack st (see stacks) with its held entries: packed in
-- one call into C (pfmt[p] is the format of p entries, made once a count),
-- not one an entry, each a string of its own.
local pfmt = {}
local function joined(st)
  local p = st[8]
  if p == 0 then return st[1] end
  local f = pfmt[p]
  if not f then
    f = '>' .. string.rep('I7', 2 * p)
    pfmt[p] = f
  end
  return st[1] .. pk(f, unpack(st[7], 1, 2 * p))
end

-- hpush is set(h, push(g[h], us, d)) (tset for a tenant's hash tk) with
-- the stack held: push's usual path appends, any other goes to push on
-- the stack joined.
local function hpush(g, tk, h, d)
  local hs = stacks[g]
  if not hs then
    hs = {}
    stacks[g] = hs
  end
  local st = hs[h]
  if not st then
    st = {g[h] or '', false, 0, 0, 0, 0, {}, 0}
    hs[h] = st
    np = np + 1
    pend[np] = {st, g, h, tk}
  end
  if not st[2] then
    local s, m, f, a, t, w = st[1], 0, 0, 0, 0, 0
    local n, o = #s, 0
    if n > 0 and byte(s, 1) == 255 then
      local _
      _, f, a = upk('>BxxxxxBI7', s)
      o = 14
    end
    m = (n - o) / 14
    if m > 0 then t, w = upk('>I7I7', s, n - 13) end
    st[2], st[3], st[4], st[5], st[6] = m, f, a, t, w
  end
  local m, a, w = st[2], st[4], st[6]
  local e, x = us, d
  if m > 0 and st[5] - us >= 0 then e = st[5] + 1 end
  if m > 0 and d ~= 0 then
    if not (m < MAXH and w - (m > st[3] and a or 0) - d < 0) then
      -- Entries go, or the stack is full: push's other path.
      st[1], st[2], st[8] = push(joined(st), us, d), false, 0
      return
    end
    x = d + a
  else
    -- An empty stack, or a charge with no headroom: the entry alone.
    st[1], st[3], st[4], st[8], m = '', 0, 0, 0, 0
  end
  local p = st[8] + 1
  st[7][2 * p - 1], st[7][2 * p], st[8] = e, x, p
  st[2], st[5], st[6] = m + 1, e, x
end

-- join writes the held stacks' new entries, each stack once.
local function join()
  for x = 1, np do
    local e = pend[x]
    local st, g, h, tk = e[1], e[2], e[3], e[4]
    local s = joined(st)
    if tk then tset(g, h, s) else set(h, s) end
  end
  stacks, pend, np = {}, {}, 0
end

-- write writes what the batch holds; final: at the script call's end,
-- when nothing held needs forgetting (the main block starts afresh).
local function write(final)
  local ttl = moved and fmt('%d', got.xp - now)
  join()
  hset(final)
  if na > 0 then redis.call('ZADD', leases, 'NX', unpack(added, 1, na)) end
  if moved then
    -- As cover: the sentinels, and the keys kept until xp.
    redis.call('ZADD', leases, SENTINEL, '~', SENTINEL, WIDE)
    redis.call('PEXPIRE', leases, ttl)
    redis.call('ZADD', queue, SENTINEL, '~')
    redis.call('PEXPIRE', queue, ttl)
    redis.call('PEXPIRE', state, ttl)
  end
  if final then return end
  added, na, moved, ids = {}, 0, false, {}
  scores, waiters, slots = nil, nil, nil
end

-- What fast fills for a call and the loop below reads before the next
-- one, made once a script (a table made, or grown, a call costs more than
-- the work it holds): the fields to read of the state and of the tenant's
-- hash, and the buckets' TATs after the charge and before it.
local want, twant, tats, froms = {'xp', 'pause', 'qs'}, {'xp'}, {}, {}

-- The last call's fields, sf[1..sn] (sn false: none), whether it sent a
-- version (sv), and what fast made of them: the fields to read, want[1..sw]
-- and twant[1..stw]. rg is the state's table they were last read into. A
-- batch's calls most often name the same fields: fast then compares them
-- and reads nothing more.
local sf, sn, sw, stw, sv, rg = {}, false, 0, 0, false, false

-- The last loss line read and its first number, and the last tenant's
-- priority read and the share it keeps (see fast): pure functions of the
-- strings, so they may outlive a script call.
local lastlf, lastseen, lastpr, lastkeep = false, 0, false, nil

-- fast says whether the call whose len arguments follow A[o] (its id's
-- score, or false; tk its tenant's hash, or false) is the common call,
-- and returns its bucket count, their TATs after the charge and before it
-- (see room in acquire.lua), xr (the xp it reads) and its tenant's
-- fields (tg). Its argument j is A[o + j], j <= len.
local function fast(o, len, score, tk)
  if score or ids[A[o + 1]] or A[o + 8] ~= '0' then return false end
  local n = floor((len - 8) / 3)
  local myv = KEYS[4] and len > 8 + 3 * n and A[o + 9 + 3 * n]
  local same = n == sn and not myv == not sv
  if same then
    for k = 1, n do
      if A[o + 8 + k] ~= sf[k] then
        same = false
        break
      end
    end
  end
  local w, tw = sw, stw
  if same then
    if tw > 1 and not tk then return false end
  else
    sn, w, tw = false, 3, 1 -- (want changes: no shape is held until it is whole)
    for k = 1, n do
      local f = A[o + 8 + k]
      local b = kinds[f] or kind(f)
      sf[k] = f
      if b == 126 then return false end
      -- A field named twice in one call is charged from the value read
      -- before either charge (see admit in acquire.lua): acquire1's.
      for j = o + 9, o + 7 + k do
        if A[j] == f then return false end
      end
      if b == 64 or b == 37 then
        -- A tenant's bucket, or its share: in its hash.
        if not tk then return false end
        tw = tw + 1
        twant[tw] = f
        if b == 64 then
          tw = tw + 1
          twant[tw] = hnames[f]
        end
      else
        want[w + 1], want[w + 2] = f, hnames[f]
        w = w + 2
      end
    end
    if myv then
      w = w + 1
      want[w] = 'dv'
    end
    sn, sw, stw, sv = n, w, tw, myv
  end
  if not same or rg ~= got then
    read(want, w)
    rg = got
  end
  if myv and got.dv ~= myv then return false end
  local xr = got.xp or 0
  if xr ~= 0 then
    -- Held as the number it reads as (unchanged, it is not written).
    xr = xr + 0
    got.xp = xr
  end
  local lf = myv and len > 9 + 3 * n and A[o + 10 + 3 * n]
  if lf then
    -- Every call of a process sends the same line until the xp it saw
    -- moves: its first number is read once.
    if lf ~= lastlf then
      local sp = string.find(lf, ' ', 1, true) or #lf + 1
      lastlf, lastseen = lf, string.sub(lf, 1, sp - 1) + 0
    end
    if lastseen - now > 1000 and xr < lastseen then return false end
  end
  if got.qs then
    local u = string.match(got.qs, '^(%d+) %d+ %d+ %a+$')
    if u and u + 0 > now then return false end
  end
  if got.pause and got.pause + 0 > now then return false end
  local tg, keep = tk and tread(tk, twant, tw), nil
  if tk then
    -- The shares first: a call over its tenant's share leaves keep of
    -- each budget bucket (room's arithmetic).
    local over = false
    for k = 1, n do
      local f = A[o + 8 + k]
      if kinds[f] == 37 then
        local tat, charge, allow = tg[f], A[o + 7 + n + 2 * k] + 0, A[o + 8 + n + 2 * k] + 0
        tat = tat and tat + 0 or us
        if tat - us < 0 then tat = us end
        froms[k], tats[k] = tat, tat + charge
        if tat + charge - us - 2 * allow > 0 then tats[k] = us + 2 * allow end
        if tat + charge - us - allow > 0 then over = true end
      end
    end
    if over then
      -- As lastlf: a tenant's calls send the same priority.
      local pr = A[o + 2]
      if pr ~= lastpr then
        local ppm = string.match(pr, '^0:(%d+)$')
        lastpr, lastkeep = pr, ppm and ppm / 1000000
      end
      keep = lastkeep
    end
  end
  for k = 1, n do
    local f = A[o + 8 + k]
    local b = kinds[f]
    if b ~= 37 then
      local charge, allow = A[o + 7 + n + 2 * k] + 0, A[o + 8 + n + 2 * k] + 0
      if charge > allow then return false end
      if keep and b ~= 64 then allow = allow - floor(allow * keep) end
      local tat
      if b == 64 then tat = tg[f] else tat = got[f] end
      tat = tat and tat + 0 or us
      if tat - us < 0 then tat = us end
      froms[k], tats[k] = tat, tat + charge
      if tats[k] - us - allow > 0 then return false end
    end
  end
  local cl = A[o + 5]
  if cl ~= '0' then
    if waiters == nil then waiters = redis.call('ZCARD', queue) > 1 end
    if waiters then return false end
    -- The slots held: those stored, and those this batch admitted and
    -- writes at the end (each live and not pending).
    if not slots then slots = redis.call('ZCOUNT', leases, '(' .. fmt('%d', now), LIVE) + na / 2 end
    if math.min(cl - slots, 100) <= 0 or A[o + 2] == '1' and slots - A[o + 6] >= 0 then return false end
  end
  return true, n, tats, froms, xr, tg
end

local replies, last

-- The main block: one script call's work (see batch.lua).
begin()
scores, base, ids, added, na, moved, waiters, slots = nil, nil, {}, {}, 0, false, nil, nil
stacks, pend, np = {}, {}, 0
replies, last = {}, nil
clock()
for x = 1, c do
  local o, len = calls[x], lens[x]
  local id = A[o + 1]
  -- Each call its own µs, as singles have (each runs longer than one):
  -- a give-back from a lease charged in the µs of a later charge is
  -- bounded by that charge (see prelude.lua), so one µs for all would cut
  -- every refund of a batch short by the charges after its own.
  if last and us - last <= 0 then
    us = last + 1
    if floor(us / 1000) ~= now then
      write() -- a new ms: what the state holds is read again for it
      now = floor(us / 1000)
    end
  end
  if not scores then
    local all = {}
    for y = x, c do all[y - x + 1] = A[calls[y] + 1] end
    scores, base = redis.call('ZMSCORE', leases, unpack(all)), x - 1
  end
  local tk = tks[x]
  local ok, n, tats, froms, xr, tg = fast(o, len, scores[x - base], tk)
  if not ok then
    write()
    local r, o = acquire1(keys(x), argv(x)), 7 * x - 7
    for j = 1, 7 do replies[o + j] = r[j] end
    last = r[3]
    clock()
  else
    -- admit: the lease holds its slot from now (see acquire.lua).
    local expiry = now + A[o + 4]
    na = na + 2
    added[na - 1], added[na], ids[id] = fmt('%d', expiry), id, true
    if slots then slots = slots + 1 end
    if now % 16 == 0 then
      local expired = redis.call('ZCOUNT', leases, '-inf', fmt('%d', now - REAP_AFTER))
      if expired > 0 then
        redis.call('ZREMRANGEBYRANK', leases, '0', fmt('%d', math.min(expired, 100) - 1))
      end
      local stale = redis.call('ZRANGEBYSCORE', leases, fmt('%d', PENDING),
        fmt('%d', PENDING + now - REAP_AFTER), 'LIMIT', '0', '100')
      if stale[1] then redis.call('ZREM', leases, unpack(stale)) end
    end
    -- A tenant's buckets and shares go to its hash, which its own xp
    -- keeps (tcover's rule).
    local ms, tms = expiry, 0
    for k = 1, n do
      local f = A[o + 8 + k]
      local b, h = kinds[f], hnames[f]
      local v = tats[k]
      -- (froms[k] is never before us: the headroom is >= 0.)
      if b == 64 or b == 37 then
        tset(tg, f, v, true)
        if b == 64 then hpush(tg, tk, h, froms[k] - us) end
        if v / 1000 > tms then tms = v / 1000 end
      else
        -- set(f, v, true), inline: a function call costs more.
        if not dirty[f] then
          nd = nd + 1
          dirty[nd] = f
        end
        dirty[f], got[f] = 2, floor(v)
        hpush(got, false, h, froms[k] - us)
        if v / 1000 > ms then ms = v / 1000 end
      end
    end
    if tk then
      local need = ceil(max(tms, now)) + 1000
      if need > (tg.xp or 0) + 0 then tset(tg, 'xp', need + max(ceil((need - now) / 4), TIDLE), true) end
    end
    local need = ceil(ms) + 1000
    if need > xr then
      set('xp', need + ceil((need - now) / 4), true)
      moved = true
    end
    local o = 7 * x - 7
    replies[o + 1], replies[o + 2], replies[o + 3], replies[o + 4] = 1, 0, us, ''
    replies[o + 5], replies[o + 6], replies[o + 7], last = expiry, 0, xr, us
  end
end
write(true)
return replies
