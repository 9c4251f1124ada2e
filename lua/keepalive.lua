-- keepalive.lua: keep a long call's lease (and its concurrency slot) alive.
--
-- KEYS[1]  state hash (its 'le' field: the lease set must outlive this lease)
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
redis.call('ZADD', leases, 'XX', expiry, id)
extend_ttl(leases, expiry - now + 1000)
if expiry > (tonumber(redis.call('HGET', state, 'le')) or 0) then
  redis.call('HSET', state, 'le', expiry)
  extend_ttl(state, expiry - now + 1000)
end
return {1, now, expiry}
