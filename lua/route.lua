-- route.lua: admit one call on one of several budgets (deployments of one
-- model: regions, projects, keys), in one round trip: on the first, in the
-- order sent, that has room now; or, when none has, on the one whose room
-- comes first, where it reserves its turn or queues for a slot as acquire
-- would.
--
-- The text sent is not this file alone (see Source in lua.go): acquire.lua,
-- with the prelude, is wrapped as `local function acq(KEYS, ARGV) ... end`
-- and this file follows. acq(k, a) is acquire.lua run on keys k and
-- arguments a, with its reply; acquire's computation exists once.
--
-- KEYS     every deployment's acquire KEYS, one after the other, in the order
--          of ARGV[3..]. On a Redis Cluster they must share one hash slot:
--          give the budgets one hash tag (see docs/operations.md).
-- ARGV[1]  d, the number of deployments (>= 1); or -d to offer the call
--          to them by room rather than in the order sent (see below)
-- ARGV[2]  the caller's max wait in ms (integer >= 0), for the last step
-- ARGV[1+2i], ARGV[2+2i]  for deployment i (1..d): how many KEYS and how
--          many ARGV its acquire takes
-- ARGV[3+2d..]  every deployment's acquire ARGV, one after the other; each
--          one's ARGV[3] (its max wait) is replaced (see below)
--
-- Deployment i is tried with max wait 0, in order: the first that admits
-- the call (code 1 or 2) wins, and a reply of code 3 (another definition
-- is stored) ends the script, nothing done on the others. A deployment that
-- is stopped (reason quota or stop) or too small (code -1) is skipped; one
-- that is paused is a candidate like any other, its wait the pause's. If
-- none admits, the candidate with the smallest wait (the first in order
-- among equals) is asked again with ARGV[2] as its max wait: an
-- interactive call then reserves its turn there, or queues for a slot; a
-- batch call is spaced along its queue. That second step is skipped when
-- it cannot change the answer: max wait 0, the candidate paused, or its
-- wait past the bound (acquire would refuse it the same way).
--
-- By room (ARGV[1] negative): before the tries, each deployment's room is
-- read, and they are tried (and compared for the second step) in the
-- order of their room, most first, equals in the order sent. A
-- deployment's room is the least, over its buckets, of what the bucket
-- would have left after the call, as a fraction of its allowance:
-- (now + allowance - max(TAT, now) - charge) / allowance, negative when
-- the call does not fit now. Sliding rates and a tenant's buckets ('~',
-- '@', '%' fields) do not count towards it, nor do slots; the tries
-- still pass over a deployment that has no room in them.
--
-- Returns {i, code, wait_ms, now_us, reason, expiry_ms, ticket}: the
-- deployment (1-based) and acquire's reply there. With no candidate (every
-- deployment stopped or too small) i is the first deployment tried and its reply
-- is given.
--
-- A call admitted here is admitted once, on one deployment. A route
-- resent after its reply was lost (go-redis retries a command whose reply
-- timed out) carries the same lease id: before trying any deployment, the
-- script looks the id up in every deployment's lease set (KEYS[2] of its
-- acquire), and where it finds it answers as that deployment's acquire
-- answers a repeated id: code 2, nothing charged again. Without the
-- look-up, a deployment tried before the one that admitted the call, and
-- with room since, would admit it a second time. An id found in a slot
-- queue (the earlier run queued it) goes on waiting there (below). It
-- costs two ZSCOREs per deployment on every route.

