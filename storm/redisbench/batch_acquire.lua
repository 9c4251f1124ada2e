-- batch_acquire.lua (round 7 prototype, after the prelude): admit k
-- requests of one budget, in order, each as acquire.lua would admit it
-- alone, with one TIME, one HMGET of the state hash, one ZADD of the k
-- leases and one HSET (through cover) for the batch. The state is read
-- into locals once; each call's buckets and give-back stacks are worked
-- on in memory, in order.
--
-- ARGV: k, then per call its argument count and acquire.lua's ARGV. The
-- calls of a batch share the budget's shape (the same fields, in the same
-- order: the combiner groups calls of one budget). Reply: the k replies.
--
-- Only the path every call in the measured regimes takes is written: an
-- admission now (wait 0), no stop, no pause, no tenant, no sliding rate,
-- a definition already copied, slots free and nobody queued. Anything
-- else raises 'batch: slow path' before anything is written: the design
-- would hand such a call to acquire.lua alone.
local BARGV = ARGV
local k = BARGV[1] + 0
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)
local len1 = BARGV[2] + 0
local n = floor((len1 - 8) / 3)
local names = {'xp', 'pause'}
for j = 1, n do
  local f = BARGV[2 + 8 + j]
  local b = byte(f, 1)
  if b == 126 or b == 64 or b == 37 then return redis.error_reply('batch: slow path (bucket kind)') end
  names[2 + j], names[2 + n + j] = f, f .. '.h'
end
names[3 + 2 * n] = 'qs'
local myv = KEYS[4] and BARGV[2 + 9 + 3 * n]
if myv then names[4 + 2 * n] = 'dv' end
if KEYS[5] then return redis.error_reply('batch: slow path (tenant)') end
local h = redis.call('HMGET', KEYS[1], unpack(names))
local xr = (h[1] or 0) + 0
local dvw
if myv then
  local dv = h[4 + 2 * n]
  if not dv then
    dv = redis.call('HGET', KEYS[4], 'v') or '0'
    dvw = dv
  end
  if dv ~= myv then return redis.error_reply('batch: slow path (definition)') end
end
if h[3 + 2 * n] or (h[2] and h[2] + 0 > now) then return redis.error_reply('batch: slow path (stop or pause)') end
local tat, stack = {}, {}
for j = 1, n do
  local v = h[2 + j]
  tat[j] = v and v + 0 or us
  stack[j] = h[2 + n + j]
end
-- Slots: counted once; each admission takes one.
local limit = BARGV[2 + 5]
local free = nil
if limit ~= '0' then
  if redis.call('ZCARD', KEYS[3]) > 1 then return redis.error_reply('batch: slow path (waiters)') end
  local slots = redis.call('ZCOUNT', KEYS[2], '(' .. fmt('%d', now), LIVE)
  free = limit - slots
end
local leases = KEYS[2]
if now % 16 == 0 then
  local expired = redis.call('ZCOUNT', leases, '-inf', fmt('%d', now - REAP_AFTER))
  if expired > 0 then
    redis.call('ZREMRANGEBYRANK', leases, '0', fmt('%d', math.min(expired, 100) - 1))
  end
  local stale = redis.call('ZRANGEBYSCORE', leases, fmt('%d', PENDING),
    fmt('%d', PENDING + now - REAP_AFTER), 'LIMIT', '0', '100')
  if stale[1] then redis.call('ZREM', leases, unpack(stale)) end
end
-- xp as each call would read it: cover's rule (see prelude.lua) run in
-- memory per call, written once.
local xcur, xpw = xr, false
local out, adds, na = {}, {}, 0
local froms, tats = {}, {}
local p = 2
for i = 1, k do
  local len = BARGV[p] + 0
  if len ~= len1 then return redis.error_reply('batch: slow path (shape)') end
  local id = BARGV[p + 1]
  if BARGV[p + 2] == '1' or BARGV[p + 8] ~= '0' then return redis.error_reply('batch: slow path (batch or ticket)') end
  local reply
  for j = 1, n do
    local charge, allow = BARGV[p + 7 + n + 2 * j] + 0, BARGV[p + 8 + n + 2 * j] + 0
    if charge > allow then reply = {-1, 0, us, names[2 + j], 0, 0, xcur}; break end
    local t = tat[j]
    if t - us < 0 then t = us end
    froms[j], tats[j] = t, t + charge
    if t + charge - us - allow > 0 then return redis.error_reply('batch: slow path (wait)') end
  end
  if not reply then
    if free then
      if free <= 0 then return redis.error_reply('batch: slow path (no slot)') end
      free = free - 1
    end
    local expiry = now + BARGV[p + 4]
    adds[na + 1], adds[na + 2] = fmt('%d', expiry), id
    na = na + 2
    local ms = expiry
    for j = 1, n do
      local f = froms[j] - us
      stack[j] = push(stack[j], us, f > 0 and f or 0)
      tat[j] = tats[j]
      if tats[j] / 1000 > ms then ms = tats[j] / 1000 end
    end
    reply = {1, 0, us, '', expiry, 0, xcur}
    local need = ceil(ms) + 1000
    if need > xcur then xcur, xpw = need + ceil((need - now) / 4), true end
  end
  out[i] = reply
  p = p + len + 1
end
if na > 0 then
  if redis.call('ZADD', leases, 'NX', unpack(adds, 1, na)) ~= na / 2 then
    return redis.error_reply('batch: a lease id admitted twice (slow path; the leases added stay)')
  end
  local args, a = {}, 0
  for j = 1, n do
    args[a + 1], args[a + 2], args[a + 3], args[a + 4] = names[2 + j], fmt('%d', tat[j]), names[2 + n + j], stack[j]
    a = a + 4
  end
  if dvw then args[a + 1], args[a + 2] = 'dv', dvw; a = a + 2 end
  if xpw then args[a + 1], args[a + 2] = 'xp', fmt('%d', xcur); a = a + 2 end
  redis.call('HSET', KEYS[1], unpack(args, 1, a))
  if xpw then
    -- cover's other writes, once.
    local ttl = fmt('%d', xcur - now)
    redis.call('ZADD', KEYS[2], SENTINEL, '~', SENTINEL, WIDE)
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('ZADD', KEYS[3], SENTINEL, '~')
    redis.call('PEXPIRE', KEYS[3], ttl)
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
return out
