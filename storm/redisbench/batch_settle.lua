-- batch_settle.lua (round 7 prototype, after the prelude and settle.lua's
-- step functions): end k leases of one budget, in order, each as
-- settle.lua would end it alone, with one TIME, one ZMSCORE of the k
-- ids, one HMGET of the buckets corrected, one ZREM of the k leases and
-- one HSET (cover, for a debt) for the batch. The TATs and give-back
-- stacks are read into locals once and corrected in memory, in order
-- (givetat, push: settle.lua's and the prelude's own functions).
--
-- ARGV: k, then per call its argument count and settle.lua's ARGV. Reply:
-- the k replies. Only the paths the measured regimes take are written:
-- no tenant, no sliding rate, no pending lease, no waiter for a freed
-- slot; anything else raises 'batch: slow path' before anything is
-- written.
local BARGV = ARGV
local k = BARGV[1] + 0
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)
if KEYS[5] then return redis.error_reply('batch: slow path (tenant)') end
local leases = KEYS[2]
-- The ids, and the fields the batch corrects (each call's own, in the
-- order first met).
local ids, idx, fields, nf = {}, {}, {}, 0
local p = 2
for i = 1, k do
  local len = BARGV[p] + 0
  ids[i] = BARGV[p + 1]
  for q = p + 5, p + len - 1, 2 do
    local f = BARGV[q]
    if not idx[f] then
      local b = byte(f, 1)
      if b == 126 or b == 64 or b == 37 then return redis.error_reply('batch: slow path (bucket kind)') end
      nf = nf + 1
      fields[nf], idx[f] = f, nf
    end
  end
  p = p + len + 1
end
local scores = redis.call('ZMSCORE', leases, unpack(ids, 1, k))
local names = {'xp', 'pause'}
for j = 1, nf do names[1 + 2 * j], names[2 + 2 * j] = fields[j], fields[j] .. '.h' end
local h = nf > 0 and redis.call('HMGET', KEYS[1], unpack(names, 1, 2 + 2 * nf)) or {}
local tat, stack, dirty, sdirty = {}, {}, {}, {}
for j = 1, nf do tat[j], stack[j] = h[1 + 2 * j], h[2 + 2 * j] end
local limit = BARGV[2 + 3]
local xcur, xpw = (h[1] or 0) + 0, false
local out, rem, nr, freed = {}, {}, 0, false
p = 2
for i = 1, k do
  local len = BARGV[p] + 0
  local score = scores[i]
  if not score then
    if limit ~= '0' then return redis.error_reply('batch: slow path (a waiter)') end
    out[i] = {0, us}
  else
    score = score + 0
    if score >= PENDING then return redis.error_reply('batch: slow path (pending)') end
    if score - now > 0 then
      nr = nr + 1
      rem[nr] = ids[i]
      if limit ~= '0' then freed = true end
      local charged = BARGV[p + 2] + 0
      local t = math.min(charged, us)
      local ms = nil
      for q = p + 5, p + len - 1, 2 do
        local j = idx[BARGV[q]]
        local d = BARGV[q + 1] + 0
        if d < 0 then
          local to, ns = givetat(fields[j], tat[j], stack[j], -d, t, us)
          if to then
            tat[j], dirty[j] = to, true
            if ns then stack[j], sdirty[j] = ns, true end
          end
        elseif d > 0 then
          local x = tat[j] and tat[j] + 0 or us
          if x - us < 0 then x = us end
          stack[j] = push(stack[j], us, x - us)
          x = x + d
          tat[j], dirty[j], sdirty[j] = x, true, true
          if not ms then ms = (h[2] or 0) + 0 end -- a pause in force outlives a debt's write
          if x / 1000 > ms then ms = x / 1000 end
        end
      end
      if ms then
        -- A debt may lengthen the keys' life (cover's rule, in memory).
        local need = ceil(max(ms, now)) + 1000
        if need > xcur then xcur, xpw = need + ceil((need - now) / 4), true end
      end
      out[i] = {1, us}
    else
      if limit ~= '0' then freed = true end
      out[i] = {2, us}
    end
  end
  p = p + len + 1
end
if nr > 0 then redis.call('ZREM', leases, unpack(rem, 1, nr)) end
local args, a = {}, 0
for j = 1, nf do
  if dirty[j] then
    args[a + 1], args[a + 2] = fields[j], fmt('%d', tat[j])
    a = a + 2
    if sdirty[j] then
      args[a + 1], args[a + 2] = names[2 + 2 * j], stack[j]
      a = a + 2
    end
  end
end
if xpw then args[a + 1], args[a + 2] = 'xp', fmt('%d', xcur); a = a + 2 end
if a > 0 then redis.call('HSET', KEYS[1], unpack(args, 1, a)) end
if xpw then
  local ttl = fmt('%d', xcur - now)
  redis.call('ZADD', KEYS[2], SENTINEL, '~', SENTINEL, WIDE)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('ZADD', KEYS[3], SENTINEL, '~')
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
end
-- A freed slot goes to the queue's head, once for the batch (settle.lua
-- gives after each call).
if freed and redis.call('ZCARD', KEYS[3]) > 1 then
  glib(cover, push, slib, PENDING, LIVE, BATCH, SK)(now, us, limit + 0, BARGV[2 + 4] + 0)
end
return out
