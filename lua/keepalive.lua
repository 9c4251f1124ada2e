-- keepalive.lua: keep a long call's lease (and its concurrency slot) alive.
--
-- KEYS[1]  state hash (its 'le': the lease set must outlive this lease)
-- KEYS[2]  lease zset
-- ARGV[1]  lease id
-- ARGV[2]  TTL in ms from now (integer > 0); a lease's expiry only moves later
--
-- Returns {code, now_ms, expiry_ms}: code 1 extended, 0 unknown or already
-- expired (its slot was counted as free, so it cannot be taken back).

local state, leases = KEYS[1], KEYS[2]
local id = ARGV[1]
local ttl = tonumber(ARGV[2])
local now = now_ms()

local score = redis.call('ZSCORE', leases, id)
if not score or tonumber(score) <= now then return {0, now, 0} end
local expiry = math.max(tonumber(score), now + ttl)
redis.call('ZADD', leases, 'XX', int(expiry), id)
local h = redis.call('HMGET', state, 'le', 'xp')
local le = tonumber(h[1]) or 0
if expiry > le then
  redis.call('PEXPIRE', leases, int(expiry - now + 1000))
  set(state, {xp = tonumber(h[2]) or 0}, now, 'le', expiry)
end
return {1, now, expiry}
