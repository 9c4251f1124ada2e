-- pause.lua: make every caller of the budget wait at least ARGV[1] ms from now.
-- A pause only ever grows: a shorter pause than the one set changes nothing.
--
-- KEYS[1]  state hash
-- KEYS[2]  lease zset (unused)
-- ARGV[1]  pause in ms (integer > 0)
--
-- Returns {remaining_ms, now_ms}: the pause in force after this call.

local state = KEYS[1]
local ms = tonumber(ARGV[1])
local now = now_ms()
local pause = tonumber(redis.call('HGET', state, 'pause')) or 0
if now + ms > pause then
  pause = now + ms
  redis.call('HSET', state, 'pause', pause)
end
extend_ttl(state, pause - now + 1000)
return {pause - now, now}
