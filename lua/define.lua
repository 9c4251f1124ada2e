-- define.lua: store a budget's definition if it is newer than the one
-- stored, or read the one stored.
--
-- KEYS[1]  state hash   {<prefix>:<name>}:s
-- KEYS[2]  lease zset   (not read)
-- KEYS[3]  slot queue   (not read)
-- KEYS[4]  definition   {<prefix>:<name>}:d   fields v (the version) and
--          def (the definition, as its writer encodes it: package pacer
--          writes JSON). It has no TTL: a definition outlives the idle
--          spells in which the budget's other keys expire.
-- ARGV[1]  version (integer >= 0): 0 only reads; 'next' stores the
--          definition as the version after the stored one (1 if none)
-- ARGV[2]  the definition (with a version above 0)
--
-- Returns {stored, version, definition}: stored 1 when ARGV's was stored
-- (and the state's copy of the version, field dv, set, if the state
-- exists: acquire tells callers of another version at their next call);
-- otherwise 0 with the definition stored, version 0 and '' if none. Of
-- two definitions the higher version wins; an equal one is not stored
-- again.

local cur = redis.call('HMGET', KEYS[4], 'v', 'def')
local v
if ARGV[1] == 'next' then v = (cur[1] or 0) + 1 else v = ARGV[1] + 0 end
if v == 0 or cur[1] and cur[1] + 0 >= v then
  return {0, (cur[1] or 0) + 0, cur[2] or ''}
end
local dv = fmt('%d', v)
redis.call('HSET', KEYS[4], 'v', dv, 'def', ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'dv', dv) end
return {1, v, ARGV[2]}