-- rooms returns the room (see above) of each of the d deployments, ks and
-- as their keys and arguments: 1 for one without a bucket that counts.
local function rooms(ks, as, d)
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  local room = {}
  for i = 1, d do
    local a = as[i]
    local n = math.floor((#a - 8) / 3)
    local fs, at = {}, {}
    for k = 1, n do
      local b = string.byte(a[8 + k], 1)
      if b ~= 126 and b ~= 64 and b ~= 37 then fs[#fs + 1], at[#at + 1] = a[8 + k], k end
    end
    local r = 1
    if fs[1] then
      local h = redis.call('HMGET', ks[i][1], unpack(fs))
      for j = 1, #fs do
        local k = at[j]
        local charge, allow = a[7 + n + 2 * k] + 0, a[8 + n + 2 * k] + 0
        local tat = h[j]
        if tat and tat - us >= 0 then tat = tat + 0 else tat = us end
        local left = -1
        if allow > 0 then left = (us + allow - tat - charge) / allow end
        if left < r then r = left end
      end
    end
    room[i] = r
  end
  return room
end

local d, bound = ARGV[1] + 0, ARGV[2]
local byroom = d < 0
if byroom then d = -d end
local ks, as = {}, {}
local ki, ai = 0, 2 + 2 * d
for i = 1, d do
  local nk, na = ARGV[1 + 2 * i] + 0, ARGV[2 + 2 * i] + 0
  local k, a = {}, {}
  for j = 1, nk do k[j] = KEYS[ki + j] end
  for j = 1, na do a[j] = ARGV[ai + j] end
  ks[i], as[i] = k, a
  ki, ai = ki + nk, ai + na
end

-- Admitted before, by an earlier run of this route (see above). The route
-- sends ticket 0, and acquire with ticket 0 and max wait 0 answers a known
-- id with code 2 on every path past the definition's check (a pause, a
-- stop, full buckets, no free slot, or room: its ZADD NX finds the id),
-- charging nothing and queueing nothing; code 3 if another definition was
-- stored meanwhile.
-- An id found in a deployment's slot queue (KEYS[3]) was queued there by
-- the earlier run: the call goes on waiting there, as a waiter that comes
-- back with its ticket (its queue score, less BATCH (2^52, see prelude.lua)
-- for a batch call) and the caller's max wait; tried elsewhere, it could
-- be admitted there while its entry here admits it again.
local id = as[1][1]
for i = 1, d do
  if redis.call('ZSCORE', ks[i][2], id) then
    local a = as[i]
    a[3] = '0'
    local r = acq(ks[i], a)
    return {i, r[1], r[2], r[3], r[4], r[5], r[6], r[7]}
  end
  local q = redis.call('ZSCORE', ks[i][3], id)
  if q then
    q = q + 0
    if q >= 4503599627370496 then q = q - 4503599627370496 end
    local a = as[i]
    a[3], a[8] = bound, string.format('%d', q)
    local r = acq(ks[i], a)
    return {i, r[1], r[2], r[3], r[4], r[5], r[6], r[7]}
  end
end

-- ord: the order of the tries.
local ord = {}
for i = 1, d do ord[i] = i end
if byroom then
  local room = rooms(ks, as, d)
  table.sort(ord, function(x, y)
    if room[x] ~= room[y] then return room[x] > room[y] end
    return x < y
  end)
end

-- out: the answer if the second step is skipped: the best candidate's
-- denial, or the first deployment's reply.
local best, bw, out = 0, 0, nil
for _, i in ipairs(ord) do
  local a = as[i]
  a[3] = '0'
  local r = acq(ks[i], a)
  local c = r[1]
  if c > 0 then return {i, r[1], r[2], r[3], r[4], r[5], r[6], r[7]} end
  if c == 0 and r[4] ~= 'quota' and r[4] ~= 'stop' and (best == 0 or r[2] < bw) then
    best, bw, out = i, r[2], {i, r[1], r[2], r[3], r[4], r[5], r[6], r[7]}
  elseif i == ord[1] then
    out = {i, r[1], r[2], r[3], r[4], r[5], r[6], r[7]}
  end
end
if best == 0 or bound == '0' or out[5] == 'pause' or bw > bound + 0 then
  return out
end
local a = as[best]
a[3] = bound
local r = acq(ks[best], a)
return {best, r[1], r[2], r[3], r[4], r[5], r[6], r[7]}
