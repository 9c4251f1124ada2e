-- keepalive.lua: keep a long call's lease (and its concurrency slot) alive.
--
-- KEYS[1]  state hash (its xp: the keys must outlive this lease)
-- KEYS[2]  lease zset
-- KEYS[3]  slot queue (its TTL is kept with the others: see cover)
-- ARGV[1]  lease id
-- ARGV[2]  TTL in ms from now (integer > 0); a lease's expiry only moves later
-- ARGV[3]  (optional) the concurrency limit (integer >= 0; 0 = none), and
-- ARGV[4]  the slots batch calls may use, as acquire takes them: with a
--          limit, a slot that a lease's expiry freed goes to the slot
--          queue's head here (see give in slots.lua), as a settle's
--          does, so a waiter need not ask again to find it
--
-- Returns {code, now_us, expiry_ms}: code 1 extended, 0 unknown, ended or
-- already expired (its slot was counted as free, so it cannot be taken back).

local state, leases = KEYS[1], KEYS[2]
local id = ARGV[1]
local t0 = redis.call('TIME')
local us = t0[1] * 1000000 + t0[2]
local now = floor(us / 1000)

local score = redis.call('ZSCORE', leases, id)
-- Slots expired leases freed go to the queue's waiters, whatever the
-- answer: this call may be the first to run since they expired.
if ARGV[3] and ARGV[3] ~= '0' then
  glib(cover, push, slib, PENDING, LIVE, BATCH, SK)(now, us, ARGV[3] + 0, ARGV[4] + 0)
end
if not score then return {0, us, 0} end
-- A pending lease (see prelude.lua) keeps its offset: it still holds no slot.
local offset = 0
score = score + 0
if score >= PENDING then offset = PENDING end
score = score - offset
if score <= now then return {0, us, 0} end
local expiry = max(score, now + ARGV[2])
redis.call('ZADD', leases, 'XX', fmt('%d', offset + expiry), id)
local h = redis.call('HMGET', state, 'xp', 'pause')
-- As for an admission: the keys, and never below a pause in force.
cover(now, (h[1] or 0) + 0, max(expiry, (h[2] or 0) + 0), {}, 0)
return {1, us, expiry}
