-- settles.lua: end several leases of one budget in one call, each exactly
-- as settle.lua would end it alone, in the order sent, on one clock
-- reading: the k settles of a batch are the k single settles run one after
-- another in the same µs. A Pacer sends one when settles of a budget arrive
-- while its previous one is in flight (group commit); a lone settle goes to
-- settle.lua. Both scripts share a budget: a worker may send either.
--
-- KEYS[1..4] as settle.lua's. There is no KEYS[5]: a tenant's lease is
--            settled alone, by settle.lua.
-- ARGV       k groups, each the count n of its arguments, then settle.lua's
--            ARGV for one lease (n of them).
--
-- Returns the k replies, in order, each settle.lua's {code, now_us}.
--
-- The common settle (a live lease that holds no slot anyone waits for,
-- giving back to budget buckets) runs on the state read once: one TIME,
-- one ZMSCORE of the ids, one HMGET of the fields the batch corrects, and
-- at the end one ZREM and one HSET. Its arithmetic is settle.lua's own
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
local ended, ne, gone = {}, 0, {}
local waiters

local function write()
  if ne > 0 then redis.call('ZREM', leases, unpack(ended, 1, ne)) end
  hset()
  ended, ne, gone = {}, 0, {}
  scores, waiters = nil, nil
end

-- fast says whether call a (whose lease's score is score) is the common
-- settle, and returns its corrections' fields and give-backs (µs > 0).
local function fast(a, score)
  if score then
    if score + 0 >= PENDING then return false end
  elseif a[3] ~= '0' then
    return false -- a waiter may be leaving the queue
  end
  if a[3] ~= '0' then
    if waiters == nil then waiters = redis.call('ZCARD', queue) > 1 end
    if waiters then return false end
  end
  local fields, back, m = {}, {}, 0
  for k = 5, #a, 2 do
    local f = a[k]
    local b = byte(f, 1)
    -- A field named twice in one settle is corrected from the value read
    -- before either correction (see correct in settle.lua): settle1's.
    if b == 126 or b == 64 or b == 37 or back[f] then return false end
    local v = a[k + 1] + 0
    if v >= 0 then return false end
    m = m + 1
    fields[m], back[m], back[f] = f, -v, true
  end
  return true, fields, back, m
end

local replies = {}
clock()
for x = 1, c do
  local a = calls[x]
  local id = a[1]
  if not scores then
    local ids = {}
    for y = x, c do ids[y - x + 1] = calls[y][1] end
    scores, base = redis.call('ZMSCORE', leases, unpack(ids)), x - 1
  end
  local score = scores[x - base]
  if gone[id] then score = false end
  local ok, fields, back, m = fast(a, score)
  if not ok then
    write()
    replies[x] = settle1(keys, a)
    clock()
  elseif not score then
    replies[x] = {0, us}
  elseif score + 0 - now <= 0 then
    replies[x] = {2, us} -- expired: nothing changes
  else
    ne = ne + 1
    ended[ne], gone[id] = id, true
    local want = {}
    for k = 1, m do want[2 * k - 1], want[2 * k] = fields[k], fields[k] .. '.h' end
    read(want, 2 * m)
    local t = math.min(a[2] + 0, us)
    for k = 1, m do
      local f = fields[k]
      local to, ns = givetat(f, got[f], got[f .. '.h'], back[k], t, us)
      if to then
        set(f, fmt('%d', to))
        if ns then set(f .. '.h', ns) end
      end
    end
    replies[x] = {1, us}
  end
end
write()
return replies
