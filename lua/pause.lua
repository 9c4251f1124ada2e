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
local h = redis.call('HMGET', state, 'pause', 'xp')
local pause = tonumber(h[1]) or 0
if now + ms > pause then
  pause = now + ms
  set(state, {xp = tonumber(h[2]) or 0}, now, 'pause', pause)
end
return {pause - now, now}
