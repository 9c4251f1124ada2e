-- settles.lua: end several leases of one budget in one call, each exactly
-- as settle.lua would end it alone, in the order sent, on one clock
-- reading: the k settles of a batch are the k single settles run one after
-- another in the same µs. A Pacer sends one when settles of a budget arrive
-- while its previous one is in flight (group commit); a lone settle goes to
-- settle.lua. Both scripts share a budget: a worker may send either.
--
-- KEYS[1..4] as settle.lua's (all four: KEYS[4] too).
-- KEYS[5..]  the hashes of the tenants whose leases the batch ends, each
--            once.
-- ARGV       k groups, each t, the index in KEYS of its lease's tenant's
--            hash (0: none), then the count n of its arguments, then
--            settle.lua's ARGV for one lease (n of them).
--
-- Returns the k replies, in order, each settle.lua's {code, now_us}, in
-- one flat array: lease c's at 2c - 1 and 2c (see acquires.lua).
--
-- The common settle (a live lease that holds no slot anyone waits for,
-- giving back to its buckets, a tenant's included) runs on the state read
-- once: one TIME, one ZMSCORE of the ids, one HMGET of the fields the
-- batch corrects (and one of each tenant's), and at the end one ZREM and
-- one HSET (and one of each tenant's). Its arithmetic is settle.lua's own
-- (givetat). Any other (a debt, a sliding rate, a pending lease, a slot
-- someone waits for, a lease not found under a concurrency limit) writes
-- what came before, then runs settle.lua's main block (settle1) on the
-- state as it is, and the batch reads the clock and the state again after
-- it. Either way the replies and the state are those of the singles.

-- What the batch holds between two writes, besides the state hash's
-- fields (see batch.lua): the lease scores of calls from base on
-- (ZMSCORE), the leases ended, and whether the slot queue holds waiters
-- (nil: not yet read).
local scores, base
local ended, ne, gone
local waiters

-- A give-back most often moves only its stack's header (see givetat in
-- settle.lua), and rewriting a stack copies it twice. So the batch holds
-- each stack's header apart: heads[g][field] is {F, A} for the stack in
-- g (the state's fields, or a tenant's), and held lists those whose
-- header changed, each joined to its entries once, at the write.
local heads, held, nh

-- write writes what the batch holds; final: at the script call's end.
local function write(final)
  if ne > 0 then redis.call('ZREM', leases, unpack(ended, 1, ne)) end
  for x = 1, nh do
    local e = held[x]
    local hv, g, f, tk = e[1], e[2], e[3], e[4]
    if hv.held then
      local s = g[f]
      if byte(s, 1) == 255 then s = sub(s, 15) end
      s = head(hv[1], hv[2]) .. s
      if tk then tset(g, f, s) else set(f, s) end
    end
  end
  if final then return hset(true) end
  heads, held, nh = {}, {}, 0
  hset()
  ended, ne, gone = {}, 0, {}
  scores, waiters = nil, nil
end

-- give gives r µs back to bucket f of hash g (tk: a tenant's, or false)
-- for a lease charged at t (see givetat), holding its stack's header.
local function give(g, tk, f, r, t)
  local hf = hnames[f]
  local hs = heads[g]
  if not hs then
    hs = {}
    heads[g] = hs
  end
  local hv = hs[hf]
  if not hv then
    hv = {}
    hs[hf] = hv
  end
  local to, ns = givetat(f, g[f], g[hf], r, t, us, hv)
  if not to then return end
  if tk then tset(g, f, to, true) else set(f, to, true) end
  if ns == true then
    if not hv.held then
      hv.held = true
      nh = nh + 1
      held[nh] = {hv, g, hf, tk}
    end
  elseif ns then
    -- The stack rewritten whole, its header in it.
    hv.held = false
    hs[hf] = nil
    if tk then tset(g, hf, ns) else set(hf, ns) end
  end
end

-- What fast fills for a call and the loop below reads before the next
-- one, made once a script (see acquires.lua): its corrections' fields and
-- give-backs, and the fields to read of the state and of the tenant's hash.
local fields, back, want, twant = {}, {}, {}, {}

-- The last settle's fields, sf[1..sm], and the fields to read they made,
-- want[1..sw] and twant[1..stw]; rg the state's table they were last read
-- into (see sf in acquires.lua).
local sf, sm, sw, stw, rg = {}, -1, 0, 0, false

-- fast says whether the settle whose len arguments follow A[o] (its
-- lease's score is score; tk its tenant's hash, or false) is the common
-- settle, and returns its corrections' fields and give-backs (µs > 0).
local function fast(o, len, score, tk)
  local cl = A[o + 3]
  if score then
    if score + 0 >= PENDING then return false end
  elseif cl ~= '0' then
    return false -- a waiter may be leaving the queue
  end
  -- (A field without its value is settle1's.)
  if len % 2 ~= 0 then return false end
  if cl ~= '0' then
    if waiters == nil then waiters = redis.call('ZCARD', queue) > 1 end
    if waiters then return false end
  end
  local m = 0
  for k = o + 5, o + len, 2 do
    local f, v = A[k], A[k + 1]
    local b = kinds[f] or kind(f)
    if b == 126 then return false end
    -- A field named twice in one settle is corrected from the value read
    -- before either correction (see correct in settle.lua): settle1's.
    for j = 1, m do
      if fields[j] == f then return false end
    end
    if b == 64 or b == 37 then
      -- A tenant's bucket, or its share ('<µs>:<allow>' or '<µs>').
      if not tk then return false end
      if b == 37 then v = string.match(v, '^(-?%d+):%d+$') or v end
    end
    v = tonumber(v)
    if not v or not (v < 0) then return false end -- (nan: settle1's)
    m = m + 1
    fields[m], back[m] = f, -v
  end
  return true, fields, back, m
end

local replies

-- The main block: one script call's work (see batch.lua).
begin()
scores, base, ended, ne, gone, waiters = nil, nil, {}, 0, {}, nil
heads, held, nh = {}, {}, 0
replies = {}
clock()
for x = 1, c do
  local o, len = calls[x], lens[x]
  local id = A[o + 1]
  if not scores then
    local ids = {}
    for y = x, c do ids[y - x + 1] = A[calls[y] + 1] end
    scores, base = redis.call('ZMSCORE', leases, unpack(ids)), x - 1
  end
  local score = scores[x - base]
  if gone[id] then score = false end
  local tk = tks[x]
  local ok, fields, back, m = fast(o, len, score, tk)
  if not ok then
    write()
    local r = settle1(keys(x), argv(x))
    replies[2 * x - 1], replies[2 * x] = r[1], r[2]
    clock()
  elseif not score then
    replies[2 * x - 1], replies[2 * x] = 0, us
  elseif score + 0 - now <= 0 then
    replies[2 * x - 1], replies[2 * x] = 2, us -- expired: nothing changes
  else
    ne = ne + 1
    ended[ne], gone[id] = id, true
    -- The fields of each hash read at once: the state's, the tenant's
    -- (as the last settle's, most often: see sf).
    local w, tw, same = sw, stw, m == sm
    if same then
      for k = 1, m do
        if fields[k] ~= sf[k] then
          same = false
          break
        end
      end
    end
    if not same then
      w, tw = 0, 0
      for k = 1, m do
        local f = fields[k]
        local b = kinds[f]
        sf[k] = f
        if b == 64 then
          twant[tw + 1], twant[tw + 2] = f, hnames[f]
          tw = tw + 2
        elseif b == 37 then
          tw = tw + 1
          twant[tw] = f
        else
          want[w + 1], want[w + 2] = f, hnames[f]
          w = w + 2
        end
      end
      sm, sw, stw = m, w, tw
    end
    if w > 0 and (not same or rg ~= got) then
      read(want, w)
      rg = got
    end
    local tg = tw > 0 and tread(tk, twant, tw)
    local t = math.min(A[o + 2] + 0, us)
    for k = 1, m do
      local f = fields[k]
      local b = kinds[f]
      if b == 64 or b == 37 then give(tg, tk, f, back[k], t) else give(got, false, f, back[k], t) end
    end
    replies[2 * x - 1], replies[2 * x] = 1, us
  end
end
write(true)
return replies
