-- batch.lua: what acquires.lua and settles.lua share, placed before each
-- (see Source in lua.go): the batch's calls, its clock, and the state
-- hash's fields it holds between two writes.

local state, leases, queue = KEYS[1], KEYS[2], KEYS[3]
local keys = {state, leases, queue, KEYS[4]}

-- The groups: calls[c] is call c's ARGV.
local calls, c, i = {}, 0, 1
while i <= #ARGV do
  local n = ARGV[i] + 0
  c = c + 1
  calls[c] = {unpack(ARGV, i + 1, i + n)}
  i = i + n + 1
end

-- The clock, read again after each call the single script runs itself.
local us, now
local function clock()
  local t = redis.call('TIME')
  us = t[1] * 1000000 + t[2]
  now = floor(us / 1000)
end

-- got holds the state hash's fields read (false: missing) and changed;
-- dirty those changed, in order. read reads those of want[1..w] not yet
-- read, in one HMGET; set changes one; hset writes those changed, in one
-- HSET, and forgets all.
local got, dirty, nd = {}, {}, 0

local function read(want, w)
  local need, nn = {}, 0
  for x = 1, w do
    if got[want[x]] == nil then
      nn = nn + 1
      need[nn] = want[x]
    end
  end
  if nn > 0 then
    local h = redis.call('HMGET', state, unpack(need, 1, nn))
    for x = 1, nn do got[need[x]] = h[x] end
  end
end

local function set(f, v)
  if not dirty[f] then
    nd = nd + 1
    dirty[nd], dirty[f] = f, true
  end
  got[f] = v
end

local function hset()
  if nd > 0 then
    local args = {}
    for x = 1, nd do args[2 * x - 1], args[2 * x] = dirty[x], got[dirty[x]] end
    redis.call('HSET', state, unpack(args, 1, 2 * nd))
  end
  got, dirty, nd = {}, {}, 0
end
