#!lua name=llmpacer_bench_floor
-- batch_floor.lua: the floor of a batch (redisbench -only batch). Its two
-- functions take acquires.lua's and settles.lua's KEYS and ARGV and send
-- only the commands those send for a batch of common calls, with the
-- same keys and fields, and do no other work: no arithmetic, no give-back
-- stack touched (each is read and written back as it was), the TATs
-- written back as read. So their cost is what any script keeping this
-- state pays for the batch: the script call, its arguments and reply,
-- and the commands.
--
-- Acquire: TIME, ZMSCORE of the ids, HMGET of the fields the first call
-- names (xp, pause, qs, each bucket and its stack, dv), under a
-- concurrency limit ZCARD of the queue and ZCOUNT of the leases, HSET of
-- each bucket and its stack, ZADD NX of the leases. Settle: TIME,
-- ZMSCORE, under a concurrency limit ZCARD, HMGET of each bucket the
-- first settle corrects and its stack, ZREM of the leases, HSET of those.
-- A tenant's fields (those beginning '%' or '@') are its hash's: each
-- tenant of the batch gets one HMGET and one HSET of them (and of its xp,
-- for an acquire), as the batch scripts send.

-- rewrite writes back the fields of h read as names.
local function rewrite(key, names, h)
  local a = {}
  for x = 1, #names do a[2 * x - 1], a[2 * x] = names[x], h[x] or '' end
  redis.call('HSET', key, unpack(a))
end

-- groups returns the ids of the calls in args (each group t, n, then n
-- arguments, the id first), their count, and where the first call's
-- arguments begin and how many it has, and the tenants' KEYS indexes,
-- each once.
local function groups(args)
  local ids, n, i, ts, seen = {}, 0, 1, {}, {}
  while i <= #args do
    n = n + 1
    ids[n] = args[i + 2]
    local t = args[i] + 0
    if t > 0 and not seen[t] then
      seen[t] = true
      ts[#ts + 1] = t
    end
    i = i + args[i + 1] + 2
  end
  return ids, n, 3, args[2] + 0, ts
end

-- tenant says whether field f is a tenant's.
local function tenant(f)
  local b = f:byte(1)
  return b == 37 or b == 64
end

-- tenants reads and writes back names in each tenant's hash.
local function tenants(keys, ts, names)
  if #names == 0 then return end
  for _, t in ipairs(ts) do
    rewrite(keys[t], names, redis.call('HMGET', keys[t], unpack(names)))
  end
end


redis.register_function('llmpacer_floor_acquires', function(keys, args)
  local t = redis.call('TIME')
  local us, now = t[1] * 1000000 + t[2], t[1] * 1000 + math.floor(t[2] / 1000)
  local ids, n, o, na, ts = groups(args)
  redis.call('ZMSCORE', keys[2], unpack(ids, 1, n))
  local nb = math.floor((na - 8) / 3)
  local want, back, tw = {'xp', 'pause', 'qs'}, {}, {'xp'}
  for k = 1, nb do
    local f = args[o + 7 + k]
    if tenant(f) then
      tw[#tw + 1] = f
      if f:byte(1) == 64 then tw[#tw + 1] = f .. '.h' end
    else
      want[#want + 1], want[#want + 2] = f, f .. '.h'
      back[#back + 1], back[#back + 2] = f, f .. '.h'
    end
  end
  if keys[4] then want[#want + 1] = 'dv' end
  local h = redis.call('HMGET', keys[1], unpack(want))
  if args[o + 4] ~= '0' then
    redis.call('ZCARD', keys[3])
    redis.call('ZCOUNT', keys[2], '(' .. now, '(1000000000000000')
  end
  local vals = {}
  for x = 1, #back do vals[x] = h[x + 3] end
  rewrite(keys[1], back, vals)
  tenants(keys, ts, tw)
  local add, r = {}, {}
  local expiry = now + args[o + 3]
  for x = 1, n do
    add[2 * x - 1], add[2 * x] = expiry, ids[x]
    local q = 7 * x - 7
    r[q + 1], r[q + 2], r[q + 3], r[q + 4], r[q + 5], r[q + 6], r[q + 7] = 1, 0, us + x - 1, '', expiry, 0, 0
  end
  redis.call('ZADD', keys[2], 'NX', unpack(add))
  return r
end)

redis.register_function('llmpacer_floor_settles', function(keys, args)
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  local ids, n, o, na, ts = groups(args)
  redis.call('ZMSCORE', keys[2], unpack(ids, 1, n))
  if args[o + 2] ~= '0' then redis.call('ZCARD', keys[3]) end
  local want, tw = {}, {}
  for k = o + 4, o + na - 1, 2 do
    local f = args[k]
    if tenant(f) then
      tw[#tw + 1] = f
      if f:byte(1) == 64 then tw[#tw + 1] = f .. '.h' end
    else
      want[#want + 1], want[#want + 2] = f, f .. '.h'
    end
  end
  local h = redis.call('HMGET', keys[1], unpack(want))
  redis.call('ZREM', keys[2], unpack(ids, 1, n))
  rewrite(keys[1], want, h)
  tenants(keys, ts, tw)
  local r = {}
  for x = 1, n do r[2 * x - 1], r[2 * x] = 1, us end
  return r
end)
