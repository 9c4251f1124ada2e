-- batch.lua: what acquires.lua and settles.lua share, placed before each
-- (see Source in lua.go): the batch's calls, its clock, and the state
-- hash's fields it holds between two writes.
--
-- Each of the two scripts ends with its main block, one script call's
-- work, from a line that says so. Loaded as a Redis function (see
-- library.go), the text before that line runs once, on the function's
-- first call, and the main block on every call: so what belongs to one
-- call is set in the main block, or by begin (below), never by the text
-- before it.

-- The keys, and the groups: call c's ARGV is A[calls[c] + 1 ..
-- calls[c] + lens[c]] (A: ARGV), read where it is (a table a call costs
-- more than the reads it saves); tks[c] its tenant's hash (KEYS[t] for
-- a group whose t is not 0), or false.
local state, leases, queue, A
local calls, lens, tks, c

-- The clock, read again after each call the single script runs itself.
local us, now

-- got holds the state hash's fields read (false: missing) and changed;
-- dirty those changed, in order. A TAT or an xp changed is held as a
-- number, and written as its decimal digits once, by hset: a batch moves
-- a bucket's TAT once a call, and a string.format costs about as much as
-- a command's argument. read reads those of want[1..w] not yet
-- read, in one HMGET; set changes one. A tenant's hash is held alike, in
-- one table a tenant (tgs[tk], listed in tl): its fields by name, and in
-- its array part those changed, in order (see tread); tset changes one.
-- hset writes what changed, the state's in one HSET and each tenant's in
-- one (and its expiry, moved to its xp when a charge moved that: see
-- tcover in prelude.lua), and forgets all, but at the script call's end
-- (final): begin forgets then.
local got, dirty, nd
local tgs, tl, nt

-- forget forgets every field read and changed. The tenants' tables are
-- made when a call first reads one (a budget without tenants makes none).
local function forget()
  got, dirty, nd = {}, {}, 0
  tgs, nt = false, 0
end

-- begin starts a script call: its keys, its groups, and nothing held.
local function begin()
  state, leases, queue, A = KEYS[1], KEYS[2], KEYS[3], ARGV
  calls, lens, tks, c = {}, {}, {}, 0
  local i, m = 1, #A
  while i <= m do
    local t, n = A[i] + 0, A[i + 1] + 0
    c = c + 1
    calls[c], lens[c] = i + 1, n
    tks[c] = t > 0 and KEYS[t]
    i = i + n + 2
  end
  forget()
end

-- keys and argv return the KEYS and ARGV the single script would take
-- for call c: made only for a call the batch does not run itself.
local function keys(c) return {state, leases, queue, KEYS[4], tks[c] or nil} end
local function argv(c) return {unpack(A, calls[c] + 1, calls[c] + lens[c])} end

-- A batch's calls name the same few fields again and again. kinds[f] is
-- field f's first byte (126, a sliding rate's '~', for a tenant's sliding
-- rate '@~' or '%~' too: neither takes a batch's own path) and hnames[f]
-- its stack's field, f .. '.h', each made once a script by kind: a
-- concatenation or a byte() a call costs more than a table's read.
local kinds, hnames = {}, {}
local function kind(f)
  local b = byte(f, 1)
  if (b == 64 or b == 37) and byte(f, 2) == 126 then b = 126 end
  kinds[f], hnames[f] = b, f .. '.h'
  return b
end

local function clock()
  local t = redis.call('TIME')
  us = t[1] * 1000000 + t[2]
  now = floor(us / 1000)
end

-- need holds the fields fetch asks for (made once a script: a table a
-- call costs more than its work).
local need = {}

local function fetch(key, g, want, w)
  local nn = 0
  for x = 1, w do
    if g[want[x]] == nil then
      nn = nn + 1
      need[nn] = want[x]
    end
  end
  if nn > 0 then
    local h = redis.call('HMGET', key, unpack(need, 1, nn))
    for x = 1, nn do g[need[x]] = h[x] end
  end
end

local function read(want, w) fetch(state, got, want, w) end

-- tread returns tenant tk's table, its fields of want[1..w] read. A
-- tenant is most often read once a batch, its fields all at once: its
-- table is then made with them, sized for them (a table grown a key at a
-- time is rehashed at each power of two), and with room in its array
-- part for those changed (at most those read): [1] their count, then
-- each one's name and whether it holds a number (see tset).
local function tread(tk, want, w)
  if not tgs then tgs, tl = {}, {} end
  local g = tgs[tk]
  if g then
    fetch(tk, g, want, w)
    return g
  end
  local h = redis.call('HMGET', tk, unpack(want, 1, w))
  if w == 1 then
    g = {0, false, false, [want[1]] = h[1]}
  elseif w == 2 then
    g = {0, false, false, false, false, [want[1]] = h[1], [want[2]] = h[2]}
  elseif w == 3 then
    g = {0, false, false, false, false, false, false, [want[1]] = h[1], [want[2]] = h[2], [want[3]] = h[3]}
  else
    g = {0, false, false, false, false, false, false, false, false, false, false, false, false, false, false,
      [want[1]] = h[1], [want[2]] = h[2], [want[3]] = h[3], [want[4]] = h[4],
      [w > 4 and want[5] or 0] = h[5], [w > 5 and want[6] or 0] = h[6], [w > 6 and want[7] or 0] = h[7]}
    for x = 8, w do g[want[x]] = h[x] end
  end
  tgs[tk] = g
  nt = nt + 1
  tl[nt] = tk
  return g
end

-- mark notes in d that field f changed (n: d's count of fields), and
-- whether its value is a number (num), which hset writes as its digits.
local function mark(d, f, n, num)
  if not d[f] then
    n = n + 1
    d[n] = f
  end
  d[f] = num and 2 or 1
  return n
end

-- set changes field f to v: a string, or with num a number (a TAT, an xp),
-- kept as the digits it is written as would read back (a single script
-- rereads its own writes). Saying which costs less than asking type().
local function set(f, v, num)
  if num then v = floor(v) end
  nd = mark(dirty, f, nd, num)
  got[f] = v
end

-- tset changes field f of a tenant's table g (see tread) to v, as set.
local function tset(g, f, v, num)
  if num then v = floor(v) end
  local n, x = g[1], 2
  while x <= 2 * n and g[x] ~= f do x = x + 2 end
  if x > 2 * n then g[1] = n + 1 end
  g[x], g[x + 1], g[f] = f, num or false, v
end

-- (A number goes to HSET as its decimal digits, fmt('%d'): the same bytes
-- Redis would write for it, for less than its %.17g printf costs; see
-- prelude.lua.)
-- args holds an HSET's arguments (made once a script, as need).
local args = {}
local function hset(final)
  if nd > 0 then
    for x = 1, nd do
      local f = dirty[x]
      args[2 * x - 1], args[2 * x] = f, dirty[f] == 2 and fmt('%d', got[f]) or got[f]
    end
    redis.call('HSET', state, unpack(args, 1, 2 * nd))
  end
  for y = 1, nt do
    local tk = tl[y]
    local g, xp = tgs[tk], false
    local n = g[1]
    for x = 1, n do
      local f = g[2 * x]
      args[2 * x - 1], args[2 * x] = f, g[2 * x + 1] and fmt('%d', g[f]) or g[f]
      if f == 'xp' then xp = true end
    end
    if n > 0 then redis.call('HSET', tk, unpack(args, 1, 2 * n)) end
    if xp then redis.call('PEXPIRE', tk, fmt('%d', g.xp - now)) end
  end
  if not final then forget() end
end
